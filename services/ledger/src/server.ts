import { register, startGrpcServer, type ContextSigner, type GrpcTransport, type Logger, type RunningGrpcServer } from "@chaos-core/kit";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { createLedgerHandlers } from "./handlers/ledger-handlers.js";
import type { LedgerCore } from "./service/ledger-core.js";

/** What {@link startLedgerServer} needs; everything is built by the caller. */
export interface LedgerServerOptions {
  host: string;
  /** 0 picks a free port; read it from the result. */
  port: number;
  signer: ContextSigner;
  core: LedgerCore;
  logger: Logger;
  /** TLS and the plaintext health port (`CHAOS_CORE_GRPC_TLS_*`, `CHAOS_CORE_GRPC_HEALTH_PORT`); plaintext when unset. */
  transport?: GrpcTransport | undefined;
}

/**
 * Serves the ledger service over gRPC, with health (SERVING once bound) and reflection.
 * Nothing happens until it is called: importing this module starts nothing.
 */
export function startLedgerServer(options: LedgerServerOptions): Promise<RunningGrpcServer> {
  const { host, port, signer, core, logger, transport } = options;
  return startGrpcServer({
    host,
    port,
    signer,
    logger,
    registrations: [register(LedgerService, createLedgerHandlers(core))],
    tls: transport?.tls,
    healthPort: transport?.healthPort,
  });
}
