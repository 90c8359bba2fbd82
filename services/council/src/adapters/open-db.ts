import { join } from "node:path";
import { createPgliteDb, createPostgresDb, lockDataDir, type Db } from "@chaos-core/kit";
import type { CouncilStorageConfig } from "../config.js";

/**
 * Opens the database the council service runs on. Embedded PGlite keeps its files in
 * `<dataDir>/council` behind the data-directory lock (kit's `lockDataDir`), so a second process
 * on the same directory refuses to start instead of losing writes. Closing the returned `Db`
 * releases the lock.
 */
export async function openCouncilDb(storage: CouncilStorageConfig): Promise<Db> {
  if (storage.kind === "postgres") {
    return createPostgresDb({ connectionString: storage.url, applicationName: "chaos-core-council" });
  }
  const release = await lockDataDir(storage.dataDir);
  let db: Db;
  try {
    db = await createPgliteDb({ dataDir: join(storage.dataDir, "council") });
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
