import { APP_ROLE, migrate, pendingMigrations, type Db, type Migration } from "@chaos-core/kit";

/** The schema the council service owns. Nothing else reads or writes it. */
export const COUNCIL_SCHEMA = "council";

/**
 * The council service's migrations, forward-only. The same SQL runs on Postgres and PGlite.
 *
 * - One row per session: the domain's state is one JSON document, read and written whole, so
 *   a session is never half-saved and the domain stays free of SQL.
 * - `state` is `json`, not `jsonb`: it keeps the exact text the service wrote. jsonb re-orders
 *   object keys, and a session reloaded after a restart (or by another replica) must produce
 *   the same results, in the same order, as before; nothing queries inside the document.
 * - `version` counts the saves; a save locks the row (`SELECT … FOR UPDATE`), so saves of one
 *   session serialize rather than conflict.
 * - The primary key starts with `tenant_id`, so the same id under two tenants can never
 *   collide, and a collision could not tell one tenant that another holds an id.
 * - Row-level security is forced, so even a query that forgets `tenant_id` sees one tenant.
 * - `sessions_recent` serves ListSessions' order (newest first, then id) within a tenant, and
 *   retention's search for sessions last updated before a time.
 * - The application role may delete sessions (0003) only for tenant deletion and retention.
 */
export const COUNCIL_MIGRATIONS: Migration[] = [
  {
    id: "0001_sessions",
    sql: `
      CREATE TABLE council.sessions (
        tenant_id  text NOT NULL,
        id         uuid NOT NULL,
        state      json NOT NULL,
        version    integer NOT NULL CHECK (version >= 1),
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, id)
      );

      ALTER TABLE council.sessions ENABLE ROW LEVEL SECURITY;
      ALTER TABLE council.sessions FORCE ROW LEVEL SECURITY;
      CREATE POLICY sessions_tenant_isolation ON council.sessions
        USING (tenant_id = current_setting('app.tenant_id', true))
        WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

      GRANT SELECT, INSERT, UPDATE ON council.sessions TO ${APP_ROLE};
    `,
  },
  {
    // ListSessions: a tenant's sessions, most recently updated first, then by id.
    id: "0002_sessions_recent",
    sql: `CREATE INDEX sessions_recent ON council.sessions (tenant_id, updated_at DESC, id);`,
  },
  {
    // DeleteData and ApplyRetention delete a tenant's sessions as the application role, so
    // row-level security scopes the deletes as it scopes every other statement. (Retention
    // finds old sessions through sessions_recent: timestamptz's < is leakproof, so the index
    // serves it under row-level security.)
    id: "0003_sessions_delete",
    sql: `GRANT DELETE ON council.sessions TO ${APP_ROLE};`,
  },
];

/** Applies the council migrations (idempotent, safe for concurrent replicas); returns the ids applied now. */
export function migrateCouncil(db: Db): Promise<string[]> {
  return migrate(db, COUNCIL_SCHEMA, COUNCIL_MIGRATIONS);
}

/** The council migrations not yet applied (applies nothing): what `CHAOS_CORE_MIGRATE=verify` waits on. */
export function pendingCouncilMigrations(db: Db): Promise<string[]> {
  return pendingMigrations(db, COUNCIL_SCHEMA, COUNCIL_MIGRATIONS);
}
