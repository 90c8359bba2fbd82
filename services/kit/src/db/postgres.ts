import pg from "pg";
import { assertTenantId } from "../context.js";
import { ChaosError } from "../errors.js";
import { tenantPrelude, type Db, type Queryable, type QueryOptions, type QueryResult } from "./db.js";

function wrap(client: pg.PoolClient | pg.Pool): Queryable {
  return {
    async query<R>(sql: string, params?: unknown[], options?: QueryOptions): Promise<QueryResult<R>> {
      const res = options?.name ? await client.query({ text: sql, values: params ?? [], name: options.name }) : await client.query(sql, params);
      return { rows: res.rows as R[], rowCount: res.rowCount ?? res.rows.length };
    },
    async exec(sql: string): Promise<void> {
      await client.query(sql);
    },
  };
}

/** SQLSTATEs and socket errors that mean the server or the connection went away. */
const CONNECTION_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004"]);

/** Whether `err` says the connection (not the statement) failed. */
function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  if (code !== undefined && CONNECTION_CODES.has(code)) return true;
  // pg reports a connection dropped mid-query without a code.
  return err instanceof Error && /Connection terminated|connection timeout|Client has encountered a connection error/i.test(err.message);
}

/** Connection problems become `unavailable`; everything else keeps its cause. */
function normalise(err: unknown): unknown {
  if (err instanceof ChaosError) return err;
  if (isConnectionError(err)) return new ChaosError("unavailable", "the database is unavailable", { cause: err });
  return err;
}

/** A Postgres-backed {@link Db} over a `pg` pool. */
export function createPostgresDb(options: {
  connectionString: string;
  max?: number;
  statementTimeoutMs?: number;
  applicationName?: string;
}): Db {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    statement_timeout: options.statementTimeoutMs ?? 10_000,
    application_name: options.applicationName ?? "chaos-core",
  });
  // An idle client that loses its connection must not crash the process.
  pool.on("error", () => undefined);

  async function inTx<T>(prelude: string, fn: (q: Queryable) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw normalise(err);
    }
    // A checked-out client whose connection drops emits "error"; the pool listens only to idle
    // ones, so without this the process would crash instead of failing this transaction.
    let broken: Error | undefined;
    const onError = (err: Error) => {
      broken = err;
    };
    client.on("error", onError);
    try {
      await client.query(`BEGIN; ${prelude}`);
      const result = await fn(wrap(client));
      await client.query("COMMIT");
      return result;
    } catch (err) {
      if (!broken && !isConnectionError(err)) await client.query("ROLLBACK").catch(() => undefined);
      throw normalise(broken ?? err);
    } finally {
      client.off("error", onError);
      // A broken connection is destroyed, not returned to the pool for the next caller.
      client.release(broken ?? undefined);
    }
  }

  return {
    kind: "postgres",
    tenantTx(tenant, fn) {
      assertTenantId(tenant);
      return inTx(tenantPrelude(tenant), fn);
    },
    adminTx(fn) {
      return inTx("SELECT 1", fn);
    },
    async statement<R>(sql: string, params?: unknown[], options?: QueryOptions): Promise<QueryResult<R>> {
      try {
        const res = await pool.query({ text: sql, values: params ?? [], ...(options?.name ? { name: options.name } : {}) });
        return { rows: res.rows as R[], rowCount: res.rowCount ?? res.rows.length };
      } catch (err) {
        throw normalise(err);
      }
    },
    // A commit's answer came after its WAL was flushed (synchronous_commit on): nothing left to do.
    flush: () => Promise.resolve(),
    close: () => pool.end(),
  };
}
