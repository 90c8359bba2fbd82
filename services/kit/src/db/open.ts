import { join } from "node:path";
import { lockDataDir } from "../data-dir.js";
import { ChaosError } from "../errors.js";
import type { Db } from "./db.js";
import { createPgliteDb } from "./pglite.js";
import { createPostgresDb } from "./postgres.js";

/** Where a service keeps its data: Postgres, or embedded PGlite under a data directory. */
export type ServiceStorage = { readonly kind: "postgres"; readonly url: string } | { readonly kind: "pglite"; readonly dataDir: string };

/**
 * The storage a service's parsed environment chose (checked by `requireStorage`): `DATABASE_URL`
 * wins over `CHAOS_CORE_DATA_DIR`, so a cluster replica never silently falls back to a local file.
 */
export function serviceStorage(env: { DATABASE_URL?: string | undefined; CHAOS_CORE_DATA_DIR?: string | undefined }): ServiceStorage {
  if (env.DATABASE_URL) return { kind: "postgres", url: env.DATABASE_URL };
  if (env.CHAOS_CORE_DATA_DIR) return { kind: "pglite", dataDir: env.CHAOS_CORE_DATA_DIR };
  throw new ChaosError("invalid_argument", "set DATABASE_URL (Postgres) or CHAOS_CORE_DATA_DIR (embedded PGlite)");
}

/**
 * Opens the database a service run alone uses. Postgres is a pool named `chaos-core-<service>`.
 * Embedded PGlite keeps its files in `<dataDir>/<service>` behind the data-directory lock
 * ({@link lockDataDir}), so a second process on the same directory refuses to start instead of
 * losing writes; closing the returned `Db` releases the lock.
 */
export async function openServiceDb(storage: ServiceStorage, service: string, options: { extensions?: readonly string[] } = {}): Promise<Db> {
  if (storage.kind === "postgres") {
    return createPostgresDb({ connectionString: storage.url, applicationName: `chaos-core-${service}` });
  }
  const release = await lockDataDir(storage.dataDir);
  let db: Db;
  try {
    db = await createPgliteDb({ dataDir: join(storage.dataDir, service), ...(options.extensions ? { extensions: [...options.extensions] } : {}) });
  } catch (err) {
    await release();
    throw err;
  }
  return {
    kind: db.kind,
    tenantTx: (tenant, fn) => db.tenantTx(tenant, fn),
    adminTx: (fn) => db.adminTx(fn),
    statement: (sql, params, options) => db.statement(sql, params, options),
    flush: () => db.flush(),
    async close() {
      try {
        await db.close();
      } finally {
        await release();
      }
    },
  };
}
