import type { Extensions } from "@electric-sql/pglite";
import { assertTenantId } from "../context.js";
import { tenantPrelude, type Db, type Queryable } from "./db.js";

/** Contrib extensions the embedded database can load, by name. */
const CONTRIB: Record<string, () => Promise<Extensions[string]>> = {
  pg_trgm: async () => (await import("@electric-sql/pglite/contrib/pg_trgm")).pg_trgm,
};

/**
 * An embedded {@link Db} on PGlite (WASM Postgres) with data under `dataDir`, or in memory when
 * it is omitted. PGlite has no cross-process lock: the caller must own `dataDir` exclusively.
 * Calls are serialised by PGlite itself; transactions run one at a time.
 */
export async function createPgliteDb(options: { dataDir?: string; extensions?: string[] } = {}): Promise<Db> {
  const extensions: Extensions = {};
  for (const name of options.extensions ?? []) {
    const load = CONTRIB[name];
    if (!load) throw new Error(`PGlite extension "${name}" is not available`);
    extensions[name] = await load();
  }
  // Loaded on first use: every process that imports kit (an edge, a stdio server answering
  // initialize) would otherwise pay for PGlite's JavaScript before it needs a database.
  const { PGlite } = await import("@electric-sql/pglite");
  const pglite = await PGlite.create(options.dataDir ?? "memory://", { extensions });

  async function inTx<T>(prelude: string, fn: (q: Queryable) => Promise<T>): Promise<T> {
    return pglite.transaction(async (tx) => {
      await tx.exec(prelude);
      return fn({
        async query<R>(sql: string, params?: unknown[]) {
          const res = await tx.query<R>(sql, params);
          return { rows: res.rows, rowCount: Math.max(res.affectedRows ?? 0, res.rows.length) };
        },
        async exec(sql: string) {
          await tx.exec(sql);
        },
      });
    });
  }

  return {
    kind: "pglite",
    tenantTx(tenant, fn) {
      assertTenantId(tenant);
      return inTx(tenantPrelude(tenant), fn);
    },
    adminTx(fn) {
      return inTx("SELECT 1", fn);
    },
    async statement<R>(sql: string, params?: unknown[]) {
      const res = await pglite.query<R>(sql, params);
      return { rows: res.rows, rowCount: Math.max(res.affectedRows ?? 0, res.rows.length) };
    },
    close: () => pglite.close(),
  };
}
