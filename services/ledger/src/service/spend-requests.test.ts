/**
 * Spend requests through LedgerService on real Postgres and Redis: a spend held for a person is
 * stored with every argument, whoever approves it the requester collects the approval (once,
 * nobody else), a declined request never runs, and the finance call itself picks an approval
 * up — so the loop closes whichever way a person answered.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLedgerFixture, type LedgerFixture } from "../test-support/ledger-fixture.js";
import { allEvents, as, committedInDb, eventAt, failure } from "../test-support/flows.js";

const AGENT = "agent@acme";
const OTHER_AGENT = "other-agent@acme";
const ALICE = "alice";

let tenantCounter = 0;
const newTenant = (): string => `req${++tenantCounter}`;

let fx: LedgerFixture;
let admin: pg.Client;

beforeAll(async () => {
  fx = await createLedgerFixture({ name: "chaoscore_ledger_requests" });
  admin = new pg.Client({ connectionString: fx.database.url });
  await admin.connect();
});

afterAll(async () => {
  await admin?.end();
  await fx?.close();
});

const wire = { beneficiary: "ACME Supplies GmbH", amount: 1200, currency: "EUR", memo: "invoice 42, pay before Friday", confidence: 0.9 };


/** A wire the agent asked for, held for a person; its request_seq. */
async function heldWire(tenant: string, args: JsonObject = wire, principal = AGENT, session = "sess-1"): Promise<bigint> {
  const r = await fx.client.requestAuthorization({ tool: "wire_treasury_transfer", arguments: args }, as(tenant, principal, session));
  expect(r.status).toBe("HITL_REQUIRED");
  return r.ledgerSeq;
}


describe("a spend held for a person is stored with every argument", () => {
  it("lists the wire with its beneficiary and memo, hash-checked against the request entry; another tenant sees none of it", async () => {
    const tenant = newTenant();
    const seq = await heldWire(tenant);
    const listed = await fx.client.listSpendRequests({}, as(tenant, ALICE));
    expect(listed.requests).toHaveLength(1);
    const request = listed.requests[0]!;
    expect(request).toMatchObject({
      requestSeq: seq,
      kind: "finance",
      policy: "wire",
      policyVersion: "wire-1",
      tool: "wire_treasury_transfer",
      arguments: wire,
      action: { action: "WIRE", asset: "EUR", notional: 1200, confidence: 0.9 },
      requestedBy: AGENT,
      requestedInSession: "sess-1",
      state: "PENDING",
      argumentsVerified: true,
      gate: { state: "HITL_REQUIRED", reason: "human approval required: 1200.0 >= HITL threshold 0.0" },
    });
    // The entry records only the hash of the arguments; the stored ones hash to it.
    const entry = await eventAt(fx.client, as(tenant, ALICE), seq);
    expect(entry).toMatchObject({ type: "reference.requested", args_hash: request.argsHash });
    expect(JSON.stringify(entry)).not.toContain("ACME Supplies");
    expect(Date.parse(request.expiresAt) - Date.parse(request.createdAt)).toBe(24 * 3600 * 1000);
    expect((await fx.client.getSpendRequest({ requestSeq: seq }, as(tenant, AGENT))).request).toMatchObject({ arguments: wire, state: "PENDING" });

    const other = newTenant();
    expect((await fx.client.listSpendRequests({}, as(other, ALICE))).requests).toEqual([]);
    expect((await failure(fx.client.getSpendRequest({ requestSeq: seq }, as(other, ALICE)))).code).toBe("not_found");
    expect((await failure(fx.client.approveSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(other, ALICE)))).code).toBe("not_found");
  });

  it("a plain spend is stored with its action; LOCKED and BLOCKED evaluations store nothing", async () => {
    const tenant = newTenant();
    const held = await fx.client.evaluateSpendGate({ policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } }, as(tenant, AGENT));
    await fx.client.evaluateSpendGate({ policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 100, confidence: 0.9 } }, as(tenant, AGENT));
    await fx.client.evaluateSpendGate({ policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 900, confidence: 0.9 } }, as(tenant, AGENT));
    const listed = (await fx.client.listSpendRequests({}, as(tenant, ALICE))).requests;
    expect(listed.map((r) => r.requestSeq)).toEqual([held.ledgerSeq]);
    expect(listed[0]).toMatchObject({ kind: "spend", tool: "", arguments: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 }, argumentsVerified: true });
  });

  it("arguments changed behind the ledger's back are not offered: arguments_verified false, approval refused and recorded", async () => {
    const tenant = newTenant();
    const seq = await heldWire(tenant);
    await admin.query("ALTER TABLE ledger.spend_requests DISABLE TRIGGER spend_requests_append_only");
    try {
      await admin.query(
        `UPDATE ledger.spend_requests SET arguments = $3::json WHERE tenant_id = $1 AND request_seq = $2`,
        [tenant, seq, JSON.stringify({ ...wire, beneficiary: "Mallory Ltd" })],
      );
    } finally {
      await admin.query("ALTER TABLE ledger.spend_requests ENABLE TRIGGER spend_requests_append_only");
    }
    const request = (await fx.client.getSpendRequest({ requestSeq: seq }, as(tenant, ALICE))).request!;
    expect(request).toMatchObject({ argumentsVerified: false, arguments: { beneficiary: "Mallory Ltd" } });
    const refused = await failure(fx.client.approveSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, ALICE)));
    expect(refused.message).toMatch(/^arguments_mismatch: /);
    expect((await allEvents(fx.client, as(tenant, ALICE))).at(-1)).toMatchObject({ type: "spend.approval_refused", code: "arguments_mismatch" });
  });
});

describe("whoever approves, the requester collects", () => {
  it("an approver's approval is receipt_pending; the requester collects the receipt once; nobody else can", async () => {
    const tenant = newTenant();
    const seq = await heldWire(tenant);
    const approved = await fx.client.approveSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, ALICE));
    expect(approved).toMatchObject({ state: "LOCKED", receiptPending: true, channel: "approver", requester: AGENT });
    expect(approved.receipt).toBeUndefined();
    expect(await eventAt(fx.client, as(tenant, ALICE), approved.ledgerSeq)).toMatchObject({
      type: "spend.approved",
      approver: ALICE,
      approved_via: "approver_role",
      channel: "approver",
      requester: AGENT,
      tool: "wire_treasury_transfer",
      receipt_pending: true,
    });
    expect((await fx.client.getSpendRequest({ requestSeq: seq }, as(tenant, AGENT))).request).toMatchObject({
      state: "APPROVED",
      answeredBy: ALICE,
      answerChannel: "approver",
      answerSeq: approved.ledgerSeq,
    });
    expect((await fx.client.listSpendRequests({}, as(tenant, ALICE))).requests).toEqual([]);

    const byApprover = await failure(fx.client.collectSpendApproval({ requestSeq: seq }, as(tenant, ALICE)));
    expect(byApprover.code).toBe("permission_denied");
    expect(byApprover.message).toMatch(/^not_requester: /);
    const byOther = await failure(fx.client.collectSpendApproval({ requestSeq: seq }, as(tenant, OTHER_AGENT)));
    expect(byOther.message).toMatch(/^not_requester: /);

    const collected = await fx.client.collectSpendApproval({ requestSeq: seq, ttlSeconds: 60 }, as(tenant, AGENT, "sess-2"));
    expect(collected).toMatchObject({ state: "LOCKED", approvedBy: ALICE, channel: "approver", approvalSeq: approved.ledgerSeq });
    expect(collected.result).toMatchObject({ reason: `human-approved by ${ALICE}` });
    // Signed now, for the recorded approver, bound to the exact call.
    expect(collected.receipt).toMatchObject({ kind: "authorization", actor: ALICE, tool: "wire_treasury_transfer", resource: "treasury:wire", policy_version: "wire-1" });
    expect(Date.parse(collected.receipt!.expiry as string) - Date.parse(collected.receipt!.issued_at as string)).toBe(60_000);
    expect(await eventAt(fx.client, as(tenant, AGENT), collected.ledgerSeq)).toMatchObject({
      type: "spend.collected",
      request_seq: Number(seq),
      approval_seq: Number(approved.ledgerSeq),
      approver: ALICE,
      receipt_nonce: collected.receipt!.nonce,
    });

    const twice = await failure(fx.client.collectSpendApproval({ requestSeq: seq }, as(tenant, AGENT)));
    expect(twice.code).toBe("failed_precondition");
    expect(twice.message).toMatch(/^already_collected: /);
    const ran = await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire, receipt: collected.receipt! }, as(tenant, AGENT));
    expect(ran).toMatchObject({ executed: true, code: "EXECUTED" });
    const refusals = (await allEvents(fx.client, as(tenant, AGENT))).filter((e) => e.type === "spend.collect_refused").map((e) => e.code);
    expect(refusals).toEqual(["not_requester", "not_requester", "already_collected"]);
  });

  it("the operator and the console are recorded as such; approved_via operator is the operator's only", async () => {
    const tenant = newTenant();
    const first = await heldWire(tenant);
    const notOperator = await failure(fx.client.approveSpend({ requestSeq: first, approvedVia: "operator" }, as(tenant, ALICE)));
    expect(notOperator.message).toMatch(/^not_operator: /);
    const byOperator = await fx.client.approveSpend({ requestSeq: first, approvedVia: "operator" }, as(tenant, "operator"));
    expect(byOperator).toMatchObject({ receiptPending: true, channel: "operator" });
    expect(byOperator.result).toMatchObject({ reason: "human-approved by operator" });

    const second = await heldWire(tenant, { ...wire, amount: 10 });
    const byConsole = await fx.client.approveSpend({ requestSeq: second, approvedVia: "console" }, as(tenant, ALICE));
    expect(await eventAt(fx.client, as(tenant, ALICE), byConsole.ledgerSeq)).toMatchObject({ approver: `console:${ALICE}`, channel: "console" });
    const selfConsole = await heldWire(tenant, { ...wire, amount: 11 }, ALICE);
    expect((await failure(fx.client.approveSpend({ requestSeq: selfConsole, approvedVia: "console" }, as(tenant, ALICE)))).message).toMatch(/^self_approval: /);
    expect((await failure(fx.client.approveSpend({ requestSeq: second, approvedVia: "telepathy" }, as(tenant, ALICE)))).code).toBe("invalid_argument");

    const collected = await fx.client.collectSpendApproval({ requestSeq: second }, as(tenant, AGENT));
    expect(collected).toMatchObject({ approvedBy: `console:${ALICE}`, channel: "console" });
    expect(collected.receipt).toMatchObject({ actor: `console:${ALICE}` });
  });

  it("an answer from the requesting session (elicitation) is collected at once: the receipt comes back, a later collect is already_collected", async () => {
    const tenant = newTenant();
    // The client's own form counts for a wire only with the operator's opt-in.
    await fx.putPolicy(tenant, { approvalChannels: { spend: { policies: { wire: ["client_elicitation", "approver", "operator", "console"] } } } });
    const seq = await heldWire(tenant);
    const approved = await fx.client.approveSpend({ requestSeq: seq, approvedVia: "elicitation", ttlSeconds: 90 }, as(tenant, AGENT, "sess-1"));
    expect(approved).toMatchObject({ receiptPending: false, channel: "client_elicitation" });
    expect(approved.receipt).toMatchObject({ actor: `elicitation:${AGENT}` });
    expect((await fx.client.getSpendRequest({ requestSeq: seq }, as(tenant, AGENT))).request?.state).toBe("COLLECTED");
    expect((await failure(fx.client.collectSpendApproval({ requestSeq: seq }, as(tenant, AGENT)))).message).toMatch(/^already_collected: /);
    // Nor does the finance call pick it up a second time: the same wire again is a new request for a person.
    const bare = await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT));
    expect(bare).toMatchObject({ executed: false, code: "missing_receipt", detailCode: "approval_pending" });
    expect(bare.approvalRequestSeq).toBeGreaterThan(seq);
  });

  it("a plain spend: the approval commits it, and the requester's collect says so once, with no receipt", async () => {
    const tenant = newTenant();
    const held = await fx.client.evaluateSpendGate({ policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } }, as(tenant, AGENT));
    expect((await failure(fx.client.collectSpendApproval({ requestSeq: held.ledgerSeq }, as(tenant, AGENT)))).message).toMatch(/^approval_pending: /);
    const approved = await fx.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "approver_role" }, as(tenant, ALICE));
    expect(approved).toMatchObject({ state: "LOCKED", receiptPending: true });
    expect(await committedInDb(admin, tenant, "equity")).toBe(300);
    const collected = await fx.client.collectSpendApproval({ requestSeq: held.ledgerSeq }, as(tenant, AGENT));
    expect(collected).toMatchObject({ state: "LOCKED", approvedBy: ALICE });
    expect(collected.receipt).toBeUndefined();
    expect(await committedInDb(admin, tenant, "equity")).toBe(300);
  });

  it("a spend policy that changed version since the approval is not collected: ask again", async () => {
    const tenant = newTenant();
    const seq = await heldWire(tenant);
    await fx.client.approveSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, ALICE));
    const changed = await fx.restart({
      policies: { tenants: { [tenant]: { spend_policies: { wire: { version: "wire-2", max_notional: 10_000, daily_cap: 25_000, hitl_threshold: 0, min_confidence: 0.7, allowed_actions: [], per_asset_limits: {} } } } } },
    });
    try {
      const refused = await failure(changed.client.collectSpendApproval({ requestSeq: seq }, as(tenant, AGENT)));
      expect(refused.message).toMatch(/^policy_version_mismatch: request \d+ was approved under spend policy wire version wire-1; it is now wire-2/);
      // The refusal collected nothing: under the old version again, the approval is still there.
      expect((await fx.client.collectSpendApproval({ requestSeq: seq }, as(tenant, AGENT))).receipt).toBeDefined();
    } finally {
      await changed.close();
    }
  });

  it("a request can be answered for 24 hours: after that approve, decline and collect are refused as request_expired", async () => {
    const tenant = newTenant();
    const seq = await heldWire(tenant);
    const approvedLate = await heldWire(tenant, { ...wire, amount: 5 });
    await fx.client.approveSpend({ requestSeq: approvedLate, approvedVia: "approver_role" }, as(tenant, ALICE));
    const later = await fx.restart({ now: () => new Date(Date.now() + 24 * 3600 * 1000 + 1000) });
    try {
      expect((await failure(later.client.approveSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, ALICE)))).message).toMatch(/^request_expired: /);
      expect((await failure(later.client.declineSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, ALICE)))).message).toMatch(/^request_expired: /);
      expect((await failure(later.client.collectSpendApproval({ requestSeq: approvedLate }, as(tenant, AGENT)))).message).toMatch(/^request_expired: /);
      expect((await later.client.getSpendRequest({ requestSeq: seq }, as(tenant, ALICE))).request?.state).toBe("EXPIRED");
      expect((await later.client.listSpendRequests({}, as(tenant, ALICE))).requests).toEqual([]);
    } finally {
      await later.close();
    }
  });
});

describe("a declined request never runs", () => {
  it("decline is the request's one answer: the finance call is approval_declined, collect declined, approve already_answered", async () => {
    const tenant = newTenant();
    const seq = await heldWire(tenant);
    expect((await failure(fx.client.declineSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, AGENT)))).message).toMatch(/^self_approval: /);
    const declined = await fx.client.declineSpend({ requestSeq: seq, approvedVia: "operator", reason: "unknown beneficiary" }, as(tenant, "operator"));
    expect(declined).toMatchObject({ declinedBy: "operator", channel: "operator" });
    expect(await eventAt(fx.client, as(tenant, AGENT), declined.ledgerSeq)).toMatchObject({
      type: "spend.declined",
      request_seq: Number(seq),
      declined_by: "operator",
      channel: "operator",
      requester: AGENT,
      reason: "unknown beneficiary",
    });
    expect((await fx.client.getSpendRequest({ requestSeq: seq }, as(tenant, AGENT))).request).toMatchObject({ state: "DECLINED", answeredBy: "operator", answerReason: "unknown beneficiary" });

    const run = await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT));
    expect(run).toMatchObject({ executed: false, code: "policy_deny", detailCode: "approval_declined", approvalRequestSeq: seq });
    expect(run.problem).toMatch(/declined by operator \(operator\): unknown beneficiary; it never runs/);
    expect(await eventAt(fx.client, as(tenant, AGENT), run.ledgerSeq)).toMatchObject({ type: "reference.executed", code: "approval_declined", authorized: false });
    expect((await failure(fx.client.collectSpendApproval({ requestSeq: seq }, as(tenant, AGENT)))).message).toMatch(/^declined: /);
    expect((await failure(fx.client.approveSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, ALICE)))).message).toMatch(/^already_answered: /);
    expect(await committedInDb(admin, tenant, "wire")).toBe(0);
  });
});

describe("the finance call picks up the approval", () => {
  it("while pending it is missing_receipt / approval_pending naming the request; request_authorization after approval hands over the receipt", async () => {
    const tenant = newTenant();
    const seq = await heldWire(tenant);
    const waiting = await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT));
    expect(waiting).toMatchObject({ executed: false, code: "missing_receipt", detailCode: "approval_pending", approvalRequestSeq: seq });
    await fx.client.approveSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, ALICE));
    // Another agent of the tenant asking for the same call gets no one else's approval.
    const stranger = await fx.client.requestAuthorization({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, OTHER_AGENT));
    expect(stranger).toMatchObject({ status: "HITL_REQUIRED", approvalRequestSeq: 0n });
    const again = await fx.client.requestAuthorization({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT));
    expect(again).toMatchObject({ status: "AUTHORIZED", code: "AUTHORIZED", approvalRequestSeq: seq });
    expect(again.receipt).toMatchObject({ actor: ALICE });
    expect(await eventAt(fx.client, as(tenant, AGENT), again.ledgerSeq)).toMatchObject({ type: "spend.collected", request_seq: Number(seq) });
    expect(await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire, receipt: again.receipt! }, as(tenant, AGENT))).toMatchObject({ executed: true });
  });

  it("a wire called directly, without a receipt or a request, is stored as one with every argument and runs once a person approves it", async () => {
    const tenant = newTenant();
    const direct = await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT, "sess-9"));
    expect(direct).toMatchObject({ executed: false, code: "missing_receipt", detailCode: "approval_pending" });
    expect(direct.problem).toMatch(/stored now: a person must approve this call/);
    const seq = direct.approvalRequestSeq;
    expect((await fx.client.getSpendRequest({ requestSeq: seq }, as(tenant, ALICE))).request).toMatchObject({
      kind: "finance",
      tool: "wire_treasury_transfer",
      arguments: wire,
      requestedBy: AGENT,
      requestedInSession: "sess-9",
      state: "PENDING",
      argumentsVerified: true,
    });
    // Calling again while it waits names the same request instead of storing another.
    expect((await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT))).approvalRequestSeq).toBe(seq);
    expect((await fx.client.listSpendRequests({}, as(tenant, ALICE))).requests).toHaveLength(1);
    await fx.client.approveSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, ALICE));
    expect(await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT))).toMatchObject({ executed: true, approvalRequestSeq: seq });
    // Under the approval threshold nothing is stored: a receipt from request_authorization is all it takes.
    const order = { symbol: "AAPL", side: "BUY", quantity: 1, notional: 100, confidence: 0.9 };
    expect(await fx.client.executeReferenceTool({ tool: "place_equity_order", arguments: order }, as(tenant, AGENT))).toMatchObject({
      code: "missing_receipt",
      detailCode: "allowlist_is_not_authorization",
      approvalRequestSeq: 0n,
    });
  });

  it("twenty concurrent calls without a receipt after one approval: exactly one runs, the day's total counts it once", async () => {
    const tenant = newTenant();
    const seq = await heldWire(tenant);
    await fx.client.approveSpend({ requestSeq: seq, approvedVia: "approver_role" }, as(tenant, ALICE));
    const results = await Promise.all(
      Array.from({ length: 20 }, () => fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT))),
    );
    const ran = results.filter((r) => r.executed);
    expect(ran).toHaveLength(1);
    expect(ran[0]).toMatchObject({ code: "EXECUTED", detailCode: "AUTHORIZED", approvalRequestSeq: seq });
    expect(ran[0]!.result).toMatchObject({ status: "sent", beneficiary: wire.beneficiary, amount: 1200 });
    for (const r of results.filter((x) => !x.executed)) {
      // Late arrivals either lost the race for the approval, or found it collected and asked a person anew.
      expect([`replay already_collected`, `missing_receipt approval_pending`]).toContain(`${r.code} ${r.detailCode}`);
    }
    expect(await committedInDb(admin, tenant, "wire")).toBe(1200);
    expect(await eventAt(fx.client, as(tenant, AGENT), ran[0]!.ledgerSeq)).toMatchObject({
      type: "reference.executed",
      authorized: true,
      approval_request_seq: Number(seq),
      approver: ALICE,
      receipt_actor: ALICE,
    });
    expect((await fx.client.getSpendRequest({ requestSeq: seq }, as(tenant, AGENT))).request).toMatchObject({ state: "COLLECTED", collectSeq: ran[0]!.ledgerSeq });
  });
});
