/** What a query returns, the same on Postgres and on PGlite. */
export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

/** Per-statement options of {@link Queryable.query}. */
export interface QueryOptions {
  name?: string;
}

/** Something SQL can be sent to: a pool, a connection, a transaction. */
export interface Queryable {
  /**
   * Runs one statement. A `name` makes it a named prepared statement on Postgres (parsed and
   * planned once per connection, then only bound and executed); the same name must always
   * carry the same SQL. On PGlite the same: parsed once per engine, then one exchange per call.
   */
  query<R = Record<string, unknown>>(sql: string, params?: unknown[], options?: QueryOptions): Promise<QueryResult<R>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

/**
 * A SQL database, Postgres or embedded PGlite, running the same SQL. Services reach their
 * tables only through {@link Db.tenantTx}, so row-level security applies to every query.
 */
export interface Db {
  readonly kind: "postgres" | "pglite";
  /**
   * Runs `fn` in a transaction scoped to one tenant: `app.tenant_id` is set and the role is
   * switched to {@link APP_ROLE}, which owns no tables, so row-level security filters every row.
   */
  tenantTx<T>(tenant: string, fn: (q: Queryable) => Promise<T>): Promise<T>;
  /** Runs `fn` in a plain transaction as the connecting role (migrations, operator tasks). */
  adminTx<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
  /**
   * Runs one statement on its own — it is its own transaction, committed before this resolves,
   * in one round trip — as the connecting role. Only for a call of a function that scopes itself
   * to one tenant (sets `app.tenant_id` and runs under row-level security), never for table SQL.
   */
  statement<R = Record<string, unknown>>(sql: string, params?: unknown[], options?: QueryOptions): Promise<QueryResult<R>>;
  /**
   * Makes every transaction committed so far durable on disk before it resolves. Nothing to do
   * on Postgres (a commit has flushed its WAL: `synchronous_commit` on). PGlite runs with
   * `fsync` off and its file system never syncs, so a commit there is with the operating system
   * only: this `fdatasync`s the WAL it wrote (docs/ledger.md "Known limits").
   */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** The role application queries run as; it owns nothing, so FORCE ROW LEVEL SECURITY binds it. */
export const APP_ROLE = "chaoscore_app";

/** The statement that opens a tenant-scoped transaction. The tenant id is validated first. */
export function tenantPrelude(tenant: string): string {
  return `SELECT set_config('app.tenant_id', '${tenant}', true), set_config('role', '${APP_ROLE}', true)`;
}
