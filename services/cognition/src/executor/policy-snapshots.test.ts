/**
 * Policy snapshots beside the executor (docs/cognition.md "Policy snapshots") against the real
 * policy service on Postgres: decisions equal the service's, a change reaches a second replica
 * through the watch stream, and a broken watch makes decisions re-read — or fail closed — once the
 * bound has passed, never decide from a stale document.
 */
import { ChaosError, createLogger, createRedisChangeCounters, type CallContext, type ChangeCounters, type ServiceClient } from "@chaos-core/kit";
import { Redis } from "ioredis";
import { Decision, Risk, type PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { TEST_REDIS_URL, uniquePrefix } from "../../../../test/support/redis.js";
import { createPolicySnapshots, type PolicySnapshots } from "./policy-snapshots.js";

type PolicyClient = ServiceClient<typeof PolicyService>;
const logger = createLogger("snapshots-test", "silent");

let services: RealServices;
const opened: PolicySnapshots[] = [];
beforeAll(async () => {
  services = await startRealServices("chaoscore_policy_snapshots");
});
afterAll(async () => {
  for (const s of opened) s.close();
  await services?.close();
});

let n = 0;
const tenantCtx = (): CallContext => ({ tenant: `snap-${process.pid}-${++n}`, principal: "agent" });
const snapshots = (
  policy: PolicyClient,
  options: { boundMs?: number; now?: () => number; changes?: ChangeCounters; watchRoundMs?: number; logger?: typeof logger } = {},
) => {
  const s = createPolicySnapshots(policy, { logger, ...options });
  opened.push(s);
  return s;
};

/** Waits (up to 10 s: a liveness wait, not a timing claim) until `check` holds. */
async function eventually(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const ask = (policy: PolicyClient, ctx: CallContext, capability: string, risk = Risk.LOW) =>
  policy.evaluate({ capability, risk, facts: { httpHost: capability === "http.request" ? "example.com" : "", attributes: {} } }, { ctx });

describe("policy snapshots", () => {
  it("decide exactly as the policy service does, naming the version", async () => {
    const ctx = tenantCtx();
    const version = await services.putPolicy(ctx.tenant, {
      deniedCapabilities: ["http.request"],
      requireConfirmationFor: ["memory.remember"],
      riskRules: { denyAtOrAbove: "RISK_CRITICAL", requireApprovalAtOrAbove: "RISK_HIGH" },
    });
    const snap = snapshots(services.policy);
    for (const [capability, risk] of [
      ["http.request", Risk.LOW],
      ["memory.remember", Risk.LOW],
      ["memory.recall", Risk.LOW],
      ["memory.recall", Risk.HIGH],
      ["memory.recall", Risk.CRITICAL],
    ] as const) {
      const local = await ask(snap.client, ctx, capability, risk);
      const remote = await ask(services.policy, ctx, capability, risk);
      expect({ ...local }, `${capability} at ${risk}`).toEqual({ ...remote });
      expect(local.policyVersion).toBe(BigInt(version));
    }
    await expect(snap.client.evaluate({ capability: "", risk: Risk.LOW }, { ctx })).rejects.toMatchObject({ code: "invalid_argument" });
  });

  it("decide conditional rules as the policy service does: the arguments, the signed caller's roles, the snapshot's own clock", async () => {
    const ctx: CallContext = { ...tenantCtx(), roles: ["support"] };
    await services.putPolicy(ctx.tenant, {
      rules: [
        { capability: "jira.*", effect: "DECISION_DENY", when: '!("support" in principal.roles) || args.project == "HR"' },
        { capability: "jira.delete", effect: "DECISION_REQUIRE_APPROVAL", when: "now.getHours() >= 18" },
      ],
    });
    const clock = Date.parse("2026-12-07T19:00:00Z");
    const snap = snapshots(services.policy, { now: () => clock });
    const decide = (policy: PolicyClient, call: CallContext, capability: string, args: Record<string, unknown>) =>
      policy.evaluate({ capability, risk: Risk.LOW, argumentsJson: JSON.stringify(args) }, { ctx: call });
    for (const [call, args] of [
      [ctx, { project: "OPS" }],
      [ctx, { project: "HR" }],
      [{ ...ctx, roles: [] }, { project: "OPS" }],
      [ctx, {}],
    ] as const) {
      const { evaluatedAt: _local, ...local } = await decide(snap.client, call, "jira.create", args);
      const { evaluatedAt: _remote, ...remote } = await decide(services.policy, call, "jira.create", args);
      expect(local, JSON.stringify(args)).toEqual(remote);
    }
    const held = await decide(snap.client, ctx, "jira.delete", { project: "OPS" });
    expect(held).toMatchObject({ decision: Decision.REQUIRE_APPROVAL, matchedRule: "rules[1]", evaluatedAt: { seconds: BigInt(clock / 1000) } });
    const noProject = await decide(snap.client, ctx, "jira.create", {});
    expect(noProject).toMatchObject({ decision: Decision.DENY, matchedRule: "rules[0]" });
    expect(noProject.conditionError).toContain('no field "project"');
  });

  it("a policy change reaches a second replica's decisions through the watch stream", async () => {
    const ctx = tenantCtx();
    const v1 = await services.putPolicy(ctx.tenant, {});
    const [a, b] = [snapshots(services.policy), snapshots(services.policy)];
    const first = await ask(a.client, ctx, "memory.recall");
    expect(first.decision, first.reason).toBe(Decision.ALLOW);
    expect((await ask(b.client, ctx, "memory.recall")).policyVersion).toBe(BigInt(v1));
    const v2 = await services.putPolicy(ctx.tenant, { deniedCapabilities: ["memory.recall"] });
    await eventually(() => b.versionOf(ctx.tenant) === v2, "replica b's snapshot reaches the new version");
    const denied = await ask(b.client, ctx, "memory.recall");
    expect(denied).toMatchObject({ decision: Decision.DENY, matchedRule: "deniedCapabilities", policyVersion: BigInt(v2) });
  });

  it("a watch round that reaches its deadline is reopened at once, not counted as broken, and changes keep arriving", async () => {
    const ctx = tenantCtx();
    await services.putPolicy(ctx.tenant, {});
    const quiet = createLogger("snapshots-test", "silent");
    const warn = vi.spyOn(quiet, "warn");
    let opens = 0;
    const counting: PolicyClient = {
      ...services.policy,
      watchPolicy: (req, opts) => {
        opens++;
        return services.policy.watchPolicy(req, opts);
      },
    };
    const snap = snapshots(counting, { watchRoundMs: 150, logger: quiet });
    await ask(snap.client, ctx, "memory.recall");
    await eventually(() => opens >= 4, "the watch reopened after three rounds");
    const v2 = await services.putPolicy(ctx.tenant, { deniedCapabilities: ["memory.recall"] });
    await eventually(() => snap.versionOf(ctx.tenant) === v2, "the reopened watch delivers the change");
    expect(warn).not.toHaveBeenCalled();
  });

  it("with the watch broken: within the bound the snapshot decides, past it a decision re-reads, and fails closed when it cannot", async () => {
    const ctx = tenantCtx();
    const v1 = await services.putPolicy(ctx.tenant, {});
    // The real service behind a transport that can lose the stream and then the service itself.
    let watchCut = false;
    let down = false;
    const faulty: PolicyClient = {
      ...services.policy,
      watchPolicy: (req, opts) =>
        (async function* () {
          if (watchCut) throw Object.assign(new Error("stream lost"), { code: "unavailable" });
          for await (const m of services.policy.watchPolicy(req, opts)) {
            if (watchCut) throw Object.assign(new Error("stream lost"), { code: "unavailable" });
            yield m;
          }
        })(),
      getPolicy: (req, opts) => (down ? Promise.reject(Object.assign(new Error("policy is down"), { code: "unavailable" })) : services.policy.getPolicy(req, opts)),
    };
    let clock = 1_000_000;
    const snap = snapshots(faulty, { boundMs: 1_000, now: () => clock });
    expect((await ask(snap.client, ctx, "memory.recall")).policyVersion).toBe(BigInt(v1));
    watchCut = true;
    const v2 = await services.putPolicy(ctx.tenant, { deniedCapabilities: ["memory.recall"] });
    clock += 500;
    // Inside the bound: the snapshot (v1) still decides — what the documented bound allows.
    expect((await ask(snap.client, ctx, "memory.recall")).policyVersion).toBe(BigInt(v1));
    clock += 600;
    // Past it, with no word from the watch: the decision re-reads first and sees v2.
    expect(await ask(snap.client, ctx, "memory.recall")).toMatchObject({ decision: Decision.DENY, policyVersion: BigInt(v2) });
    down = true;
    clock += 1_100;
    await expect(ask(snap.client, ctx, "memory.recall")).rejects.toThrow("policy is down");
  });
});

describe("policy snapshots with announced changes (policy-changes counters in Redis)", () => {
  const prefix = uniquePrefix("snapshots");
  let redis: Redis;
  let announced: RealServices;
  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    announced = await startRealServices("chaoscore_policy_snapshots_changes", { policyChanges: createRedisChangeCounters(redis, { prefix, name: "policy-changes" }) });
  });
  afterAll(async () => {
    await announced?.close();
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  /** The real service with its watch stream silent: only a re-read can bring a change. */
  const watchless = (): PolicyClient => ({ ...announced.policy, watchPolicy: () => (async function* () {})() });

  it("a stored change — a new DENY — is used by the very next decision of another replica, inside any bound", async () => {
    const ctx = tenantCtx();
    const v1 = await announced.putPolicy(ctx.tenant, {});
    // Two replicas, each with its own connection to Redis, the watch silent and a bound of an hour.
    const replicas = [0, 1].map(() => new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 }));
    try {
      const [a, b] = replicas.map((r) => snapshots(watchless(), { boundMs: 3_600_000, changes: createRedisChangeCounters(r, { prefix, name: "policy-changes" }) }));
      expect((await ask(a!.client, ctx, "memory.recall")).policyVersion).toBe(BigInt(v1));
      expect((await ask(b!.client, ctx, "memory.recall")).decision).toBe(Decision.ALLOW);
      const v2 = await announced.putPolicy(ctx.tenant, { deniedCapabilities: ["memory.recall"] });
      expect(await ask(b!.client, ctx, "memory.recall")).toMatchObject({ decision: Decision.DENY, policyVersion: BigInt(v2) });
      expect(await ask(a!.client, ctx, "memory.recall")).toMatchObject({ decision: Decision.DENY, policyVersion: BigInt(v2) });
    } finally {
      for (const r of replicas) r.disconnect();
    }
  });

  it("with the counter unreadable, the bound decides when to re-read", async () => {
    const ctx = tenantCtx();
    const v1 = await announced.putPolicy(ctx.tenant, {});
    const broken: ChangeCounters = { kind: "redis", read: () => Promise.reject(new Error("Redis is down")), bump: () => Promise.reject(new Error("Redis is down")) };
    let clock = 1_000_000;
    const snap = snapshots(watchless(), { boundMs: 1_000, now: () => clock, changes: broken });
    expect((await ask(snap.client, ctx, "memory.recall")).policyVersion).toBe(BigInt(v1));
    const v2 = await announced.putPolicy(ctx.tenant, { deniedCapabilities: ["memory.recall"] });
    clock += 500;
    expect((await ask(snap.client, ctx, "memory.recall")).policyVersion).toBe(BigInt(v1));
    clock += 600;
    expect(await ask(snap.client, ctx, "memory.recall")).toMatchObject({ decision: Decision.DENY, policyVersion: BigInt(v2) });
  });

  it("a change whose announcement cannot be made is not stored", async () => {
    const ctx = tenantCtx();
    const down = await startRealServices("chaoscore_policy_snapshots_down", {
      policyChanges: { kind: "redis", read: () => Promise.resolve(undefined), bump: () => Promise.reject(new ChaosError("unavailable", "Redis is down")) },
    });
    try {
      await expect(down.putPolicy(ctx.tenant, { deniedCapabilities: ["memory.recall"] })).rejects.toMatchObject({ code: "unavailable", message: expect.stringMatching(/Redis is down/) });
      // Nothing was stored: the tenant still has the default policy, version 0.
      expect(await ask(down.policy, ctx, "memory.recall")).toMatchObject({ decision: Decision.ALLOW, policyVersion: 0n });
    } finally {
      await down.close();
    }
  });
});
