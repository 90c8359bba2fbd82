import { toBinary, type DescFile } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { ReflectionService } from "@grpc/reflection";
import { HealthImplementation } from "grpc-health-check";
import type { ContextSigner } from "../context.js";
import type { Logger } from "../logger.js";
import { addGrpcService } from "./grpc.js";
import { GRPC_SERVER_CONNECTION_AGE_MS } from "./target.js";
import type { GrpcTls } from "./tls.js";
import type { AnyService, ServiceImpl } from "./types.js";

/** One service to serve: its descriptor and its implementation. */
export interface Registration<S extends AnyService = AnyService> {
  service: S;
  impl: ServiceImpl<S>;
}

/** Pairs a descriptor with its implementation, keeping the two types tied together. */
export function register<S extends AnyService>(service: S, impl: ServiceImpl<S>): Registration {
  return { service, impl } as unknown as Registration;
}

/**
 * The health service name that answers SERVING as long as the process runs (a liveness probe:
 * `grpc: {port, service: liveness}`); "" and each service's name say whether it is ready.
 */
export const LIVENESS_HEALTH_SERVICE = "liveness";

export interface RunningGrpcServer {
  readonly port: number;
  /** The plaintext health-only port, when one was asked for. */
  readonly healthPort: number | undefined;
  readonly health: HealthImplementation;
  /**
   * Sets health (overall and per service) to SERVING or NOT_SERVING, e.g. NOT_SERVING until the
   * database's migrations are current. Once shutdown has begun it stays NOT_SERVING.
   */
  setServing(serving: boolean): void;
  /** Marks every service NOT_SERVING, lets in-flight calls finish, then stops. */
  shutdown(graceMs?: number): Promise<void>;
}

function fileWithDeps(file: DescFile, seen = new Set<string>()): DescFile[] {
  if (seen.has(file.name)) return [];
  seen.add(file.name);
  return [file, ...file.dependencies.flatMap((d) => fileWithDeps(d, seen))];
}

/** Feeds reflection with the serialized descriptors of each service's file and imports. */
function reflectionFor(registrations: Registration[]): ReflectionService {
  const pkg: Record<string, { fileDescriptorProtos: Buffer[] }> = {};
  for (const { service } of registrations) {
    pkg[service.typeName] = {
      fileDescriptorProtos: fileWithDeps(service.file).map((f) =>
        Buffer.from(toBinary(FileDescriptorProtoSchema, f.proto)),
      ),
    };
  }
  return new ReflectionService(pkg as unknown as ConstructorParameters<typeof ReflectionService>[0]);
}

/**
 * Starts a gRPC server with the given services plus `grpc.health.v1` and server reflection.
 * Health reports SERVING for "" and for each service name once the port is bound. Each client
 * connection is closed gracefully after about `maxConnectionAgeMs` (default
 * {@link GRPC_SERVER_CONNECTION_AGE_MS}), so callers look the service's name up again and spread
 * onto replicas added since.
 */
export async function startGrpcServer(options: {
  host: string;
  port: number;
  signer: ContextSigner;
  registrations: Registration[];
  logger: Logger;
  /** How long a client connection lives before the server asks it to reconnect (GOAWAY). */
  maxConnectionAgeMs?: number;
  /** How long the calls on an aged connection may still run before it is closed. */
  maxConnectionAgeGraceMs?: number;
  /** TLS (mutual when its config says so); plaintext without. */
  tls?: GrpcTls | undefined;
  /**
   * A second port, plaintext, serving only `grpc.health.v1` (the same statuses): the kubelet's
   * gRPC probe cannot speak TLS. 0 picks a free port.
   */
  healthPort?: number | undefined;
}): Promise<RunningGrpcServer> {
  const { host, port, signer, registrations, logger } = options;
  const server = new Server({
    "grpc.max_connection_age_ms": options.maxConnectionAgeMs ?? GRPC_SERVER_CONNECTION_AGE_MS.maxAge,
    "grpc.max_connection_age_grace_ms": options.maxConnectionAgeGraceMs ?? GRPC_SERVER_CONNECTION_AGE_MS.grace,
  });
  for (const { service, impl } of registrations) addGrpcService(server, service, impl, signer);
  const health = new HealthImplementation({ "": "NOT_SERVING" });
  health.addToServer(server);
  reflectionFor(registrations).addToServer(server);

  const bind = (srv: Server, p: number, creds: ServerCredentials) =>
    new Promise<number>((resolve, reject) => srv.bindAsync(`${host}:${p}`, creds, (err, bp) => (err ? reject(err) : resolve(bp))));
  const bound = await bind(server, port, options.tls ? options.tls.serverCredentials() : ServerCredentials.createInsecure());
  let healthServer: Server | undefined;
  let healthBound: number | undefined;
  if (options.healthPort !== undefined) {
    healthServer = new Server();
    health.addToServer(healthServer);
    try {
      healthBound = await bind(healthServer, options.healthPort, ServerCredentials.createInsecure());
    } catch (err) {
      server.forceShutdown();
      throw err;
    }
  }
  const names = ["", ...registrations.map((r) => r.service.typeName)];
  for (const name of names) health.setStatus(name, "SERVING");
  // Liveness apart from readiness: SERVING while the process runs, also while it waits for its
  // migrations or drains (a liveness probe on "" would restart a pod that only waits).
  health.setStatus(LIVENESS_HEALTH_SERVICE, "SERVING");
  logger.info(
    { address: `${host}:${bound}`, tls: options.tls ? (options.tls.config.mutual ? "mutual" : "server") : "off", healthPort: healthBound, services: names.slice(1) },
    "gRPC server listening",
  );

  let stopping = false;
  return {
    port: bound,
    healthPort: healthBound,
    health,
    setServing(serving) {
      if (stopping) return;
      for (const name of names) health.setStatus(name, serving ? "SERVING" : "NOT_SERVING");
    },
    shutdown: (graceMs = 10_000) =>
      new Promise<void>((resolve) => {
        stopping = true;
        for (const name of names) health.setStatus(name, "NOT_SERVING");
        const timer = setTimeout(() => {
          server.forceShutdown();
          healthServer?.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          // The health port answers NOT_SERVING until the calls have finished, then goes too.
          healthServer?.forceShutdown();
          resolve();
        });
      }),
  };
}
