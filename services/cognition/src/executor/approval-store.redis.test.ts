import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { useRedisReplicas } from "../../../../test/support/redis.js";
import { expectChaosError } from "../test-support/expect-error.js";
import { channelsOf } from "./approvals.js";
import type { PendingApproval } from "./step-types.js";
import { describeApprovalStoreContract } from "./approval-store.contract.js";
import { createRedisApprovalStore } from "./redis-approval-store.js";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// Two connections stand for two cognition replicas sharing one Redis.
const replicas = useRedisReplicas("approvals");
const prefix = replicas.prefix;

describeApprovalStoreContract("Redis", {
  makeStore: (ttlSeconds) => createRedisApprovalStore(replicas.a, { prefix, ...(ttlSeconds !== undefined ? { ttlSeconds } : {}) }),
  elapse: sleep,
});

describe("Redis approval store", () => {
  const approval = (): PendingApproval => ({
    approvalId: randomUUID(),
    step: { id: "s1", capability: "test.echo", input: { text: "x" } },
    capability: "test.echo",
    risk: "low",
    argsHash: "0".repeat(64),
    policyVersion: 1,
    matchedRule: "r",
    reason: "r",
    call: { tenant: "acme", principal: "agent", sessionId: "s" },
  });

  it("keys the approval by tenant, expires it after a day, and shares it between replicas", async () => {
    const a = createRedisApprovalStore(replicas.a, { prefix });
    const b = createRedisApprovalStore(replicas.b, { prefix });
    const made = approval();
    await a.create(made);
    const key = `${prefix}{acme}:approval:${made.approvalId}`;
    const pttl = await replicas.a.pttl(key);
    expect(pttl).toBeGreaterThan((24 * 3600 - 10) * 1000);
    expect(pttl).toBeLessThanOrEqual(24 * 3600 * 1000);
    await b.resolve("acme", made.approvalId, { approve: true, channel: "approver", by: { tenant: "acme", principal: "alice" } });
    // A transition keeps the key's expiry.
    expect(await replicas.a.pttl(key)).toBeGreaterThan((24 * 3600 - 10) * 1000);
    const [first, second] = await Promise.allSettled([a.consume("acme", made.approvalId), b.consume("acme", made.approvalId)]);
    expect([first.status, second.status].sort()).toEqual(["fulfilled", "rejected"]);
  });

  it("reads an approval stored before channels existed: no channels, and an answer recorded as elicitation", async () => {
    const store = createRedisApprovalStore(replicas.a, { prefix });
    const made = approval();
    await store.create(made);
    const key = `${prefix}{acme}:approval:${made.approvalId}`;
    // The hash exactly as the previous build wrote it: no channels in the record, the old channel name.
    const resolution = { approved: true, channel: "elicitation", resolvedBy: "human via elicitation in session s", principal: "agent", sessionId: "s", resolvedAt: new Date().toISOString() };
    await replicas.a.hset(key, "status", "approved", "resolution", JSON.stringify(resolution));
    const read = await store.get("acme", made.approvalId);
    expect(read?.channels).toBeUndefined();
    expect(read?.resolution).toMatchObject({ channel: "client_elicitation", resolvedBy: "human via elicitation in session s" });
    expect(channelsOf(read!)).toEqual(["approver", "operator", "console"]);
  });

  it("reports a value that is not an approval for its key as internal, never as an approval", async () => {
    const store = createRedisApprovalStore(replicas.a, { prefix });
    const made = approval();
    await store.create(made);
    const key = `${prefix}{acme}:approval:${made.approvalId}`;
    const record = JSON.parse((await replicas.a.hget(key, "record"))!) as Record<string, unknown>;
    const corrupt: Array<[string, string]> = [
      ["record", "not json {"],
      ["record", JSON.stringify({ ...record, call: { tenant: "globex", principal: "agent" } })],
      ["record", JSON.stringify({ ...record, approvalId: randomUUID() })],
      ["status", "approved-by-me"],
    ];
    for (const [field, value] of corrupt) {
      await replicas.a.del(key);
      await store.create(made);
      await replicas.a.hset(key, field, value);
      await expectChaosError(store.get("acme", made.approvalId), "internal", ["globex"]);
    }
  });
});
