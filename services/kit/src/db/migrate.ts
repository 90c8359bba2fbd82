import { APP_ROLE, type Db } from "./db.js";

/** One forward-only migration. Ids sort in the order they apply. */
export interface Migration {
  id: string;
  sql: string;
}

const SCHEMA_RE = /^[a-z][a-z0-9_]*$/;

/**
 * Applies a service's migrations to its own schema, once, in order, in one transaction held
 * under an advisory lock so concurrent replicas do not race. Creates the shared application
 * role first (a role is cluster-wide; a concurrent creator elsewhere is tolerated).
 * Returns the ids that were applied now.
 */
export async function migrate(db: Db, schema: string, migrations: Migration[]): Promise<string[]> {
  if (!SCHEMA_RE.test(schema)) throw new Error(`invalid schema name "${schema}"`);
  return db.adminTx(async (q) => {
    await q.query("SELECT pg_advisory_xact_lock(hashtext('chaoscore.migrate'))");
    await q.query(`DO $$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${APP_ROLE}') THEN
          CREATE ROLE ${APP_ROLE} NOLOGIN;
        END IF;
      EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
      END $$`);
    await q.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await q.query(`GRANT USAGE ON SCHEMA ${schema} TO ${APP_ROLE}`);
    await q.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set(
      (await q.query<{ id: string }>(`SELECT id FROM ${schema}.schema_migrations`)).rows.map((r) => r.id),
    );
    const applied: string[] = [];
    for (const m of [...migrations].sort((a, b) => a.id.localeCompare(b.id))) {
      if (done.has(m.id)) continue;
      await q.exec(m.sql);
      await q.query(`INSERT INTO ${schema}.schema_migrations (id) VALUES ($1)`, [m.id]);
      applied.push(m.id);
    }
    return applied;
  });
}
