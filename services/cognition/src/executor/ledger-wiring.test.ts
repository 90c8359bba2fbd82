/**
 * Cognition on the real ledger: every executor decision and outcome lands in the tenant's
 * audit chain, an approval becomes a signed receipt, and the approved step runs only when the
 * ledger authorizes that receipt — exactly once, however many resumes race. Real policy and
 * memory services and a real ledger on Postgres and Redis; no fakes.
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

const echo = defineCapability({
  name: "test.echo",
  description: "Echoes its text.",
  risk: "medium",
  inputSchema: z.object({ text: z.string().min(1) }),
  outputSchema: z.object({ echo: z.string() }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  handler(input) {
    runs.push(input);
    return Promise.resolve({ echo: input.text });
  },
});

function depsOn(ledgerClient: LedgerFixture["client"]): CognitionDeps {
  return {
    registry: createCapabilityRegistry([echo]),
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

async function pendingApproval(tenant: string): Promise<string> {
  await services.putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
  const res = await client.execute({ target: { case: "steps", value: { steps: [STEP] } } }, as(tenant));
  expect(res.results[0]?.status).toBe("pending_approval");
  return res.results[0]!.approval!.approvalId;
}

describe("cognition with the ledger", () => {
  it("records every decision and outcome in the tenant's chain, which verifies", async () => {
    const tenant = freshTenant();
    await services.putPolicy(tenant, {});
    runs = [];
    const res = await client.execute({ target: { case: "steps", value: { steps: [STEP] } } }, as(tenant));
    expect(res.results[0]?.status).toBe("executed");
    const events = await allEvents(ledger.client, as(tenant));
    expect(events.map((e) => e.type)).toEqual(["step.decision", "step.outcome"]);
    expect(events[0]).toMatchObject({ capability: "test.echo", verdict: { decision: "ALLOW" } });
    expect(events[1]).toMatchObject({ capability: "test.echo", status: "executed", ran: true, succeeded: true });
    const chain = await ledger.client.verifyChain({}, as(tenant));
    expect(chain).toMatchObject({ ok: true, entries: 2n });
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

  it("fails closed when the ledger cannot be written: nothing runs", async () => {
    const broken = await createLedgerFixture({ name: "chaoscore_cognition_ledger_down" });
    const brokenClient = createInProcessClient(CognitionService, createCognitionHandlers(depsOn(broken.client)));
    const tenant = freshTenant();
    await services.putPolicy(tenant, {});
    // The ledger's database goes away under the running service.
    await broken.db.close();
    runs = [];
    const res = await brokenClient.execute({ target: { case: "steps", value: { steps: [STEP] } } }, as(tenant));
    expect(res.results[0]?.status).toBe("failed");
    expect(res.results[0]?.ran).toBe(false);
    expect(runs).toHaveLength(0);
    await broken.database.drop();
    broken.redis?.disconnect();
  });
});
