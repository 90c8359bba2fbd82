/**
 * The embedded Db speaks the wire protocol to PGlite itself (./pglite-wire.ts): these pin that it
 * gives what PGlite's own `query` gives (values, row counts, errors with their SQLSTATE), keeps a
 * named statement to one SQL text, recovers from errors at every step, and keeps transactions
 * whole.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Db } from "./db.js";
import { createPgliteDb } from "./pglite.js";
import { wireSession } from "./pglite-wire.js";

const errorOf = async (p: Promise<unknown>): Promise<{ code?: string; message: string }> => {
  try {
    await p;
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error("expected a rejection");
};

describe("the PGlite wire session", () => {
  let pglite: PGlite;
  beforeAll(async () => {
    pglite = await PGlite.create();
    await pglite.exec(`
      CREATE TABLE kinds (
        id bigint PRIMARY KEY, flag boolean, doc jsonb, at timestamptz, raw bytea, tags text[], nums int[], note text
      );`);
  });
  afterAll(() => pglite.close());

  it("writes parameters and reads values as PGlite's own query does, nulls included", async () => {
    const wire = wireSession(pglite);
    const sql = "INSERT INTO kinds VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *";
    const at = new Date("2026-12-06T10:00:00.123Z");
    const viaWire = await pglite.runExclusive(() =>
      wire.query(sql, [1, true, { a: [1, "x"], "é": null }, at, new Uint8Array([0, 255, 16]), ['a "q"', "b\\c", null], [3, -4], null]),
    );
    const viaPglite = await pglite.query<Record<string, unknown>>(sql.replace("$1", "$1 + 1"), [1, true, { a: [1, "x"], "é": null }, at, new Uint8Array([0, 255, 16]), ['a "q"', "b\\c", null], [3, -4], null]);
    expect(viaWire.rowCount).toBe(1);
    expect(viaWire.rows).toEqual([{ ...viaPglite.rows[0], id: 1 }]);
    expect(viaWire.rows[0]).toMatchObject({ flag: true, doc: { a: [1, "x"], "é": null }, at, tags: ['a "q"', "b\\c", null], nums: [3, -4], note: null });
  });

  it("counts the rows a command touched, and runs a statement without parameters in one exchange", async () => {
    const wire = wireSession(pglite);
    await pglite.runExclusive(async () => {
      await wire.exec("INSERT INTO kinds (id) SELECT g FROM generate_series(10, 14) g");
      expect((await wire.query("UPDATE kinds SET note = 'n' WHERE id >= $1", [10])).rowCount).toBe(5);
      expect((await wire.query("SELECT count(*)::int AS n FROM kinds WHERE note = 'n'", [])).rows).toEqual([{ n: 5 }]);
      expect((await wire.query("DELETE FROM kinds WHERE id >= 10", undefined, "delete_tens")).rowCount).toBe(5);
    });
  });

  it("prepares a named statement once and refuses the name for other SQL", async () => {
    const wire = wireSession(pglite);
    await pglite.runExclusive(async () => {
      expect((await wire.query("SELECT $1::int + 1 AS n", [1], "plus_one")).rows).toEqual([{ n: 2 }]);
      expect((await wire.query("SELECT $1::int + 1 AS n", [41], "plus_one")).rows).toEqual([{ n: 42 }]);
      await expect(wire.query("SELECT $1::int + 2 AS n", [1], "plus_one")).rejects.toThrow(/prepared statement "plus_one" was prepared with other SQL/);
      expect((await wire.query("SELECT name FROM pg_prepared_statements WHERE name LIKE $1", ["plus_%"])).rows).toEqual([{ name: "plus_one" }]);
    });
  });

  it("throws the engine's error with its SQLSTATE, and the next statement runs, whichever step failed", async () => {
    const wire = wireSession(pglite);
    await pglite.runExclusive(async () => {
      // At Parse (a syntax error), at Bind (a parameter the type refuses), at Execute (a constraint).
      await expect(wire.query("SELEC $1", [1])).rejects.toMatchObject({ code: "42601" });
      await expect(wire.query("SELECT $1::int AS n", ["not a number"], "bad_bind")).rejects.toMatchObject({ code: "22P02" });
      await wire.query("INSERT INTO kinds (id) VALUES ($1)", [100]);
      await expect(wire.query("INSERT INTO kinds (id) VALUES ($1)", [100])).rejects.toMatchObject({ code: "23505", message: expect.stringMatching(/duplicate key/) });
      await expect(wire.exec("SELECT 1; SELECT nope")).rejects.toMatchObject({ code: "42703" });
      expect((await wire.query("SELECT $1::int AS n", [7], "bad_bind")).rows).toEqual([{ n: 7 }]);
    });
  });

  it("runs prepared statements in one exchange, each its own transaction, each failing alone", async () => {
    const wire = wireSession(pglite);
    const insert = "INSERT INTO kinds (id, note) VALUES ($1, $2) RETURNING id";
    const exchanges = vi.spyOn(pglite, "execProtocolRawStream");
    try {
      await pglite.runExclusive(async () => {
        await wire.query(insert, [200, "first"], "insert_kind");
        expect(wire.isPrepared("insert_kind", insert)).toBe(true);
        expect(wire.isPrepared("insert_kind", insert.replace("id", "note"))).toBe(false);
        exchanges.mockClear();
        const results = await wire.queryPrepared([
          { sql: insert, params: [201, "a"], name: "insert_kind" },
          { sql: insert, params: [200, "duplicate"], name: "insert_kind" },
          { sql: insert, params: ["not a number", "b"], name: "insert_kind" },
          { sql: insert, params: [202, "c"], name: "insert_kind" },
          { sql: "SELECT 1", params: [], name: "insert_kind" },
        ]);
        expect(exchanges).toHaveBeenCalledTimes(1);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled", "rejected"]);
        expect(results[0]).toEqual({ status: "fulfilled", value: { rows: [{ id: 201 }], rowCount: 1 } });
        expect(results[1]).toMatchObject({ status: "rejected", reason: { code: "23505" } });
        expect(results[2]).toMatchObject({ status: "rejected", reason: { code: "22P02" } });
        expect(results[4]).toMatchObject({ status: "rejected", reason: { message: expect.stringMatching(/"insert_kind" is not prepared with this SQL/) } });
        const stored = await wire.query("SELECT id FROM kinds WHERE id BETWEEN 200 AND 210 ORDER BY id", []);
        expect(stored.rows).toEqual([{ id: 200 }, { id: 201 }, { id: 202 }]);
      });
    } finally {
      exchanges.mockRestore();
    }
  });
});

describe("the embedded Db's transactions", () => {
  let db: Db;
  beforeAll(async () => {
    db = await createPgliteDb();
    await db.adminTx((q) => q.exec("CREATE TABLE t (n int PRIMARY KEY); CREATE ROLE chaoscore_app NOLOGIN"));
  });
  afterAll(() => db.close());

  it("commits what the function did, or nothing of it when it throws", async () => {
    await db.adminTx(async (q) => {
      await q.query("INSERT INTO t VALUES ($1)", [1]);
      await q.query("INSERT INTO t VALUES ($1)", [2], { name: "insert_t" });
    });
    const failure = await errorOf(
      db.adminTx(async (q) => {
        await q.query("INSERT INTO t VALUES ($1)", [3], { name: "insert_t" });
        await q.query("INSERT INTO t VALUES ($1)", [1]);
      }),
    );
    expect(failure.code).toBe("23505");
    expect((await db.statement<{ n: number }>("SELECT n FROM t ORDER BY n")).rows).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it("scopes a tenant transaction to its tenant and role, and ends the scope with it", async () => {
    const inside = await db.tenantTx("acme", (q) => q.query<{ tenant: string; role: string }>("SELECT current_setting('app.tenant_id') AS tenant, current_user AS role"));
    expect(inside.rows).toEqual([{ tenant: "acme", role: "chaoscore_app" }]);
    const after = await db.statement<{ tenant: string | null }>("SELECT current_setting('app.tenant_id', true) AS tenant");
    expect(after.rows[0]!.tenant ?? "").toBe("");
  });

  it("refuses a statement sent after its transaction ended", async () => {
    let leaked: Parameters<Parameters<Db["adminTx"]>[0]>[0] | undefined;
    await db.adminTx(async (q) => {
      leaked = q;
    });
    await expect(leaked!.query("INSERT INTO t VALUES (9)")).rejects.toThrow(/the transaction has ended/);
    expect((await db.statement<{ n: number }>("SELECT count(*)::int AS n FROM t WHERE n = 9")).rows).toEqual([{ n: 0 }]);
  });

  it("sends the prepared statements of one turn together, each settling alone, in the order they were asked for", async () => {
    const insert = "INSERT INTO t VALUES ($1) RETURNING n";
    await db.statement(insert, [20], { name: "insert_t_returning" });
    const settled = await Promise.allSettled([
      db.statement(insert, [21], { name: "insert_t_returning" }),
      db.statement(insert, [20], { name: "insert_t_returning" }),
      db.statement(insert, [22], { name: "insert_t_returning" }),
    ]);
    expect(settled.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(settled[1]).toMatchObject({ reason: { code: "23505" } });
    // A transaction asked for after a waiting statement sees it: it is not overtaken.
    const written = db.statement(insert, [23], { name: "insert_t_returning" });
    const seen = await db.adminTx((q) => q.query<{ n: number }>("SELECT n FROM t WHERE n BETWEEN 20 AND 29 ORDER BY n"));
    expect(seen.rows.map((r) => r.n)).toEqual([20, 21, 22, 23]);
    expect((await written).rows).toEqual([{ n: 23 }]);
  });

  it("runs the statements asked for before close, and refuses those after", async () => {
    const other = await createPgliteDb();
    await other.statement("SELECT $1::int AS n", [1], { name: "one" });
    const before = other.statement<{ n: number }>("SELECT $1::int AS n", [2], { name: "one" });
    const closing = other.close();
    await expect(before).resolves.toEqual({ rows: [{ n: 2 }], rowCount: 1 });
    await closing;
    await expect(other.statement("SELECT $1::int AS n", [3], { name: "one" })).rejects.toThrow(/the embedded database is closed/);
  });

  it("lets the flushes asked for before close finish, and refuses those asked for after", async () => {
    const dir = mkdtempSync(join(tmpdir(), "chaos-core-pglite-close-"));
    try {
      const onDisk = await createPgliteDb({ dataDir: join(dir, "pg") });
      await onDisk.adminTx((q) => q.exec("CREATE TABLE f (n int)"));
      await onDisk.adminTx((q) => q.query("INSERT INTO f VALUES (1)"));
      // The second shares the flush after the first, which runs once the first is done.
      const first = onDisk.flush();
      const second = onDisk.flush();
      const closing = onDisk.close();
      await expect(first).resolves.toBeUndefined();
      await expect(second).resolves.toBeUndefined();
      await closing;
      await expect(onDisk.flush()).rejects.toThrow(/the embedded database is closed/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses statements once closed", async () => {
    const other = await createPgliteDb();
    await other.close();
    await expect(other.statement("SELECT 1")).rejects.toThrow(/the embedded database is closed/);
  });
});
