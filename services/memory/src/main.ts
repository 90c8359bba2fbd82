/**
 * The memory service run alone as a gRPC server, the way Kubernetes runs it:
 * telemetry → config → database → migrations → store → server → signals.
 * Prints nothing on stdout; logs are JSON on stderr.
 */
import type { Db, Logger } from "@chaos-core/kit";

// The bootstrap first (.env, then telemetry): its loader hook has to be in place before pg and grpc-js are imported,
// which is why everything else below is imported dynamically.
await import("@chaos-core/kit/telemetry");
const { ContextSigner, createLogger, loadLifecycleConfig, onShutdown } = await import("@chaos-core/kit");
const { loadMemoryConfig } = await import("./config.js");
const { openMemoryDb } = await import("./adapters/open-db.js");
const { migrateMemory } = await import("./adapters/migrations.js");
const { createSqlMemoryStore } = await import("./adapters/sql-store.js");
const { startMemoryServer } = await import("./server.js");

let logger: Logger = createLogger("memory");
let db: Db | undefined;
try {
  const config = loadMemoryConfig();
  const lifecycle = loadLifecycleConfig();
  logger = createLogger("memory", config.logLevel);
  db = await openMemoryDb(config.storage);
  const applied = await migrateMemory(db);
  if (applied.length > 0) logger.info({ migrations: applied }, "applied migrations");
  const server = await startMemoryServer({
    host: config.host,
    port: config.port,
    signer: new ContextSigner(config.contextKey),
    store: createSqlMemoryStore(db),
    logger,
  });
  const opened = db;
  onShutdown(logger, async (graceMs) => {
    await server.shutdown(graceMs);
    await opened.close();
  }, lifecycle.shutdownGraceMs);
} catch (err) {
  logger.fatal({ err }, (err as Error).message ?? "failed to start");
  await db?.close().catch(() => undefined);
  process.exit(1);
}
