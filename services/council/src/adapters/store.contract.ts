import { randomUUID } from "node:crypto";
import { ChaosError, type Db } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportHeaderLine, exportSessionLine } from "../export-format.js";
import { SESSION_STATE_MAX_BYTES, type CouncilSessionStore, type ExportedSession } from "../session-store.js";
import { migrateCouncil } from "./migrations.js";
import { createSqlCouncilStore, type SqlCouncilStoreOptions } from "./sql-store.js";

/** A clock tests move by hand. */
class ManualClock {
  private t = Date.parse("2030-01-01T00:00:00.000Z");
  now(): Date {
    return new Date(this.t);
  }
  advance(seconds: number): void {
    this.t += seconds * 1000;
  }
}

async function failure(promise: Promise<unknown>): Promise<ChaosError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "expected the call to fail").toBeInstanceOf(ChaosError);
  return err as ChaosError;
}

/**
 * The behaviour every {@link CouncilSessionStore} over a kit `Db` must show. Registers
 * `describe` blocks; `open` returns a fresh, empty database (migrated here), `close` disposes of it.
 */
export function describeCouncilStoreContract(name: string, open: () => Promise<{ db: Db; close(): Promise<void> }>): void {
  describe(`CouncilSessionStore contract: ${name}`, () => {
    let db: Db;
    let close: () => Promise<void>;
    let tenants = 0;

    beforeAll(async () => {
      ({ db, close } = await open());
      expect(await migrateCouncil(db)).toEqual(["0001_sessions", "0002_sessions_recent", "0003_sessions_delete"]);
    });
    afterAll(async () => {
      await close?.();
    });

    function fresh(options: Omit<SqlCouncilStoreOptions, "now"> = {}): { store: CouncilSessionStore; clock: ManualClock; tenant: string } {
      const clock = new ManualClock();
      tenants += 1;
      return { store: createSqlCouncilStore(db, { ...options, now: () => clock.now() }), clock, tenant: `tenant-${tenants}` };
    }

    it("lists a tenant's sessions by id prefix, most recently updated first, with title and phase, at most limit", async () => {
      const { store, clock, tenant } = fresh();
      const other = fresh().tenant;
      const ids = ["0a000000-0000-4000-8000-000000000001", "0a000000-0000-4000-8000-000000000002", "0b000000-0000-4000-8000-000000000003"];
      await store.create(tenant, ids[0]!, { title: "first", currentPhase: "design" });
      clock.advance(1);
      await store.create(tenant, ids[1]!, { title: "second", currentPhase: null });
      clock.advance(1);
      await store.create(tenant, ids[2]!, { currentPhase: "verify" });
      clock.advance(1);
      // Saving the oldest makes it the newest.
      await store.modify(tenant, ids[0]!, (state) => ({ state: { ...state, currentPhase: "critique" }, result: undefined }));
      // Another tenant's session with a matching id is never listed.
      await store.create(other, "0a000000-0000-4000-8000-000000000009", { title: "other" });

      const all = await store.list(tenant, { prefix: "", limit: 100 });
      expect(all.map((s) => s.id)).toEqual([ids[0], ids[2], ids[1]]);
      expect(all[0]).toEqual({ id: ids[0], title: "first", currentPhase: "critique", updatedAt: clock.now() });
      expect(all[1]).toMatchObject({ title: "", currentPhase: "verify" });
      expect(all[2]).toMatchObject({ title: "second", currentPhase: null });
      expect((await store.list(tenant, { prefix: "0a", limit: 100 })).map((s) => s.id)).toEqual([ids[0], ids[1]]);
      expect((await store.list(tenant, { prefix: ids[1]!, limit: 100 })).map((s) => s.id)).toEqual([ids[1]]);
      expect(await store.list(tenant, { prefix: "0c", limit: 100 })).toEqual([]);
      expect((await store.list(tenant, { prefix: "", limit: 2 })).map((s) => s.id)).toEqual([ids[0], ids[2]]);
      expect((await store.list(other, { prefix: "0a", limit: 100 })).map((s) => s.title)).toEqual(["other"]);
    });

    it("refuses a list prefix that cannot start an id, and a limit out of range, naming the field", async () => {
      const { store, tenant } = fresh();
      for (const prefix of ["%", "0A", "_", "0".repeat(37), "x"]) {
        const err = await failure(store.list(tenant, { prefix, limit: 10 }));
        expect(err.code).toBe("invalid_argument");
        expect(err.message).toMatch(/^prefix /);
      }
      for (const limit of [0, 101, 1.5]) {
        const err = await failure(store.list(tenant, { prefix: "", limit }));
        expect(err.code).toBe("invalid_argument");
        expect(err.message).toMatch(/^limit /);
      }
    });

    it("migrations are idempotent", async () => {
      expect(await migrateCouncil(db)).toEqual([]);
    });

    it("creates a session at version 1 and reads it back exactly, key order included", async () => {
      const { store, clock, tenant } = fresh();
      const id = randomUUID();
      // Keys deliberately out of order, with nesting, unicode and numbers a JSON round trip
      // could disturb: a reloaded session must compute exactly what the live one would.
      const state = { zeta: 1, alpha: { b: [3, 2.5, -0.125], a: "ünïcödé ✓" }, id, phases: { verify: null, decompile: true } };
      const created = await store.create(tenant, id, state);
      expect(created).toEqual({ id, state, version: 1, createdAt: clock.now(), updatedAt: clock.now() });
      const read = await store.get(tenant, id);
      expect(read).toEqual(created);
      expect(Object.keys(read!.state)).toEqual(["zeta", "alpha", "id", "phases"]);
      expect(Object.keys(read!.state.phases as object)).toEqual(["verify", "decompile"]);
    });

    it("modifies in place: the function gets the state and version, its state is stored at version + 1, its result returned", async () => {
      const { store, clock, tenant } = fresh();
      const id = randomUUID();
      const created = await store.create(tenant, id, { step: 0 });
      clock.advance(5);
      const seen: Array<[unknown, number]> = [];
      const first = await store.modify(tenant, id, (state, version) => {
        seen.push([state, version]);
        return { state: { step: (state.step as number) + 1, zeta: true, alpha: { b: 1, a: 2 } }, result: `from ${version}` };
      });
      expect(first).toBe("from 1");
      expect(seen).toEqual([[{ step: 0 }, 1]]);
      const read = await store.get(tenant, id);
      expect(read).toEqual({ id, state: { step: 1, zeta: true, alpha: { b: 1, a: 2 } }, version: 2, createdAt: created.createdAt, updatedAt: clock.now() });
      // Key order survives a modify as it survives a create.
      expect(Object.keys(read!.state)).toEqual(["step", "zeta", "alpha"]);
      expect(Object.keys(read!.state.alpha as object)).toEqual(["b", "a"]);
      clock.advance(1);
      expect(await store.modify(tenant, id, (_state, version) => ({ state: { step: 2 }, result: version }))).toBe(2);
      expect(await store.get(tenant, id)).toMatchObject({ state: { step: 2 }, version: 3, createdAt: created.createdAt, updatedAt: clock.now() });
    });

    it("stores nothing when the function throws, and fails with its error", async () => {
      const { store, clock, tenant } = fresh();
      const id = randomUUID();
      const created = await store.create(tenant, id, { step: 0 });
      clock.advance(5);
      const refusal = new ChaosError("failed_precondition", "the domain said no");
      const err = await failure(
        store.modify(tenant, id, () => {
          throw refusal;
        }),
      );
      expect(err).toBe(refusal);
      expect(await store.get(tenant, id)).toEqual(created);
    });

    it("runs concurrent modifications of one session one after another, each on the state the previous one stored", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      await store.create(tenant, id, { count: 0, seen: [] });
      let calls = 0;
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          store.modify(tenant, id, (state, version) => {
            calls += 1;
            return { state: { count: (state.count as number) + 1, seen: [...(state.seen as number[]), i] }, result: version };
          }),
        ),
      );
      // Each function ran once (no retries) and saw a different version: no update was lost.
      expect(calls).toBe(8);
      expect([...results].sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      const final = await store.get(tenant, id);
      expect(final?.version).toBe(9);
      expect(final?.state.count).toBe(8);
      expect([...(final?.state.seen as number[])].sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    });

    it("lets the function decide a race: of several concurrent claims of one session, one wins and the rest see it", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      await store.create(tenant, id, { winner: null });
      const outcomes = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) =>
          store.modify(tenant, id, (state) => {
            if (state.winner !== null) throw new ChaosError("failed_precondition", `already won by ${String(state.winner)}`);
            return { state: { winner: i }, result: i };
          }),
        ),
      );
      const won = outcomes.filter((o): o is PromiseFulfilledResult<number> => o.status === "fulfilled");
      expect(won).toHaveLength(1);
      const winner = won[0]!.value;
      for (const o of outcomes) {
        if (o.status === "rejected") {
          expect((o.reason as ChaosError).code).toBe("failed_precondition");
          expect((o.reason as ChaosError).message).toBe(`already won by ${winner}`);
        }
      }
      expect(await store.get(tenant, id)).toMatchObject({ state: { winner }, version: 2 });
    });

    it("locks the row: a modify waits for a transaction that holds it, then works on what that one committed", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      await store.create(tenant, id, { n: 0 });
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let locked!: () => void;
      const holding = new Promise<void>((resolve) => (locked = resolve));
      // Another writer updates the row and keeps its transaction open until released.
      const holder = db.tenantTx(tenant, async (q) => {
        await q.query(`UPDATE council.sessions SET state = '{"n":1}'::json, version = version + 1 WHERE tenant_id = $1 AND id = $2::uuid`, [tenant, id]);
        locked();
        await gate;
      });
      await holding;
      const seen: Array<[unknown, number]> = [];
      const modified = store.modify(tenant, id, (state, version) => {
        seen.push([state, version]);
        return { state: { n: (state.n as number) + 1 }, result: undefined };
      });
      // Time for a modify that did not lock to read the old state; this one must not have.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(seen).toEqual([]);
      release();
      await Promise.all([holder, modified]);
      expect(seen).toEqual([[{ n: 1 }, 2]]);
      expect(await store.get(tenant, id)).toMatchObject({ state: { n: 2 }, version: 3 });
    });

    it("answers an unknown session with undefined and not_found, without calling the function", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      expect(await store.get(tenant, id)).toBeUndefined();
      let called = false;
      const err = await failure(
        store.modify(tenant, id, () => {
          called = true;
          return { state: { x: 1 }, result: undefined };
        }),
      );
      expect(err.code).toBe("not_found");
      expect(err.message).toBe(`session ${id} was not found`);
      expect(called).toBe(false);
    });

    it("refuses to create an id twice for one tenant", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      await store.create(tenant, id, { n: 1 });
      expect((await failure(store.create(tenant, id, { n: 2 }))).code).toBe("already_exists");
      expect((await store.get(tenant, id))?.state).toEqual({ n: 1 });
    });

    it("refuses ids that are not session ids before any SQL runs", async () => {
      const { store, tenant } = fresh();
      for (const bad of ["", "not-a-uuid", "'; DROP TABLE council.sessions; --", randomUUID().toUpperCase()]) {
        const err = await failure(store.get(tenant, bad));
        expect(err.code).toBe("invalid_argument");
        expect(err.message).toMatch(/sessionId must be a session id issued by council_init/);
      }
      expect((await failure(store.create(tenant, "x", {}))).code).toBe("invalid_argument");
      expect((await failure(store.modify(tenant, "x", () => ({ state: {}, result: undefined })))).code).toBe("invalid_argument");
    });

    it("refuses a state over the size limit, and stores nothing", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      const err = await failure(store.create(tenant, id, { blob: "x".repeat(SESSION_STATE_MAX_BYTES) }));
      expect(err.code).toBe("resource_exhausted");
      expect(err.message).toMatch(/the limit is 4194304 bytes/);
      expect(await store.get(tenant, id)).toBeUndefined();
      // A modify that would grow the session past the limit leaves it as it was. The JSON is
      // {"blob":"…"}: 11 bytes around the string, so this is one byte over.
      const created = await store.create(tenant, id, { blob: "" });
      const over = await failure(store.modify(tenant, id, () => ({ state: { blob: "x".repeat(SESSION_STATE_MAX_BYTES - 10) }, result: undefined })));
      expect(over.code).toBe("resource_exhausted");
      expect(over.message).toMatch(/would be 4194305 bytes as JSON; the limit is 4194304 bytes/);
      expect(await store.get(tenant, id)).toEqual(created);
      // Exactly at the limit is accepted.
      await store.modify(tenant, id, () => ({ state: { blob: "x".repeat(SESSION_STATE_MAX_BYTES - 11) }, result: undefined }));
      expect((await store.get(tenant, id))?.version).toBe(2);
    });

    describe("export, delete and retention", () => {
      /** Ids that sort in the order given. */
      const idOf = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;

      async function exported(store: CouncilSessionStore, tenant: string): Promise<ExportedSession[]> {
        const sessions: ExportedSession[] = [];
        for await (const session of store.exportSessions(tenant)) sessions.push(session);
        return sessions;
      }

      /** A Db that counts the tenant transactions run through it, on the contract's database. */
      function counting(): { db: Db; tx: () => number } {
        let n = 0;
        return {
          db: { ...db, kind: db.kind, tenantTx: (t, fn) => (n++, db.tenantTx(t, fn)), adminTx: (fn) => db.adminTx(fn) },
          tx: () => n,
        };
      }

      it("exports every session of the caller's tenant, all columns, in id order, and none of another tenant's", async () => {
        const { store, clock, tenant: a } = fresh({ exportPage: { rows: 2, bytes: 1 << 20 } });
        const { tenant: b } = fresh();
        const t0 = clock.now();
        // Keys out of order and text a JSON round trip could disturb: the export holds the stored text.
        const state = { zeta: 1, alpha: { a: "ünïcödé ✓", n: [2.5, -0.125] }, currentPhase: "design" };
        for (const n of [3, 1, 5, 2, 4]) await store.create(a, idOf(n), { ...state, n });
        await store.create(b, idOf(1), { owner: "b" });
        await store.create(b, idOf(9), { owner: "b" });
        clock.advance(10);
        await store.modify(a, idOf(2), (s) => ({ state: { ...s, currentPhase: "critique" }, result: undefined }));

        const sessions = await exported(store, a);
        expect(sessions.map((s) => s.id)).toEqual([1, 2, 3, 4, 5].map(idOf));
        expect(sessions[1]).toEqual({
          id: idOf(2),
          stateJson: '{"zeta":1,"alpha":{"a":"ünïcödé ✓","n":[2.5,-0.125]},"currentPhase":"critique","n":2}',
          version: 2,
          createdAt: t0,
          updatedAt: clock.now(),
        });
        expect((await exported(store, b)).map((s) => [s.id, s.stateJson])).toEqual([
          [idOf(1), '{"owner":"b"}'],
          [idOf(9), '{"owner":"b"}'],
        ]);
        expect(await exported(store, fresh().tenant)).toEqual([]);

        const lines = [exportHeaderLine(a), ...sessions.map((s) => exportSessionLine(a, s))];
        expect(lines[0]).toBe(`{"type":"header","format":"chaos-core-council/1","tenant":"${a}"}\n`);
        expect(lines[2]).toBe(
          `{"type":"council.session","tenant":"${a}","id":"${idOf(2)}","version":2,"created_at":"${t0.toISOString()}",` +
            `"updated_at":"${clock.now().toISOString()}","state":{"zeta":1,"alpha":{"a":"ünïcödé ✓","n":[2.5,-0.125]},"currentPhase":"critique","n":2}}\n`,
        );
        for (const line of lines) {
          expect(line.endsWith("\n") && !line.slice(0, -1).includes("\n")).toBe(true);
          expect(JSON.parse(line).tenant).toBe(a);
        }
      });

      it("reads a page at a time, bounded in rows and in state bytes, and stops reading when the reader stops", async () => {
        const { db: countingDb, tx } = counting();
        const tenant = fresh().tenant;
        const rowsPaged = createSqlCouncilStore(countingDb, { exportPage: { rows: 4, bytes: 1 << 20 } });
        const ids = Array.from({ length: 10 }, (_, i) => idOf(i + 1));
        for (const id of ids) await rowsPaged.create(tenant, id, { blob: "x".repeat(89) }); // 100 bytes as JSON
        let before = tx();
        expect((await exported(rowsPaged, tenant)).map((s) => s.id)).toEqual(ids);
        expect(tx() - before).toBe(4); // 4 + 4 + 2, then the empty page that ends it

        const bytesPaged = createSqlCouncilStore(countingDb, { exportPage: { rows: 100, bytes: 250 } });
        before = tx();
        expect((await exported(bytesPaged, tenant)).map((s) => s.id)).toEqual(ids);
        expect(tx() - before).toBe(5); // 3 + 3 + 3 + 1 + empty

        before = tx();
        for await (const session of rowsPaged.exportSessions(tenant)) if (session.id === idOf(2)) break;
        expect(tx() - before).toBe(1);
      });

      it("deletes every session of the caller's tenant in batches, and nothing of another tenant's", async () => {
        const { store, tenant: a } = fresh({ deleteBatch: 2 });
        const { tenant: b } = fresh();
        for (let n = 1; n <= 5; n++) await store.create(a, idOf(n), { n });
        await store.create(b, idOf(1), { owner: "b" });

        expect(await store.deleteAll(a)).toBe(5);
        expect(await exported(store, a)).toEqual([]);
        expect(await store.get(a, idOf(1))).toBeUndefined();
        expect(await store.get(b, idOf(1))).toMatchObject({ state: { owner: "b" } });
        expect(await store.deleteAll(a)).toBe(0);
        // The id is free again for the tenant.
        expect((await store.create(a, idOf(1), { again: true })).version).toBe(1);
      });

      it("stops between batches once its signal aborts, and a second call finishes the job", async () => {
        const { store, tenant } = fresh({ deleteBatch: 2 });
        for (let n = 1; n <= 3; n++) await store.create(tenant, idOf(n), { n });
        const controller = new AbortController();
        controller.abort();
        const err = await failure(store.deleteAll(tenant, { signal: controller.signal }));
        expect(err.code).toBe("cancelled");
        expect(err.message).toMatch(/call again to finish/);
        expect(await exported(store, tenant)).toHaveLength(3);
        expect(await store.deleteAll(tenant)).toBe(3);
      });

      it("retention deletes only the caller's sessions last updated longer ago than the age, and keeps one saved since", async () => {
        const { store, clock, tenant: a } = fresh({ deleteBatch: 2 });
        const { tenant: b } = fresh();
        for (const n of [1, 2, 3, 4]) await store.create(a, idOf(n), { n });
        await store.create(b, idOf(1), { owner: "b" });
        clock.advance(100);
        await store.create(a, idOf(5), { edge: true }); // exactly max_age old at the run: kept
        clock.advance(50);
        await store.modify(a, idOf(4), (s) => ({ state: { ...s, saved: true }, result: undefined })); // created long ago, saved lately
        await store.create(a, idOf(6), { young: true });
        clock.advance(50);

        expect(await store.applyRetention(a, 150)).toEqual({ deleted: 3, cutoff: new Date(clock.now().getTime() - 150_000) });
        expect((await exported(store, a)).map((s) => s.id)).toEqual([4, 5, 6].map(idOf));
        expect((await exported(store, b)).map((s) => s.id)).toEqual([idOf(1)]);
        expect((await store.applyRetention(a, 150)).deleted).toBe(0);
        expect((await store.applyRetention(a, 1)).deleted).toBe(3);
      });

      it("refuses a retention age that is not a whole number of seconds above 0, naming max_age_seconds, and deletes nothing", async () => {
        const { store, clock, tenant } = fresh();
        await store.create(tenant, idOf(1), {});
        clock.advance(1000);
        for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 32]) {
          const err = await failure(store.applyRetention(tenant, bad));
          expect(err.code).toBe("invalid_argument");
          expect(err.message).toMatch(/^max_age_seconds must be a whole number of seconds from 1 to 4294967295/);
        }
        expect(await store.get(tenant, idOf(1))).toBeDefined();
      });

      it("finds the sessions retention deletes through an index, under row-level security", async () => {
        const { tenant } = fresh();
        const plan = await db.tenantTx(tenant, async (q) => {
          await q.query("SET LOCAL enable_seqscan = off");
          const res = await q.query<{ "QUERY PLAN": string }>(
            "EXPLAIN SELECT id FROM council.sessions WHERE tenant_id = $1 AND updated_at < now() ORDER BY updated_at LIMIT 10",
            [tenant],
          );
          return res.rows.map((r) => r["QUERY PLAN"]).join("\n");
        });
        expect(plan).toMatch(/Index (Only )?Scan( Backward)? using sessions_recent/);
      });
    });

    describe("tenant isolation", () => {
      it("shows another tenant's session as missing, exactly like an unknown id", async () => {
        const { store, tenant: a } = fresh();
        const { tenant: b } = fresh();
        const id = randomUUID();
        await store.create(a, id, { secret: "for a only" });
        expect(await store.get(b, id)).toBeUndefined();
        const steal = () => ({ state: { stolen: true }, result: undefined });
        const theirs = await failure(store.modify(b, id, steal));
        const unknown = randomUUID();
        const missing = await failure(store.modify(b, unknown, steal));
        expect(theirs.code).toBe("not_found");
        expect(theirs.message).toBe(missing.message.replace(unknown, id));
        expect(await store.get(a, id)).toMatchObject({ state: { secret: "for a only" }, version: 1 });
      });

      it("lets two tenants hold the same id without either noticing the other", async () => {
        const { store, tenant: a } = fresh();
        const { tenant: b } = fresh();
        const id = randomUUID();
        await store.create(a, id, { owner: "a" });
        await store.create(b, id, { owner: "b" });
        await store.modify(b, id, (state) => ({ state: { ...state, n: 2 }, result: undefined }));
        expect(await store.get(a, id)).toMatchObject({ state: { owner: "a" }, version: 1 });
        expect(await store.get(b, id)).toMatchObject({ state: { owner: "b", n: 2 }, version: 2 });
      });

      it("row-level security alone refuses another tenant's rows", async () => {
        const { store, tenant: a } = fresh();
        const { tenant: b } = fresh();
        const id = randomUUID();
        await store.create(a, id, { secret: 1 });
        await db.tenantTx(b, async (q) => {
          // No tenant filter in these statements: only the policy stands between b and a's row.
          const seen = await q.query<{ n: unknown }>("SELECT count(*) AS n FROM council.sessions");
          expect(Number(seen.rows[0]?.n)).toBe(0);
          const updated = await q.query(`UPDATE council.sessions SET state = '{"stolen":true}' WHERE id = '${id}'`);
          expect(updated.rowCount).toBe(0);
          // The application role may delete (tenant deletion, retention), but only its tenant's rows.
          const deleted = await q.query("DELETE FROM council.sessions");
          expect(deleted.rowCount).toBe(0);
        });
        await expect(
          db.tenantTx(b, (q) =>
            q.query(
              `INSERT INTO council.sessions (tenant_id, id, state, version, created_at, updated_at)
               VALUES ('${a}', '${randomUUID()}', '{}', 1, now(), now())`,
            ),
          ),
        ).rejects.toThrow(/row-level security/);
        expect(await store.get(a, id)).toMatchObject({ state: { secret: 1 }, version: 1 });
      });

      it("forces row-level security, so it would bind even the table's owner", async () => {
        const res = await db.adminTx((q) =>
          q.query<{ relrowsecurity: boolean; relforcerowsecurity: boolean }>(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'council.sessions'::regclass",
          ),
        );
        expect(res.rows).toEqual([{ relrowsecurity: true, relforcerowsecurity: true }]);
      });
    });
  });
}
