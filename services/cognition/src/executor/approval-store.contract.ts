import { randomUUID } from "node:crypto";
import type { CallContext } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { expectChaosError } from "../test-support/expect-error.js";
import type { ApprovalStore } from "./approvals.js";
import type { PendingApproval } from "./step-types.js";

/** What the contract needs from a backend. */
export interface ApprovalStoreHarness {
  /** A store on the backend under test, with this TTL (default: the store's). */
  makeStore(ttlSeconds?: number): ApprovalStore;
  /** Lets `ms` pass for the store: a fake clock in process, real time for Redis. */
  elapse(ms: number): Promise<void>;
}

const REQUESTER: CallContext = { tenant: "acme", principal: "agent", sessionId: "session-1" };

function pending(overrides: Partial<PendingApproval> = {}): PendingApproval {
  return {
    approvalId: randomUUID(),
    step: { id: "s1", capability: "test.echo", input: { text: "ship it" }, checks: [{ expect: { path: "echo", equals: "ship it" } }] },
    capability: "test.echo",
    risk: "high",
    argsHash: "a".repeat(64),
    policyVersion: 3,
    matchedRule: "requireConfirmationFor",
    reason: "needs a human",
    // The operator opted this capability in to the client's own answer, so every channel counts.
    channels: ["client_elicitation", "approver", "operator", "console"],
    channelsRule: "approvalChannels.capabilities.test.echo",
    call: { tenant: "acme", principal: "agent", sessionId: "session-1" },
    ...overrides,
  };
}

const elicited = { approve: true, channel: "client_elicitation" as const, by: REQUESTER };
const byApprover = (approve = true) => ({ approve, channel: "approver" as const, by: { tenant: "acme", principal: "alice", sessionId: "admin-1" } });

/** The behaviour every ApprovalStore has, whatever holds the approvals. */
export function describeApprovalStoreContract(name: string, harness: ApprovalStoreHarness): void {
  describe(`${name} approval store`, () => {
    it("gives back a created approval as pending, with its lifetime", async () => {
      const store = harness.makeStore();
      const approval = pending();
      const created = await store.create(approval);
      const read = await store.get("acme", approval.approvalId);
      expect(read).toMatchObject({ ...approval, status: "pending" });
      // create answers with the record as stored, its expiry included (the pending outcome records it).
      expect(created).toEqual(read);
      expect(read?.resolution).toBeUndefined();
      expect(Date.parse(read!.expiresAt) - Date.parse(read!.createdAt)).toBe(24 * 3600 * 1000);
    });

    it("keeps the rest of the approval's plan, step references and earlier outputs included", async () => {
      const store = harness.makeStore();
      const continuation = {
        planId: "plan-1",
        objective: "ship it, then say so",
        expiresAt: "2026-12-07T06:00:00.000Z",
        rest: [{ id: "s2", capability: "test.other", input: { text: { $step: "s0", path: "/echo" } } }],
        outputs: { s0: { echo: "earlier", nested: [1, { deep: null }] } },
        executed: ["test.echo"],
      };
      const approval = pending({ continuation });
      await store.create(approval);
      expect((await store.get("acme", approval.approvalId))?.continuation).toEqual(continuation);
      await store.resolve("acme", approval.approvalId, byApprover());
      expect((await store.consume("acme", approval.approvalId)).continuation).toEqual(continuation);
    });

    it("is tenant-bound: another tenant, an unknown id and a non-id are all not found", async () => {
      const store = harness.makeStore();
      const approval = pending();
      await store.create(approval);
      expect(await store.get("globex", approval.approvalId)).toBeUndefined();
      expect(await store.get("acme", randomUUID())).toBeUndefined();
      expect(await store.get("acme", "../../x")).toBeUndefined();
      const other = { tenant: "globex", principal: "mallory", sessionId: "session-1" };
      const a = await expectChaosError(store.resolve("globex", approval.approvalId, { approve: true, channel: "approver", by: other }), "not_found");
      const b = await expectChaosError(store.resolve("acme", randomUUID().replace(/./, "0"), byApprover()), "not_found");
      expect(a.message.replace(approval.approvalId, "")).toBe(b.message.replace(/[0-9a-f-]{36}/, ""));
      await expectChaosError(store.consume("globex", approval.approvalId), "not_found");
      expect((await store.get("acme", approval.approvalId))?.status).toBe("pending");
    });

    it("resolves once by elicitation from the requesting session, then consumes once", async () => {
      const store = harness.makeStore();
      const approval = pending();
      await store.create(approval);
      await expectChaosError(store.consume("acme", approval.approvalId), "failed_precondition");
      const resolved = await store.resolve("acme", approval.approvalId, elicited);
      expect(resolved).toMatchObject({
        status: "approved",
        resolution: { approved: true, channel: "client_elicitation", resolvedBy: "human via elicitation in session session-1", principal: "agent" },
      });
      await expectChaosError(store.resolve("acme", approval.approvalId, elicited), "failed_precondition");
      await expectChaosError(store.resolve("acme", approval.approvalId, byApprover(false)), "failed_precondition");
      expect(await store.get("acme", approval.approvalId)).toMatchObject({ status: "approved", resolution: resolved.resolution });
      const consumed = await store.consume("acme", approval.approvalId);
      expect(consumed.status).toBe("consumed");
      const again = await expectChaosError(store.consume("acme", approval.approvalId), "failed_precondition");
      expect(again.message).toMatch(/already used/);
      expect(await store.get("acme", approval.approvalId)).toMatchObject({ status: "consumed", resolution: { approved: true } });
    });

    it("keeps the channels policy chose, and refuses an answer through any other", async () => {
      const store = harness.makeStore();
      const approval = pending({ channels: ["approver", "console"], channelsRule: "approvalChannels.byRisk.high" });
      await store.create(approval);
      expect(await store.get("acme", approval.approvalId)).toMatchObject({ channels: ["approver", "console"], channelsRule: "approvalChannels.byRisk.high" });
      const elicitedAnswer = await expectChaosError(store.resolve("acme", approval.approvalId, elicited), "permission_denied");
      expect(elicitedAnswer.message).toMatch(/^channel_not_allowed: policy accepts approver, console/);
      const operator = { approve: true, channel: "operator" as const, by: { tenant: "acme", principal: "operator" } };
      await expectChaosError(store.resolve("acme", approval.approvalId, operator), "permission_denied");
      expect((await store.get("acme", approval.approvalId))?.status).toBe("pending");
      expect(await store.resolve("acme", approval.approvalId, byApprover())).toMatchObject({ status: "approved", resolution: { channel: "approver" } });
    });

    it("treats an approval stored without channels as accepting approver, operator and console only", async () => {
      const store = harness.makeStore();
      const { channels: _c, channelsRule: _r, ...legacy } = pending();
      await store.create(legacy);
      const refused = await expectChaosError(store.resolve("acme", legacy.approvalId, elicited), "permission_denied");
      expect(refused.message).toMatch(/^channel_not_allowed: policy accepts approver, operator, console/);
      const resolved = await store.resolve("acme", legacy.approvalId, { approve: true, channel: "operator", by: { tenant: "acme", principal: "operator" } });
      expect(resolved.resolution).toMatchObject({ channel: "operator", resolvedBy: "operator (operator)", principal: "operator" });
    });

    it("takes an operator answer only from the principal operator", async () => {
      const store = harness.makeStore();
      const approval = pending();
      await store.create(approval);
      const asAlice = await expectChaosError(
        store.resolve("acme", approval.approvalId, { approve: true, channel: "operator", by: { tenant: "acme", principal: "alice" } }),
        "permission_denied",
      );
      expect(asAlice.message).toMatch(/^not_operator: /);
      expect((await store.get("acme", approval.approvalId))?.status).toBe("pending");
    });

    it("refuses an elicitation answer from another session, and a session-less one", async () => {
      const store = harness.makeStore();
      const approval = pending();
      await store.create(approval);
      await expectChaosError(store.resolve("acme", approval.approvalId, { ...elicited, by: { ...REQUESTER, sessionId: "session-2" } }), "permission_denied");
      await expectChaosError(store.resolve("acme", approval.approvalId, { ...elicited, by: { tenant: "acme", principal: "agent" } }), "permission_denied");
      expect((await store.get("acme", approval.approvalId))?.status).toBe("pending");
    });

    it("keeps an approval requested without a session for its principal: an elicitation answer only from that principal's own request", async () => {
      const store = harness.makeStore();
      const call = { tenant: "acme", principal: "agent", requestRef: "AAECAwQFBgcICQoLDA0ODw" };
      const approval = pending({ call });
      await store.create(approval);
      expect((await store.get("acme", approval.approvalId))?.call).toEqual(call);
      for (const by of [
        { tenant: "acme", principal: "bob", requestRef: "BBECAwQFBgcICQoLDA0ODw" },
        { tenant: "acme", principal: "agent", sessionId: "session-1" },
        { tenant: "acme", principal: "agent" },
      ]) {
        const err = await expectChaosError(store.resolve("acme", approval.approvalId, { ...elicited, by }), "permission_denied");
        expect(err.message).toMatch(/^not_requester: /);
      }
      expect((await store.get("acme", approval.approvalId))?.status).toBe("pending");
      const by = { tenant: "acme", principal: "agent", requestRef: "BBECAwQFBgcICQoLDA0ODw" };
      const resolved = await store.resolve("acme", approval.approvalId, { ...elicited, by });
      expect(resolved.resolution).toMatchObject({
        channel: "client_elicitation",
        resolvedBy: "human via elicitation in request BBECAwQFBgcICQoLDA0ODw",
        principal: "agent",
        requestRef: "BBECAwQFBgcICQoLDA0ODw",
      });
      expect(await store.get("acme", approval.approvalId)).toMatchObject({ status: "approved", resolution: resolved.resolution });
    });

    it("refuses self-approval, and records another principal's answer as the approver's", async () => {
      const store = harness.makeStore();
      const approval = pending();
      await store.create(approval);
      const self = await expectChaosError(
        store.resolve("acme", approval.approvalId, { approve: true, channel: "approver", by: { ...REQUESTER, sessionId: "other" } }),
        "permission_denied",
      );
      expect(self.message).toMatch(/self-approval/);
      const resolved = await store.resolve("acme", approval.approvalId, byApprover());
      expect(resolved).toMatchObject({ status: "approved", resolution: { channel: "approver", resolvedBy: "alice (approver)", principal: "alice" } });
    });

    it("keeps a rejection, which can never be consumed", async () => {
      const store = harness.makeStore();
      const approval = pending();
      await store.create(approval);
      const rejected = await store.resolve("acme", approval.approvalId, byApprover(false));
      expect(rejected).toMatchObject({ status: "rejected", resolution: { approved: false } });
      await expectChaosError(store.consume("acme", approval.approvalId), "failed_precondition");
      await expectChaosError(store.resolve("acme", approval.approvalId, byApprover(true)), "failed_precondition");
    });

    it("lets exactly one of many concurrent resolves, and of many concurrent consumes, win", async () => {
      const store = harness.makeStore();
      const approval = pending();
      await store.create(approval);
      const resolves = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => store.resolve("acme", approval.approvalId, byApprover(i % 2 === 0))),
      );
      expect(resolves.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      const winner = resolves.find((r) => r.status === "fulfilled")!;
      if (winner.value.status === "rejected") return;
      const consumes = await Promise.allSettled(Array.from({ length: 20 }, () => store.consume("acme", approval.approvalId)));
      expect(consumes.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    });

    it("forgets an approval after its TTL: it can then be neither answered nor used", async () => {
      const store = harness.makeStore(1);
      const unanswered = pending();
      const approved = pending();
      await store.create(unanswered);
      await store.create(approved);
      await store.resolve("acme", approved.approvalId, elicited);
      await harness.elapse(1_100);
      expect(await store.get("acme", unanswered.approvalId)).toBeUndefined();
      await expectChaosError(store.resolve("acme", unanswered.approvalId, elicited), "not_found");
      await expectChaosError(store.consume("acme", approved.approvalId), "not_found");
    });

    it("refuses an approval id that is not a UUID, or a TTL beyond a day", async () => {
      const store = harness.makeStore();
      await expectChaosError(store.create(pending({ approvalId: "acme:approval:x" })), "invalid_argument");
      expect(() => harness.makeStore(24 * 3600 + 1)).toThrow(/TTL/);
    });

    it("lists a tenant's pending approvals only, soonest to expire first, at most the limit", async () => {
      const store = harness.makeStore();
      // A tenant of this test alone: a shared backend may hold other tests' approvals.
      const tenant = `list-${randomUUID().slice(0, 8)}`;
      const made: PendingApproval[] = [];
      for (let n = 0; n < 4; n++) {
        const approval = pending({ call: { tenant, principal: "agent", sessionId: `s${n}` } });
        await store.create(approval);
        made.push(approval);
        await harness.elapse(5);
      }
      await store.create(pending({ call: { tenant: "globex", principal: "agent", sessionId: "s" } }));
      const listed = await store.listPending(tenant, 100);
      expect(listed.map((a) => a.approvalId)).toEqual(made.map((a) => a.approvalId));
      expect(listed[0]).toMatchObject({ ...made[0], status: "pending" });
      expect(Date.parse(listed[0]!.expiresAt)).toBeLessThan(Date.parse(listed[1]!.expiresAt));
      expect((await store.listPending(tenant, 2)).map((a) => a.approvalId)).toEqual(made.slice(0, 2).map((a) => a.approvalId));

      // Answered approvals leave the list; another tenant's never enter it.
      await store.resolve(tenant, made[0]!.approvalId, { approve: true, channel: "approver", by: { tenant, principal: "alice" } });
      await store.resolve(tenant, made[2]!.approvalId, { approve: false, channel: "approver", by: { tenant, principal: "alice" } });
      expect((await store.listPending(tenant, 100)).map((a) => a.approvalId)).toEqual([made[1]!.approvalId, made[3]!.approvalId]);
      expect(await store.listPending(`none-${randomUUID().slice(0, 8)}`, 100)).toEqual([]);
      await expectChaosError(store.listPending(tenant, 0), "invalid_argument");
      await expectChaosError(store.listPending(tenant, 501), "invalid_argument");
      await expectChaosError(store.listPending("Not A Tenant", 10), "invalid_argument");
    });

    it("drops expired approvals from the list", async () => {
      const store = harness.makeStore(1);
      const tenant = `list-${randomUUID().slice(0, 8)}`;
      const approval = pending({ call: { tenant, principal: "agent", sessionId: "s" } });
      await store.create(approval);
      expect((await store.listPending(tenant, 10)).map((a) => a.approvalId)).toEqual([approval.approvalId]);
      await harness.elapse(1_100);
      expect(await store.listPending(tenant, 10)).toEqual([]);
    });

    it("is not changed by later edits to the objects the caller passed or received", async () => {
      const store = harness.makeStore();
      const approval = pending();
      const input = approval.step.input as { text: string };
      await store.create(approval);
      input.text = "rm -rf";
      const read = await store.get("acme", approval.approvalId);
      (read!.step.input as { text: string }).text = "changed";
      expect((await store.get("acme", approval.approvalId))?.step.input).toEqual({ text: "ship it" });
    });
  });
}
