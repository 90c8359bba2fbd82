import { credentials, makeGenericClientConstructor, type ServiceError } from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import type { GrpcTls } from "./tls.js";

/**
 * Asks a server's `grpc.health.v1.Health/Check` for one service ("" = the whole server) and
 * returns the status name, e.g. "SERVING". Used by tests, `/readyz` style checks and operators.
 */
export function checkGrpcHealth(address: string, service = "", timeoutMs = 3_000, tls?: GrpcTls): Promise<string> {
  const Ctor = makeGenericClientConstructor(healthService, "grpc.health.v1.Health");
  const client = tls ? new Ctor(address, tls.channelCredentials(), tls.channelOptions()) : new Ctor(address, credentials.createInsecure());
  return new Promise<string>((resolve, reject) => {
    const check = client["check"] as (
      req: { service: string },
      opts: { deadline: number },
      cb: (err: ServiceError | null, res?: { status: string | number }) => void,
    ) => void;
    check.call(client, { service }, { deadline: Date.now() + timeoutMs }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(String(res?.status));
    });
  });
}
