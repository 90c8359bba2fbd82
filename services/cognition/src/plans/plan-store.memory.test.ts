import { describe, expect, it } from "vitest";
import { createMemoryPlanStore, DEFAULT_MEMORY_MAX_PLANS, type MemoryPlanStoreOptions } from "./memory-plan-store.js";
import { expectChaosError } from "../test-support/expect-error.js";
import type { NewPlan } from "./plan.js";
import { describePlanStoreContract } from "./plan-store.contract.js";

/** A clock the tests move by hand; it only ever goes forward. */
function fakeClock(start = Date.parse("2030-01-01T00:00:00Z")) {
  let nowMs = start;
  return {
    now: () => nowMs,
    advance: (ms: number) => {
      nowMs += ms;
    },
  };
}

const clock = fakeClock();

describePlanStoreContract("in-process", {
  makeStore: () => createMemoryPlanStore({ now: clock.now }),
  elapse: async (ms) => clock.advance(ms),
});

describe("in-process plan store", () => {
  const plan = (objective: string): NewPlan => ({ tenant: "default", scope: "s", objective, steps: [] });

  function setup(options: MemoryPlanStoreOptions) {
    const c = fakeClock();
    return { clock: c, store: createMemoryPlanStore({ ...options, now: c.now }) };
  }

  it("keeps a default-TTL plan for an hour and not a second longer", async () => {
    const { clock: c, store } = setup({});
    const stored = await store.put(plan("hourly"));
    c.advance(3600 * 1000 - 1);
    expect(await store.get("default", "s", stored.id)).toBeDefined();
    c.advance(1);
    expect(await store.get("default", "s", stored.id)).toBeUndefined();
  });

  it("when full, drops expired plans before any live one", async () => {
    const { clock: c, store } = setup({ maxPlans: 3 });
    const a = await store.put(plan("a"), 100);
    const shortLived = await store.put(plan("short"), 10);
    const b = await store.put(plan("b"), 100);
    c.advance(20_000);
    const d = await store.put(plan("d"), 100);
    for (const kept of [a, b, d]) expect(await store.get("default", "s", kept.id)).toBeDefined();
    expect(await store.get("default", "s", shortLived.id)).toBeUndefined();
  });

  it("when full of live plans, evicts the one nearest its expiry", async () => {
    const { clock: c, store } = setup({ maxPlans: 2 });
    const longLived = await store.put(plan("long-lived"), 1000);
    c.advance(1000);
    const soonest = await store.put(plan("soonest"), 100);
    const newest = await store.put(plan("newest"), 100);
    expect(await store.get("default", "s", soonest.id)).toBeUndefined();
    expect(await store.get("default", "s", longLived.id)).toBeDefined();
    expect(await store.get("default", "s", newest.id)).toBeDefined();
  });

  it("bounds the bytes it holds as well as the count", async () => {
    const big = (objective: string): NewPlan => ({ ...plan(objective), objective: objective + "x".repeat(100_000) });
    const { store } = setup({ maxPlans: 100, maxBytes: 250_000 });
    const first = await store.put(big("first"));
    const second = await store.put(big("second"));
    const third = await store.put(big("third"));
    expect(await store.get("default", "s", first.id)).toBeUndefined();
    expect(await store.get("default", "s", second.id)).toBeDefined();
    expect(await store.get("default", "s", third.id)).toBeDefined();
  });

  it("one tenant creating 1,000 plans does not evict another tenant's plan", async () => {
    const { store } = setup({});
    const theirs = await store.put({ ...plan("theirs"), tenant: "globex" });
    const first = await store.put(plan("ours 0"));
    for (let i = 1; i <= DEFAULT_MEMORY_MAX_PLANS; i++) await store.put(plan(`ours ${i}`));
    expect(await store.get("globex", "s", theirs.id)).toBeDefined();
    // The busy tenant's burst costs its own oldest plan, as before.
    expect(await store.get("default", "s", first.id)).toBeUndefined();
  });

  it("refuses a plan, never evicting another tenant's, when every tenant together holds the process-wide bytes", async () => {
    const big = (tenant: string, objective: string): NewPlan => ({ ...plan(objective), tenant, objective: objective + "x".repeat(100_000) });
    const { store } = setup({ maxBytes: 250_000, maxTotalBytes: 350_000 });
    const a1 = await store.put(big("acme", "a1"));
    const a2 = await store.put(big("acme", "a2"));
    const g1 = await store.put(big("globex", "g1"));
    const err = await expectChaosError(store.put(big("globex", "g2")), "resource_exhausted");
    expect(err.message).toContain("350000 bytes");
    for (const [tenant, kept] of [["acme", a1], ["acme", a2], ["globex", g1]] as const) {
      expect(await store.get(tenant, "s", kept.id)).toBeDefined();
    }
    expect(await store.delete("acme", "s", a1.id)).toBe(true);
    expect(await store.put(big("globex", "g2"))).toBeDefined();
  });

  it("frees the room of deleted plans", async () => {
    const { store } = setup({ maxPlans: 2 });
    const a = await store.put(plan("a"));
    const b = await store.put(plan("b"));
    expect(await store.delete("default", "s", b.id)).toBe(true);
    const c = await store.put(plan("c"));
    expect(await store.get("default", "s", a.id)).toBeDefined();
    expect(await store.get("default", "s", c.id)).toBeDefined();
  });
});
