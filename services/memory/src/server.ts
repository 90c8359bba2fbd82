import { register, startGrpcServer, type ContextSigner, type GrpcTransport, type Logger, type RunningGrpcServer } from "@chaos-core/kit";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import type { MemoryStore } from "./domain/memory-store.js";
import { createMemoryHandlers } from "./handlers/memory-handlers.js";

/** What {@link startMemoryServer} needs; everything is built by the caller. */
export interface MemoryServerOptions {
  host: string;
  /** 0 picks a free port; read it from the result. */
  port: number;
  signer: ContextSigner;
  store: MemoryStore;
  logger: Logger;
  /** TLS and the plaintext health port (`CHAOS_CORE_GRPC_TLS_*`, `CHAOS_CORE_GRPC_HEALTH_PORT`); plaintext when unset. */
  transport?: GrpcTransport | undefined;
}

/**
 * Serves the memory service over gRPC, with health (SERVING once bound) and reflection.
 * Nothing happens until it is called: importing this module starts nothing.
 */
export function startMemoryServer(options: MemoryServerOptions): Promise<RunningGrpcServer> {
  const { host, port, signer, store, logger } = options;
  return startGrpcServer({
    host,
    port,
    signer,
    logger,
    registrations: [register(MemoryService, createMemoryHandlers(store))],
    tls: options.transport?.tls,
    healthPort: options.transport?.healthPort,
  });
}
