import { describe, expect, it } from "vitest";
import { uniquePrefix, useRedisReplicas } from "../../../../test/support/redis.js";
import { expectChaosError } from "../test-support/expect-error.js";
import type { NewPlan } from "./plan.js";
import { DEFAULT_PLAN_TTL_SECONDS, planScopeOf } from "./plan-store.js";
import { describePlanStoreContract } from "./plan-store.contract.js";
import { createRedisPlanStore } from "./redis-plan-store.js";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// Two connections stand for two cognition replicas sharing one Redis.
const replicas = useRedisReplicas("plans");
const prefix = replicas.prefix;

describePlanStoreContract("Redis", {
  makeStore: () => createRedisPlanStore(replicas.a, { prefix }),
  elapse: sleep,
});

describe("Redis plan store", () => {
  const plan: NewPlan = {
    tenant: "acme",
    scope: "session-1",
    objective: "fetch the example page",
    steps: [{ id: "s1", capability: "http.request", input: { url: "https://example.com/" }, rationale: "it was asked" }],
  };

  it("serves a plan made on one replica from another, and a delete on either is seen by both", async () => {
    const a = createRedisPlanStore(replicas.a, { prefix });
    const b = createRedisPlanStore(replicas.b, { prefix });
    const stored = await a.put(plan);
    expect(await b.get("acme", "session-1", stored.id)).toStrictEqual(stored);
    expect(await b.get("acme", "session-2", stored.id)).toBeUndefined();
    expect(await b.delete("acme", "session-1", stored.id)).toBe(true);
    expect(await a.get("acme", "session-1", stored.id)).toBeUndefined();
  });

  it("keys the plan by tenant and session, with Redis expiring it after the TTL", async () => {
    const store = createRedisPlanStore(replicas.a, { prefix });
    const stored = await store.put(plan);
    const key = `${prefix}{acme}:plan:session-1:${stored.id}`;
    const pttl = await replicas.a.pttl(key);
    expect(pttl).toBeGreaterThan((DEFAULT_PLAN_TTL_SECONDS - 10) * 1000);
    expect(pttl).toBeLessThanOrEqual(DEFAULT_PLAN_TTL_SECONDS * 1000);
    expect(JSON.parse((await replicas.a.get(key))!)).toStrictEqual(stored);

    const shortLived = await store.put(plan, 90);
    expect(await replicas.a.pttl(`${prefix}{acme}:plan:session-1:${shortLived.id}`)).toBeLessThanOrEqual(90_000);
  });

  it("keys a plan made without a session by the hex SHA-256 of its principal", async () => {
    const store = createRedisPlanStore(replicas.a, { prefix });
    const scope = planScopeOf({ principal: "agent with spaces: and colons" });
    expect(scope).toMatch(/^principal:[0-9a-f]{64}$/);
    const stored = await store.put({ ...plan, scope });
    const key = `${prefix}{acme}:plan:${scope}:${stored.id}`;
    expect(JSON.parse((await replicas.a.get(key))!)).toStrictEqual(stored);
    expect(await createRedisPlanStore(replicas.b, { prefix }).get("acme", scope, stored.id)).toStrictEqual(stored);
  });

  it("reads a plan written before scopes existed (only its sessionId), under the same key", async () => {
    const store = createRedisPlanStore(replicas.a, { prefix });
    const id = "BBBBBBBBBBBBBBBBBBBBBB";
    const legacy = {
      id,
      tenant: "acme",
      sessionId: "session-1",
      objective: "fetch the example page",
      steps: plan.steps,
      createdAt: new Date().toISOString(),
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      provider: "heuristic",
    };
    await replicas.a.set(`${prefix}{acme}:plan:session-1:${id}`, JSON.stringify(legacy), "EX", 60);
    expect(await store.get("acme", "session-1", id)).toStrictEqual({ ...legacy, scope: "session-1" });
    expect(await store.get("acme", "session-2", id)).toBeUndefined();
    expect(await store.get("acme", planScopeOf({ principal: "session-1" }), id)).toBeUndefined();
    expect(await store.delete("acme", "session-1", id)).toBe(true);
  });

  it("does not see plans under another prefix", async () => {
    const stored = await createRedisPlanStore(replicas.a, { prefix }).put(plan);
    const elsewhere = createRedisPlanStore(replicas.a, { prefix: uniquePrefix("plans-other") });
    expect(await elsewhere.get("acme", "session-1", stored.id)).toBeUndefined();
  });

  it("reports a value that is not a plan for its key as internal, never as a plan", async () => {
    const store = createRedisPlanStore(replicas.a, { prefix });
    const stored = await store.put(plan);
    const key = `${prefix}{acme}:plan:session-1:${stored.id}`;
    const corrupt = [
      "not json {",
      JSON.stringify({ hello: "world" }),
      JSON.stringify({ ...stored, steps: [{ id: "s1", capability: "http.request", input: "rm -rf", rationale: "" }] }),
      // A well-formed plan of another owner, copied under this key.
      JSON.stringify({ ...stored, tenant: "globex" }),
      JSON.stringify({ ...stored, sessionId: "session-2" }),
      JSON.stringify({ ...stored, scope: "session-2", sessionId: "session-2" }),
      JSON.stringify({ ...stored, scope: undefined, sessionId: undefined }),
      JSON.stringify({ ...stored, id: "AAAAAAAAAAAAAAAAAAAAAA" }),
    ];
    for (const value of corrupt) {
      await replicas.a.set(key, value, "EX", 60);
      const err = await expectChaosError(store.get("acme", "session-1", stored.id), "internal", ["globex", "rm -rf"]);
      expect(err.message).toBe("a stored plan could not be read");
    }
  });
});
