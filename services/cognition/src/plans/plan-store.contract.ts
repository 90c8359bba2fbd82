import { describe, expect, it } from "vitest";
import { expectChaosError } from "../test-support/expect-error.js";
import type { NewPlan, PlanStep } from "./plan.js";
import {
  DEFAULT_PLAN_TTL_SECONDS,
  MAX_PLAN_BYTES,
  MAX_PLAN_STEPS,
  MAX_PLAN_TTL_SECONDS,
  planScopeOf,
  type PlanStore,
} from "./plan-store.js";

/** What the contract needs from a backend. */
export interface PlanStoreHarness {
  /** A store on the backend under test. */
  makeStore(): PlanStore;
  /** Lets `ms` pass for the store: a fake clock for the in-process store, real time for Redis. */
  elapse(ms: number): Promise<void>;
}

function step(id: string, input: PlanStep["input"] = { url: "https://example.com/" }): PlanStep {
  return { id, capability: "http.request", input, rationale: `because ${id}` };
}

function newPlan(overrides: Partial<NewPlan> = {}): NewPlan {
  return {
    tenant: "acme",
    scope: "session-1",
    objective: "fetch the example page",
    steps: [step("s1"), step("s2", { query: { q: "chaos", page: 2, exact: true, tags: ["a", null] } })],
    ...overrides,
  };
}

const PLAN_ID = /^[A-Za-z0-9_-]{22,}$/;

/** The behaviour every PlanStore has, whatever holds the plans. */
export function describePlanStoreContract(name: string, harness: PlanStoreHarness): void {
  describe(`${name} plan store`, () => {
    describe("round trip", () => {
      it("gives back exactly the plan it stored, with an id and a lifetime", async () => {
        const store = harness.makeStore();
        const stored = await store.put(newPlan({ provider: "heuristic", model: "none" }));
        expect(stored.id).toMatch(PLAN_ID);
        expect(stored).toMatchObject({ ...newPlan(), provider: "heuristic", model: "none" });
        expect(Date.parse(stored.expiresAt) - Date.parse(stored.createdAt)).toBe(DEFAULT_PLAN_TTL_SECONDS * 1000);
        expect(await store.get("acme", "session-1", stored.id)).toStrictEqual(stored);
      });

      it("leaves provider and model out when the plan has none", async () => {
        const store = harness.makeStore();
        const stored = await store.put(newPlan());
        const read = await store.get("acme", "session-1", stored.id);
        expect(read).toBeDefined();
        expect(Object.keys(read!)).not.toContain("provider");
        expect(Object.keys(read!)).not.toContain("model");
      });

      it("gives each plan its own random id, even for identical plans", async () => {
        const store = harness.makeStore();
        const ids = new Set<string>();
        for (let i = 0; i < 20; i++) ids.add((await store.put(newPlan())).id);
        expect(ids.size).toBe(20);
        for (const id of ids) expect(id).toMatch(PLAN_ID);
      });

      it("is not changed by later edits to the objects the caller passed or received", async () => {
        const store = harness.makeStore();
        const input = { url: "https://example.com/" };
        const stored = await store.put(newPlan({ steps: [step("s1", input)] }));
        input.url = "https://evil.example/";
        (stored.steps[0]!.input as { url: string }).url = "https://evil.example/";
        const read = await store.get("acme", "session-1", stored.id);
        expect(read?.steps[0]?.input).toEqual({ url: "https://example.com/" });
        (read!.steps[0]!.input as { url: string }).url = "https://evil.example/";
        const again = await store.get("acme", "session-1", stored.id);
        expect(again?.steps[0]?.input).toEqual({ url: "https://example.com/" });
      });
    });

    describe("binding to tenant and session", () => {
      it("finds nothing from another session or tenant, and cannot delete it from there", async () => {
        const store = harness.makeStore();
        const stored = await store.put(newPlan());
        expect(await store.get("acme", "session-2", stored.id)).toBeUndefined();
        expect(await store.get("globex", "session-1", stored.id)).toBeUndefined();
        expect(await store.delete("acme", "session-2", stored.id)).toBe(false);
        expect(await store.delete("globex", "session-1", stored.id)).toBe(false);
        expect(await store.get("acme", "session-1", stored.id)).toStrictEqual(stored);
      });

      it("answers an unknown or malformed id exactly like another session's id", async () => {
        const store = harness.makeStore();
        const stored = await store.put(newPlan());
        for (const id of ["", "nope", `${stored.id}x`, "../../etc", "a*", `x:${stored.id}`]) {
          expect(await store.get("acme", "session-1", id)).toBeUndefined();
          expect(await store.delete("acme", "session-1", id)).toBe(false);
        }
      });

      it("cannot reach a plan by moving part of the session id into the plan id", async () => {
        const store = harness.makeStore();
        const stored = await store.put(newPlan({ scope: "team:alpha" }));
        expect(await store.get("acme", "team", `alpha:${stored.id}`)).toBeUndefined();
        expect(await store.get("acme", "team:alpha", stored.id)).toStrictEqual(stored);
      });

      it("refuses an invalid tenant or session id as invalid_argument", async () => {
        const store = harness.makeStore();
        await expectChaosError(store.put(newPlan({ tenant: "Acme Corp" })), "invalid_argument");
        await expectChaosError(store.put(newPlan({ scope: "" })), "invalid_argument");
        await expectChaosError(store.put(newPlan({ scope: "has space" })), "invalid_argument");
        await expectChaosError(store.get("../acme", "session-1", "x"), "invalid_argument");
      });

      it("keeps the session id beside a session scope, for replicas of the previous version", async () => {
        const store = harness.makeStore();
        const stored = await store.put(newPlan());
        expect(stored).toMatchObject({ scope: "session-1", sessionId: "session-1" });
      });
    });

    describe("binding to a principal (a call without a session)", () => {
      const alice = planScopeOf({ principal: "alice" });
      const bob = planScopeOf({ principal: "bob" });

      it("finds a plan made without a session only for the principal that made it, exactly like an unknown id", async () => {
        const store = harness.makeStore();
        const stored = await store.put(newPlan({ scope: alice }));
        expect(stored.scope).toBe(alice);
        expect(Object.keys(stored)).not.toContain("sessionId");
        expect(await store.get("acme", alice, stored.id)).toStrictEqual(stored);
        // Another principal of the same tenant: the answer an id that never existed gets.
        const unknown = "AAAAAAAAAAAAAAAAAAAAAA";
        expect(await store.get("acme", bob, stored.id)).toBeUndefined();
        expect(await store.get("acme", alice, unknown)).toBeUndefined();
        expect(await store.delete("acme", bob, stored.id)).toBe(false);
        expect(await store.delete("acme", alice, unknown)).toBe(false);
        expect(await store.get("globex", alice, stored.id)).toBeUndefined();
        expect(await store.get("acme", alice, stored.id)).toStrictEqual(stored);
        expect(await store.delete("acme", alice, stored.id)).toBe(true);
      });

      it("never lets a session and a principal see each other's plans", async () => {
        const store = harness.makeStore();
        const inSession = await store.put(newPlan());
        const sessionless = await store.put(newPlan({ scope: alice }));
        expect(await store.get("acme", alice, inSession.id)).toBeUndefined();
        expect(await store.get("acme", "session-1", sessionless.id)).toBeUndefined();
      });
    });

    describe("expiry", () => {
      it("keeps a plan until its TTL has passed, then finds nothing", async () => {
        const store = harness.makeStore();
        const stored = await store.put(newPlan(), 1);
        expect(Date.parse(stored.expiresAt) - Date.parse(stored.createdAt)).toBe(1000);
        await harness.elapse(400);
        expect(await store.get("acme", "session-1", stored.id)).toStrictEqual(stored);
        await harness.elapse(800);
        expect(await store.get("acme", "session-1", stored.id)).toBeUndefined();
        expect(await store.delete("acme", "session-1", stored.id)).toBe(false);
      });

      it("refuses a TTL above the cap or below one second, naming the limit", async () => {
        const store = harness.makeStore();
        const tooLong = await expectChaosError(store.put(newPlan(), MAX_PLAN_TTL_SECONDS + 1), "invalid_argument");
        expect(tooLong.message).toContain(String(MAX_PLAN_TTL_SECONDS));
        expect((await store.put(newPlan(), MAX_PLAN_TTL_SECONDS)).id).toMatch(PLAN_ID);
        await expectChaosError(store.put(newPlan(), 0), "invalid_argument");
        await expectChaosError(store.put(newPlan(), 1.5), "invalid_argument");
      });
    });

    describe("delete", () => {
      it("removes the plan once", async () => {
        const store = harness.makeStore();
        const stored = await store.put(newPlan());
        const other = await store.put(newPlan());
        expect(await store.delete("acme", "session-1", stored.id)).toBe(true);
        expect(await store.get("acme", "session-1", stored.id)).toBeUndefined();
        expect(await store.delete("acme", "session-1", stored.id)).toBe(false);
        expect(await store.get("acme", "session-1", other.id)).toStrictEqual(other);
      });
    });

    describe("limits", () => {
      const steps = (n: number) => Array.from({ length: n }, (_, i) => step(`s${i + 1}`));

      it(`accepts ${MAX_PLAN_STEPS} steps and refuses one more, naming the limit`, async () => {
        const store = harness.makeStore();
        expect((await store.put(newPlan({ steps: steps(MAX_PLAN_STEPS) }))).steps).toHaveLength(MAX_PLAN_STEPS);
        const err = await expectChaosError(store.put(newPlan({ steps: steps(MAX_PLAN_STEPS + 1) })), "invalid_argument");
        expect(err.message).toContain(`at most ${MAX_PLAN_STEPS} steps`);
      });

      it("accepts a plan just under 256 KiB and refuses one over, naming the limit", async () => {
        const store = harness.makeStore();
        const withText = (chars: number) => newPlan({ steps: [step("s1", { text: "x".repeat(chars) })] });
        const big = await store.put(withText(MAX_PLAN_BYTES - 1024));
        expect(await store.get("acme", "session-1", big.id)).toStrictEqual(big);
        const err = await expectChaosError(store.put(withText(MAX_PLAN_BYTES)), "invalid_argument");
        expect(err.message).toContain(`${MAX_PLAN_BYTES} bytes (256 KiB)`);
        // Multi-byte characters count as the bytes they take, not as one.
        await expectChaosError(store.put(newPlan({ steps: [step("s1", { text: "é".repeat(MAX_PLAN_BYTES / 2) })] })), "invalid_argument");
      });

      it("refuses what is not a JSON plan", async () => {
        const store = harness.makeStore();
        const bad: unknown[] = [
          { steps: [step("s1", { n: Number.NaN })] },
          { steps: [step("s1", { n: undefined as unknown as null })] },
          { steps: [step("s1", { n: 1n as unknown as number })] },
          { steps: [step("s1", [1, 2] as unknown as PlanStep["input"])] },
          { steps: [step("s1"), step("s1")] },
          { steps: [{ ...step("s1"), capability: "" }] },
          { objective: 42 as unknown as string },
        ];
        for (const overrides of bad) {
          await expectChaosError(store.put(newPlan(overrides as Partial<NewPlan>)), "invalid_argument");
        }
      });
    });
  });
}
