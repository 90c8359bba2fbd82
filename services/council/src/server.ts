import { register, startGrpcServer, type ContextSigner, type GrpcTransport, type Logger, type RunningGrpcServer } from "@chaos-core/kit";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { createCouncilHandlers } from "./handlers/council-handlers.js";
import type { CouncilSessionStore } from "./session-store.js";

/** What {@link startCouncilServer} needs; everything is built by the caller. */
export interface CouncilServerOptions {
  host: string;
  /** 0 picks a free port; read it from the result. */
  port: number;
  signer: ContextSigner;
  store: CouncilSessionStore;
  logger: Logger;
  /** TLS and the plaintext health port (`CHAOS_CORE_GRPC_TLS_*`, `CHAOS_CORE_GRPC_HEALTH_PORT`); plaintext when unset. */
  transport?: GrpcTransport | undefined;
}

/**
 * Serves the council service over gRPC, with health (SERVING once bound) and reflection.
 * Nothing happens until it is called: importing this module starts nothing.
 */
export function startCouncilServer(options: CouncilServerOptions): Promise<RunningGrpcServer> {
  const { host, port, signer, store, logger } = options;
  return startGrpcServer({
    host,
    port,
    signer,
    logger,
    registrations: [register(CouncilService, createCouncilHandlers(store))],
    tls: options.transport?.tls,
    healthPort: options.transport?.healthPort,
  });
}
