import { randomUUID } from "node:crypto";
import { ChaosError, type Db } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SESSION_STATE_MAX_BYTES, type CouncilSessionStore } from "../session-store.js";
import { migrateCouncil } from "./migrations.js";
import { createSqlCouncilStore } from "./sql-store.js";

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
      expect(await migrateCouncil(db)).toEqual(["0001_sessions"]);
    });
    afterAll(async () => {
      await close?.();
    });

    function fresh(): { store: CouncilSessionStore; clock: ManualClock; tenant: string } {
      const clock = new ManualClock();
      tenants += 1;
      return { store: createSqlCouncilStore(db, { now: () => clock.now() }), clock, tenant: `tenant-${tenants}` };
    }

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

    it("updates with the version it read, and moves the version and update time on", async () => {
      const { store, clock, tenant } = fresh();
      const id = randomUUID();
      const created = await store.create(tenant, id, { step: 0 });
      clock.advance(5);
      const first = await store.update(tenant, id, { step: 1 }, 1);
      expect(first).toEqual({ id, state: { step: 1 }, version: 2, createdAt: created.createdAt, updatedAt: clock.now() });
      const second = await store.update(tenant, id, { step: 2 }, 2);
      expect(second.version).toBe(3);
      expect((await store.get(tenant, id))?.state).toEqual({ step: 2 });
    });

    it("refuses an update from a stale read with conflict, and keeps the winner's state", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      await store.create(tenant, id, { by: "nobody" });
      const a = await store.get(tenant, id);
      const b = await store.get(tenant, id);
      await store.update(tenant, id, { by: "a" }, a!.version);
      const err = await failure(store.update(tenant, id, { by: "b" }, b!.version));
      expect(err.code).toBe("conflict");
      expect(err.message).toMatch(/changed while this call ran \(version 2, expected 1\)/);
      expect(await store.get(tenant, id)).toMatchObject({ state: { by: "a" }, version: 2 });
    });

    it("lets exactly one of several concurrent updates of one version win", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      await store.create(tenant, id, { winner: null });
      const outcomes = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) => store.update(tenant, id, { winner: i }, 1)),
      );
      const won = outcomes.filter((o) => o.status === "fulfilled");
      expect(won).toHaveLength(1);
      for (const o of outcomes) {
        if (o.status === "rejected") expect((o.reason as ChaosError).code).toBe("conflict");
      }
      const final = await store.get(tenant, id);
      expect(final?.version).toBe(2);
      expect(final?.state).toEqual((won[0] as PromiseFulfilledResult<{ state: unknown }>).value.state);
    });

    it("answers an unknown session with undefined and not_found", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      expect(await store.get(tenant, id)).toBeUndefined();
      const err = await failure(store.update(tenant, id, { x: 1 }, 1));
      expect(err.code).toBe("not_found");
      expect(err.message).toBe(`session ${id} was not found`);
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
      expect((await failure(store.update(tenant, "x", {}, 1))).code).toBe("invalid_argument");
    });

    it("refuses a state over the size limit, and stores nothing", async () => {
      const { store, tenant } = fresh();
      const id = randomUUID();
      const err = await failure(store.create(tenant, id, { blob: "x".repeat(SESSION_STATE_MAX_BYTES) }));
      expect(err.code).toBe("resource_exhausted");
      expect(err.message).toMatch(/the limit is 4194304 bytes/);
      expect(await store.get(tenant, id)).toBeUndefined();
    });

    describe("tenant isolation", () => {
      it("shows another tenant's session as missing, exactly like an unknown id", async () => {
        const { store, tenant: a } = fresh();
        const { tenant: b } = fresh();
        const id = randomUUID();
        await store.create(a, id, { secret: "for a only" });
        expect(await store.get(b, id)).toBeUndefined();
        const theirs = await failure(store.update(b, id, { stolen: true }, 1));
        const unknown = randomUUID();
        const missing = await failure(store.update(b, unknown, { stolen: true }, 1));
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
        await store.update(b, id, { owner: "b", n: 2 }, 1);
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
        });
        await expect(
          db.tenantTx(b, (q) =>
            q.query(
              `INSERT INTO council.sessions (tenant_id, id, state, version, created_at, updated_at)
               VALUES ('${a}', '${randomUUID()}', '{}', 1, now(), now())`,
            ),
          ),
        ).rejects.toThrow(/row-level security/);
        // The application role cannot delete sessions at all.
        await expect(db.tenantTx(a, (q) => q.query("DELETE FROM council.sessions"))).rejects.toThrow(/permission denied/);
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
