import { register, startGrpcServer, type ContextSigner, type GrpcTransport, type Logger, type RunningGrpcServer } from "@chaos-core/kit";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { PolicyStore } from "./domain/policy-store.js";
import { createPolicyHandlers } from "./handlers/policy-handlers.js";

/** What the policy gRPC server needs; everything is built by the caller. */
export interface PolicyServerOptions {
  readonly host: string;
  readonly port: number;
  readonly signer: ContextSigner;
  readonly store: PolicyStore;
  readonly logger: Logger;
  /** TLS and the plaintext health port (`CHAOS_CORE_GRPC_TLS_*`, `CHAOS_CORE_GRPC_HEALTH_PORT`); plaintext when unset. */
  readonly transport?: GrpcTransport | undefined;
}

/**
 * The policy service as a gRPC server (with health and reflection). Creating it has no side
 * effect; `start()` binds the port and reports SERVING.
 */
export function createPolicyServer(options: PolicyServerOptions): { start(): Promise<RunningGrpcServer> } {
  const handlers = createPolicyHandlers(options.store);
  return {
    start: () =>
      startGrpcServer({
        host: options.host,
        port: options.port,
        signer: options.signer,
        logger: options.logger,
        registrations: [register(PolicyService, handlers)],
        tls: options.transport?.tls,
        healthPort: options.transport?.healthPort,
      }),
  };
}
