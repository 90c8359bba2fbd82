import pg from "pg";
import { assertTenantId } from "../context.js";
import { ChaosError } from "../errors.js";
import { tenantPrelude, type Db, type Queryable, type QueryResult } from "./db.js";

function wrap(client: pg.PoolClient | pg.Pool): Queryable {
  return {
    async query<R>(sql: string, params?: unknown[]): Promise<QueryResult<R>> {
      const res = await client.query(sql, params);
      return { rows: res.rows as R[], rowCount: res.rowCount ?? res.rows.length };
    },
    async exec(sql: string): Promise<void> {
      await client.query(sql);
    },
  };
}

/** Connection problems become `unavailable`; everything else keeps its cause. */
function normalise(err: unknown): unknown {
  const code = (err as { code?: string }).code;
  if (code === "ECONNREFUSED" || code === "57P01" || code === "08006" || code === "08001") {
    return new ChaosError("unavailable", "the database is unavailable", { cause: err });
  }
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
    try {
      await client.query(`BEGIN; ${prelude}`);
      const result = await fn(wrap(client));
      await client.query("COMMIT");
      return result;
    } catch (err) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw normalise(err);
    } finally {
      client.release();
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
    close: () => pool.end(),
  };
}
