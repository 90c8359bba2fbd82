import { join } from "node:path";
import { createPgliteDb, createPostgresDb, lockDataDir, type Db } from "@chaos-core/kit";
import type { LedgerStorageConfig } from "../config.js";

/**
 * Opens the database the ledger service runs on. Embedded PGlite keeps its files in
 * `<dataDir>/ledger` behind the data-directory lock, so a second process on the same directory
 * refuses to start instead of forking the log. Closing the returned `Db` releases the lock.
 */
export async function openLedgerDb(storage: LedgerStorageConfig): Promise<Db> {
  if (storage.kind === "postgres") {
    return createPostgresDb({ connectionString: storage.url, applicationName: "chaos-core-ledger" });
  }
  const release = await lockDataDir(storage.dataDir);
  let db: Db;
  try {
    db = await createPgliteDb({ dataDir: join(storage.dataDir, "ledger") });
  } catch (err) {
    await release();
    throw err;
  }
  return {
    kind: db.kind,
    tenantTx: (tenant, fn) => db.tenantTx(tenant, fn),
    adminTx: (fn) => db.adminTx(fn),
    async close() {
      try {
        await db.close();
      } finally {
        await release();
      }
    },
  };
}
