/**
 * The council service run alone as a gRPC server, the way Kubernetes runs it:
 * telemetry → config → database → migrations → store → server → signals.
 * Prints nothing on stdout; logs are JSON on stderr.
 */
import type { Db, Logger } from "@chaos-core/kit";

// The bootstrap first (.env, then telemetry): its loader hook has to be in place before pg and grpc-js are imported,
// which is why everything else below is imported dynamically.
await import("@chaos-core/kit/telemetry");
const { ContextSigner, createLogger, loadLifecycleConfig, onShutdown, openGrpcTransport, schemaGate } = await import("@chaos-core/kit");
const { loadCouncilConfig } = await import("./config.js");
const { openCouncilDb } = await import("./adapters/open-db.js");
const { migrateCouncil, pendingCouncilMigrations } = await import("./adapters/migrations.js");
const { createSqlCouncilStore } = await import("./adapters/sql-store.js");
const { startCouncilServer } = await import("./server.js");

let logger: Logger = createLogger("council");
let db: Db | undefined;
try {
  const config = loadCouncilConfig();
  const lifecycle = loadLifecycleConfig();
  logger = createLogger("council", config.logLevel);
  // CHAOS_CORE_GRPC_TLS_*: the certificate files are read and checked now (a problem stops the start, naming the variable).
  const transport = openGrpcTransport(logger);
  db = await openCouncilDb(config.storage);
  // CHAOS_CORE_MIGRATE=auto applies the migrations now; verify serves NOT_SERVING until they are current.
  const migrating = db;
  const schema = await schemaGate(lifecycle.migrate, { apply: () => migrateCouncil(migrating), pending: () => pendingCouncilMigrations(migrating), logger });
  const server = await startCouncilServer({
    host: config.host,
    port: config.port,
    signer: new ContextSigner(config.contextKey, [config.contextKeyAccepted]),
    store: createSqlCouncilStore(db),
    logger,
    transport,
  });
  const opened = db;
  schema.hold(server);
  onShutdown(logger, async (graceMs) => {
    schema.stop();
    await server.shutdown(graceMs);
    await opened.close();
  }, lifecycle.shutdownGraceMs);
} catch (err) {
  logger.fatal({ err }, (err as Error).message ?? "failed to start");
  await db?.close().catch(() => undefined);
  process.exit(1);
}
