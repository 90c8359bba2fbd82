/**
 * Cognition on the real ledger: every executor decision and outcome lands in the tenant's
 * audit chain (a read-only step's both in one entry), an approval becomes a signed receipt, and
 * the approved step runs only when the ledger authorizes that receipt — exactly once, however
 * many resumes race. Real policy and memory services and a real ledger on Postgres and Redis; no
 * fakes.
 */
import { createInProcessClient, createLogger, type CallContext, type ServiceClient } from "@chaos-core/kit";
import { ApprovalChannel, CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { allEvents } from "../../../ledger/src/test-support/flows.js";
import { createLedgerFixture, type LedgerFixture } from "../../../ledger/src/test-support/ledger-fixture.js";
import { defineCapability } from "../capabilities/capability.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { createCognitionHandlers, type CognitionDeps } from "../handlers/cognition-handlers.js";
import { createMemoryPlanStore } from "../plans/memory-plan-store.js";
import { HeuristicProvider } from "../providers/heuristic.js";
import { createMemoryApprovalStore } from "./approvals.js";
import { createLedgerAuditSink, createLedgerStepReceipts } from "./ledger.js";

let services: RealServices;
let ledger: LedgerFixture;
let client: ServiceClient<typeof CognitionService>;
let runs: unknown[] = [];
/** When set, each handler notes the event types its tenant's ledger held as it started. */
let peek: ((tenant: string) => Promise<string[]>) | undefined;
let ledgerAtRun: string[][] = [];

async function started(input: unknown, tenant: string): Promise<void> {
  runs.push(input);
  if (peek) ledgerAtRun.push(await peek(tenant));
}

// A read with no side effect (read-only, closed world): decision and outcome in one entry.
const echo = defineCapability({
  name: "test.echo",
  description: "Echoes its text.",
  risk: "medium",
  inputSchema: z.object({ text: z.string().min(1) }),
  outputSchema: z.object({ echo: z.string() }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler(input, ctx) {
    await started(input, ctx.call.tenant);
    return { echo: input.text };
  },
});

// A step with an effect: its decision is durable before the handler starts.
const note = defineCapability({
  name: "test.note",
  description: "Notes its text somewhere.",
  risk: "medium",
  inputSchema: z.object({ text: z.string().min(1) }),
  outputSchema: z.object({ noted: z.string() }),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler(input, ctx) {
    await started(input, ctx.call.tenant);
    return { noted: input.text };
  },
});

function depsOn(ledgerClient: LedgerFixture["client"]): CognitionDeps {
  return {
    registry: createCapabilityRegistry([echo, note]),
    provider: new HeuristicProvider(),
    policy: services.policy,
    memory: services.memory,
    plans: createMemoryPlanStore(),
    audit: createLedgerAuditSink(ledgerClient),
    receipts: createLedgerStepReceipts(ledgerClient),
    approvals: createMemoryApprovalStore(),
    logger: createLogger("cognition-ledger-test", "silent"),
    stepTimeoutMs: 5_000,
  };
}

beforeAll(async () => {
  services = await startRealServices("chaoscore_cognition_ledger");
  ledger = await createLedgerFixture({ name: "chaoscore_cognition_ledger_log" });
  client = createInProcessClient(CognitionService, createCognitionHandlers(depsOn(ledger.client)));
});

afterAll(async () => {
  await ledger?.close();
  await services?.close();
});

let n = 0;
const freshTenant = () => `cogledger-${process.pid}-${++n}`;
const as = (tenant: string, principal = "agent", sessionId = "session-a"): { ctx: CallContext } => ({ ctx: { tenant, principal, sessionId } });
const STEP = { id: "s1", capability: "test.echo", input: { text: "ship it" } };
const NOTE = { id: "s1", capability: "test.note", input: { text: "ship it" } };
const types = async (tenant: string) => (await allEvents(ledger.client, as(tenant))).map((e) => String(e.type));

async function pendingApproval(tenant: string): Promise<string> {
  await services.putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
  const res = await client.execute({ target: { case: "steps", value: { steps: [STEP] } } }, as(tenant));
  expect(res.results[0]?.status).toBe("pending_approval");
  return res.results[0]!.approval!.approvalId;
}

describe("cognition with the ledger", () => {
  it("records a step with an effect as its decision, durable before the handler starts, then its outcome; the chain verifies", async () => {
    const tenant = freshTenant();
    await services.putPolicy(tenant, {});
    runs = [];
    ledgerAtRun = [];
    peek = types;
    try {
      const res = await client.execute({ target: { case: "steps", value: { steps: [NOTE] } } }, as(tenant));
      expect(res.results[0]?.status).toBe("executed");
    } finally {
      peek = undefined;
    }
    expect(ledgerAtRun).toEqual([["step.decision"]]);
    const events = await allEvents(ledger.client, as(tenant));
    expect(events.map((e) => e.type)).toEqual(["step.decision", "step.outcome"]);
    expect(events[0]).toMatchObject({ capability: "test.note", verdict: { decision: "ALLOW" } });
    expect(events[1]).toMatchObject({ capability: "test.note", status: "executed", ran: true, succeeded: true });
    const chain = await ledger.client.verifyChain({}, as(tenant));
    expect(chain).toMatchObject({ ok: true, entries: 2n });
  });

  it("records a read-only step in one entry carrying both the decision and the outcome, durable before the result; the chain verifies", async () => {
    const tenant = freshTenant();
    const version = await services.putPolicy(tenant, {});
    runs = [];
    ledgerAtRun = [];
    peek = types;
    try {
      const res = await client.execute({ target: { case: "steps", value: { steps: [STEP] } } }, as(tenant));
      expect(res.results[0]).toMatchObject({ status: "executed", ran: true });
    } finally {
      peek = undefined;
    }
    // Nothing was recorded before the read; the one entry was durable when the answer came back.
    expect(ledgerAtRun).toEqual([[]]);
    const { entries } = await ledger.client.listEntries({ afterSeq: 0n, limit: 10 }, as(tenant));
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ tenant, principal: "agent", session: "session-a" });
    expect(entries[0]?.event).toMatchObject({
      type: "step.read",
      stepId: "s1",
      capability: "test.echo",
      risk: "medium",
      argsHash: expect.stringMatching(/^[0-9a-f]{64}$/) as string,
      verdict: { decision: "ALLOW", matchedRule: "default", policyVersion: version },
      status: "executed",
      ran: true,
      succeeded: true,
    });
    const chain = await ledger.client.verifyChain({}, as(tenant));
    expect(chain).toMatchObject({ ok: true, entries: 1n });
  });

  it("records a denied read-only step as decision and outcome, and never runs it", async () => {
    const tenant = freshTenant();
    await services.putPolicy(tenant, { deniedCapabilities: ["test.echo"] });
    runs = [];
    const res = await client.execute({ target: { case: "steps", value: { steps: [STEP] } } }, as(tenant));
    expect(res.results[0]).toMatchObject({ status: "denied", ran: false });
    expect(runs).toEqual([]);
    const events = await allEvents(ledger.client, as(tenant));
    expect(events.map((e) => e.type)).toEqual(["step.decision", "step.outcome"]);
    expect(events[0]).toMatchObject({ capability: "test.echo", verdict: { decision: "DENY", matchedRule: "deniedCapabilities" } });
    expect(events[1]).toMatchObject({ capability: "test.echo", status: "denied", ran: false });
  });

  it("runs an approved step on its receipt exactly once, of 20 concurrent resumes", async () => {
    const tenant = freshTenant();
    const approvalId = await pendingApproval(tenant);
    await client.resolveApproval({ approvalId, approve: true, channel: ApprovalChannel.APPROVER }, as(tenant, "alice", "admin-1"));
    runs = [];
    const resumes = await Promise.all(
      Array.from({ length: 20 }, () => client.execute({ target: { case: "approvalId", value: approvalId } }, as(tenant))),
    );
    const statuses = resumes.map((r) => r.results[0]?.status);
    expect(statuses.filter((s) => s === "executed")).toHaveLength(1);
    expect(runs).toHaveLength(1);
    const events = await allEvents(ledger.client, as(tenant));
    const issued = events.filter((e) => e.type === "receipt.issued");
    expect(issued).toHaveLength(1);
    expect(issued[0]).toMatchObject({ tool: "test.echo", resource: tenant, actor: "alice", requester: "agent", decision: "allow", risk: "medium" });
    // The one resume that reached the ledger was authorized; the rest were stopped before (the
    // approval store) or by the ledger as a replay — never run twice.
    const authorizations = events.filter((e) => e.type === "authorization.decided");
    expect(authorizations.filter((e) => e.code === "AUTHORIZED")).toHaveLength(1);
    expect(authorizations.filter((e) => e.code !== "AUTHORIZED").every((e) => e.code === "replayed_receipt")).toBe(true);
  });

  it("names the channel in the ledger: operator and console receipts run once; a refused channel is an entry too", async () => {
    for (const [channel, principal, actor] of [
      [ApprovalChannel.OPERATOR, "operator", "operator"],
      [ApprovalChannel.CONSOLE, "alice", "console:alice"],
    ] as const) {
      const tenant = freshTenant();
      const approvalId = await pendingApproval(tenant);
      const answered = await client.resolveApproval({ approvalId, approve: true, channel }, as(tenant, principal, ""));
      const ran = await client.execute({ target: { case: "approvalId", value: approvalId } }, as(tenant));
      expect(ran.results[0]?.status).toBe("executed");
      const events = await allEvents(ledger.client, as(tenant));
      const name = channel === ApprovalChannel.OPERATOR ? "operator" : "console";
      expect(events.find((e) => e.type === "approval.resolution")).toMatchObject({ approvalId, channel: name, principal, approved: true });
      // The answer names the entry that records it (what the console's result page shows).
      const { entries } = await ledger.client.listEntries({ afterSeq: answered.ledgerSeq - 1n, limit: 1 }, as(tenant));
      expect(entries[0]?.seq).toBe(answered.ledgerSeq);
      expect(entries[0]?.event).toMatchObject({ type: "approval.resolution", approvalId, channel: name });
      expect(events.find((e) => e.type === "receipt.issued")).toMatchObject({ channel: name, actor, requester: "agent" });
    }

    const tenant = freshTenant();
    await services.putPolicy(tenant, {
      requireConfirmationFor: ["test.echo"],
      approvalChannels: { capabilities: { "test.echo": { channels: ["APPROVAL_CHANNEL_OPERATOR"] } } },
    });
    const res = await client.execute({ target: { case: "steps", value: { steps: [STEP] } } }, as(tenant));
    const approvalId = res.results[0]!.approval!.approvalId;
    await expect(client.resolveApproval({ approvalId, approve: true, channel: ApprovalChannel.ELICITATION }, as(tenant))).rejects.toMatchObject({
      code: "permission_denied",
    });
    const events = await allEvents(ledger.client, as(tenant));
    expect(events.at(-1)).toMatchObject({ type: "approval.refused", approvalId, channel: "client_elicitation", code: "channel_not_allowed", allowed: ["operator"] });
    expect(events.some((e) => e.type === "receipt.issued")).toBe(false);
  });

  it("refuses to issue a receipt for an approver approving their own step", async () => {
    const tenant = freshTenant();
    const approvalId = await pendingApproval(tenant);
    await expect(
      client.resolveApproval({ approvalId, approve: true, channel: ApprovalChannel.APPROVER }, as(tenant, "agent", "admin-1")),
    ).rejects.toMatchObject({ code: "permission_denied" });
  });

  it("fails closed when the ledger cannot be written: a step with an effect never runs, a read-only step's result is withheld", async () => {
    const broken = await createLedgerFixture({ name: "chaoscore_cognition_ledger_down" });
    const brokenClient = createInProcessClient(CognitionService, createCognitionHandlers(depsOn(broken.client)));
    const tenant = freshTenant();
    await services.putPolicy(tenant, {});
    // The ledger's database goes away under the running service.
    await broken.db.close();
    try {
      runs = [];
      const effect = await brokenClient.execute({ target: { case: "steps", value: { steps: [NOTE] } } }, as(tenant));
      expect(effect.results[0]).toMatchObject({ status: "failed", ran: false, errorCode: "unavailable" });
      expect(runs).toHaveLength(0);

      // The read ran (it changed nothing), but its single entry could not be written: the call
      // fails and what it read is not returned.
      runs = [];
      const read = await brokenClient.execute({ target: { case: "steps", value: { steps: [STEP] } } }, as(tenant));
      expect(read.results[0]).toMatchObject({ status: "failed", ran: true, errorCode: "unavailable" });
      expect(read.results[0]?.errorMessage).toMatch(/^the audit log could not record the read-only step/);
      expect(read.results[0]?.output).toBeUndefined();
      expect(runs).toHaveLength(1);
    } finally {
      await broken.database.drop();
      broken.redis?.disconnect();
    }
  });
});
