import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { expectChaosError } from "../test-support/expect-error.js";
import { createMemoryApprovalStore, type PendingApproval } from "./approvals.js";
import { describeApprovalStoreContract } from "./approval-store.contract.js";

let nowMs = Date.parse("2030-01-01T00:00:00Z");
const now = () => nowMs;

describeApprovalStoreContract("in-process", {
  makeStore: (ttlSeconds) => createMemoryApprovalStore({ now, ...(ttlSeconds !== undefined ? { ttlSeconds } : {}) }),
  elapse: (ms) => {
    nowMs += ms;
    return Promise.resolve();
  },
});

describe("in-process approval store", () => {
  const approval = (): PendingApproval => ({
    approvalId: randomUUID(),
    step: { id: "s1", capability: "test.echo", input: {} },
    capability: "test.echo",
    risk: "low",
    argsHash: "0".repeat(64),
    policyVersion: 1,
    matchedRule: "r",
    reason: "r",
    call: { tenant: "acme", principal: "agent", sessionId: "s" },
  });

  it("holds a bounded number of approvals, making room from expired ones first", async () => {
    let t = 0;
    const store = createMemoryApprovalStore({ maxApprovals: 2, ttlSeconds: 10, now: () => t });
    await store.create(approval());
    await store.create(approval());
    await expectChaosError(store.create(approval()), "resource_exhausted");
    t += 10_000;
    await store.create(approval());
    expect(store.pending()).toHaveLength(1);
  });
});
