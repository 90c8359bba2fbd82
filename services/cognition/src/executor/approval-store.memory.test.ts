import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { expectChaosError } from "../test-support/expect-error.js";
import { createMemoryApprovalStore, DEFAULT_MEMORY_MAX_APPROVALS_PER_TENANT } from "./approvals.js";
import type { PendingApproval } from "./step-types.js";
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
  const approval = (tenant = "acme"): PendingApproval => ({
    approvalId: randomUUID(),
    step: { id: "s1", capability: "test.echo", input: {} },
    capability: "test.echo",
    risk: "low",
    argsHash: "0".repeat(64),
    policyVersion: 1,
    matchedRule: "r",
    reason: "r",
    call: { tenant, principal: "agent", sessionId: "s" },
  });

  it("a tenant holding 10,000 approvals is refused more, and another tenant still gets its own", async () => {
    const store = createMemoryApprovalStore({ now });
    for (let i = 0; i < DEFAULT_MEMORY_MAX_APPROVALS_PER_TENANT; i++) await store.create(approval("acme"));
    const err = await expectChaosError(store.create(approval("acme")), "resource_exhausted");
    expect(err.message).toContain("tenant acme holds 10000 approvals");
    const theirs = approval("globex");
    await store.create(theirs);
    expect((await store.get("globex", theirs.approvalId))?.status).toBe("pending");
  });

  it("holds a bounded number of approvals per tenant, making room from expired ones first", async () => {
    let t = 0;
    const store = createMemoryApprovalStore({ maxApprovalsPerTenant: 2, ttlSeconds: 10, now: () => t });
    await store.create(approval());
    await store.create(approval());
    await expectChaosError(store.create(approval()), "resource_exhausted");
    t += 10_000;
    await store.create(approval());
    expect(store.pending()).toHaveLength(1);
  });

  it("refuses beyond the process-wide safety net without touching any tenant's approvals", async () => {
    const store = createMemoryApprovalStore({ maxApprovals: 3, now });
    const kept = [approval("acme"), approval("acme"), approval("globex")];
    for (const a of kept) await store.create(a);
    const err = await expectChaosError(store.create(approval("initech")), "resource_exhausted");
    expect(err.message).toContain("3 approvals");
    for (const a of kept) expect(await store.get(a.call.tenant, a.approvalId)).toBeDefined();
  });
});
