/**
 * The CHP spend gate and the finance reference tools through LedgerService on real Postgres and
 * Redis: limits are the operator's, the day's total comes from the ledger, an approval crosses
 * the HITL threshold once and never a hard rule, and a receipt executes exactly one call.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { ContextSigner, createGrpcClient } from "@chaos-core/kit";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLedgerFixture, type LedgerFixture } from "../test-support/ledger-fixture.js";
import { allEvents, as, committedInDb, eventAt, failure } from "../test-support/flows.js";

const AGENT = "agent@acme";
const APPROVER = "approver@acme";
const APPROVER2 = "cfo@acme";

let tenantCounter = 0;
const newTenant = (): string => `spend${++tenantCounter}`;

let fx: LedgerFixture;
let admin: pg.Client;

beforeAll(async () => {
  // The reference policies: no operator file.
  fx = await createLedgerFixture({ name: "chaoscore_ledger_spend" });
  admin = new pg.Client({ connectionString: fx.database.url });
  await admin.connect();
});

afterAll(async () => {
  await admin?.end();
  await fx?.close();
});

const buy = (notional: number, confidence: number | undefined = 0.8) => ({
  action: "BUY",
  asset: "AAPL",
  notional,
  ...(confidence === undefined ? {} : { confidence }),
});



describe("EvaluateSpendGate with the operator's reference policies", () => {
  it("LOCKED decisions commit to the day's total, read from the ledger, until the daily cap blocks; a restart keeps the total", async () => {
    const tenant = newTenant();
    const gate = (f: LedgerFixture, notional: number) => f.client.evaluateSpendGate({ policyName: "equity", action: buy(notional) }, as(tenant, AGENT));
    for (let i = 0; i < 10; i++) {
      const r = await gate(fx, 240);
      expect(r.state).toBe("LOCKED");
      expect(r.result).toMatchObject({ committed_today: 240 * i, committed_delta: 240, reason: "auto-approved under CHP thresholds" });
    }
    const blocked = await gate(fx, 240);
    expect(blocked.state).toBe("BLOCKED");
    expect(blocked.result).toMatchObject({ committed_today: 2400, committed_delta: 0, reason: "blocked: daily-cap", failed_rules: ["daily-cap"] });
    expect(await eventAt(fx.client, as(tenant, AGENT), blocked.ledgerSeq)).toMatchObject({
      type: "spend_gate.evaluated",
      state: "BLOCKED",
      reason_code: "policy_deny",
      policy: "equity",
      policy_version: "equity-1",
    });

    // New instances on the same database: the total is the ledger's, not the process's.
    const restarted = await fx.restart();
    try {
      const fits = await gate(restarted, 100);
      expect(fits.state).toBe("LOCKED");
      expect(fits.result).toMatchObject({ committed_today: 2400 });
      const over = await gate(restarted, 1);
      expect(over.state).toBe("BLOCKED");
      expect(over.result).toMatchObject({ committed_today: 2500 });
    } finally {
      await restarted.close();
    }
    // The stored total is the sum of the recorded LOCKED deltas.
    const events = await allEvents(fx.client, as(tenant, AGENT));
    const deltas = events.filter((e) => e.state === "LOCKED").reduce((s, e) => s + (e.committed_delta as number), 0);
    expect(deltas).toBe(2500);
    expect(await committedInDb(admin, tenant, "equity")).toBe(2500);
  });

  it("the agent cannot state its committed total or loosen a limit; a stricter policy applies and is named", async () => {
    const tenant = newTenant();
    const sneaky = await failure(
      fx.client.evaluateSpendGate({ policyName: "equity", action: buy(100), agentPolicy: { committed_today: 0 } }, as(tenant, AGENT)),
    );
    expect(sneaky.code).toBe("invalid_argument");

    const looser = await failure(
      fx.client.evaluateSpendGate({ policyName: "equity", action: buy(100), agentPolicy: { daily_cap: 1_000_000 } }, as(tenant, AGENT)),
    );
    expect(looser.code).toBe("policy_denied");
    expect(looser.message).toMatch(/daily_cap/);
    const anyAction = await failure(
      fx.client.evaluateSpendGate({ policyName: "equity", action: buy(100), agentPolicy: { allowed_actions: [] } }, as(tenant, AGENT)),
    );
    expect(anyAction.code).toBe("policy_denied");
    const refused = (await allEvents(fx.client, as(tenant, AGENT))).filter((e) => e.type === "spend_gate.refused");
    expect(refused).toHaveLength(2);
    expect(refused[0]).toMatchObject({ code: "agent_policy_looser", policy: "equity" });

    const stricter = await fx.client.evaluateSpendGate(
      { policyName: "equity", action: buy(150), agentPolicy: { max_notional: 100 } },
      as(tenant, AGENT),
    );
    expect(stricter.state).toBe("BLOCKED");
    expect(stricter.result).toMatchObject({ failed_rules: ["max-notional", "per-asset-cap"], reason: "blocked: per-asset-cap, max-notional" });
    const version = (stricter.result?.policy as JsonObject).version as string;
    expect(version).toMatch(/^equity-1\+agent-[0-9a-f]{12}$/);
    expect(await eventAt(fx.client, as(tenant, AGENT), stricter.ledgerSeq)).toMatchObject({ policy_version: version });

    const unknown = await failure(fx.client.evaluateSpendGate({ policyName: "crypto", action: buy(1) }, as(tenant, AGENT)));
    expect(unknown.code).toBe("not_found");
  });
});

describe("ApproveSpend", () => {
  it("HITL_REQUIRED → another principal approves → LOCKED and committed; the requester cannot; a second approval is refused; all recorded", async () => {
    const tenant = newTenant();
    const request = await fx.client.evaluateSpendGate({ policyName: "equity", action: buy(300, 0.9) }, as(tenant, AGENT, "sess-1"));
    expect(request.state).toBe("HITL_REQUIRED");
    expect(request.result).toMatchObject({ requires_human: true, reason: "human approval required: 300.0 >= HITL threshold 250.0", committed_delta: 0 });

    const self = await failure(fx.client.approveSpend({ requestSeq: request.ledgerSeq, approvedVia: "approver_role" }, as(tenant, AGENT)));
    expect(self.code).toBe("permission_denied");
    expect(self.message).toMatch(/^self_approval: /);
    // The requester's own client cannot answer either: policy allows no form for a spend by default.
    const ownForm = await failure(
      fx.client.approveSpend({ requestSeq: request.ledgerSeq, approvedVia: "elicitation" }, as(tenant, AGENT, "sess-1")),
    );
    expect(ownForm.message).toMatch(/^channel_not_allowed: /);

    const approved = await fx.client.approveSpend({ requestSeq: request.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER));
    expect(approved.state).toBe("LOCKED");
    expect(approved.result).toMatchObject({
      reason: `human-approved by ${APPROVER}`,
      claims: [{ rule: "human-approval", passed: true, detail: `approved by ${APPROVER}` }],
      committed_delta: 300,
    });
    expect(approved.receipt).toBeUndefined();
    expect(await eventAt(fx.client, as(tenant, APPROVER), approved.ledgerSeq)).toMatchObject({
      type: "spend.approved",
      request_seq: Number(request.ledgerSeq),
      approver: APPROVER,
      requester: AGENT,
      state: "LOCKED",
    });

    const twice = await failure(fx.client.approveSpend({ requestSeq: request.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER2)));
    expect(twice.code).toBe("failed_precondition");
    expect(twice.message).toMatch(/^already_answered: /);

    const next = await fx.client.evaluateSpendGate({ policyName: "equity", action: buy(10) }, as(tenant, AGENT));
    expect(next.result).toMatchObject({ committed_today: 300 });

    const refusals = (await allEvents(fx.client, as(tenant, AGENT))).filter((e) => e.type === "spend.approval_refused");
    expect(refusals.map((e) => e.code)).toEqual(["self_approval", "channel_not_allowed", "already_answered"]);
    expect(await committedInDb(admin, tenant, "equity")).toBe(310);
  });

  it("BLOCKED stays BLOCKED: an approval cannot cross the daily cap, and a BLOCKED request cannot be approved", async () => {
    const tenant = newTenant();
    const request = await fx.client.evaluateSpendGate({ policyName: "equity", action: buy(300, 0.9) }, as(tenant, AGENT));
    expect(request.state).toBe("HITL_REQUIRED");
    for (let i = 0; i < 10; i++) {
      expect((await fx.client.evaluateSpendGate({ policyName: "equity", action: buy(240) }, as(tenant, AGENT))).state).toBe("LOCKED");
    }
    const approved = await fx.client.approveSpend({ requestSeq: request.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER));
    expect(approved.state).toBe("BLOCKED");
    expect(approved.result).toMatchObject({ reason: `approval by ${APPROVER} rejected: blocked: daily-cap`, committed_delta: 0, committed_today: 2400 });
    expect(await committedInDb(admin, tenant, "equity")).toBe(2400);

    const blocked = await fx.client.evaluateSpendGate({ policyName: "equity", action: buy(600, 0.9) }, as(tenant, AGENT));
    expect(blocked.state).toBe("BLOCKED");
    const notWaiting = await failure(fx.client.approveSpend({ requestSeq: blocked.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER)));
    expect(notWaiting.code).toBe("failed_precondition");
    expect(notWaiting.message).toMatch(/^not_awaiting_approval: /);
    const events = await allEvents(fx.client, as(tenant, AGENT));
    expect(events.at(-1)).toMatchObject({ type: "spend.approval_refused", code: "not_awaiting_approval", request_seq: Number(blocked.ledgerSeq) });
  });
});

describe("approval channels: policy says which answers count", () => {
  const wire = { beneficiary: "ACME Supplies GmbH", amount: 1200, currency: "EUR", memo: "invoice 42", confidence: 0.9 };
  const ALL = ["client_elicitation", "approver", "operator", "console"];
  const heldWire = async (tenant: string, args: JsonObject = wire) => {
    const held = await fx.client.requestAuthorization({ tool: "wire_treasury_transfer", arguments: args }, as(tenant, AGENT, "sess-1"));
    expect(held.status).toBe("HITL_REQUIRED");
    return held;
  };

  it("by default the requesting client's own form neither approves nor declines a spend; each refusal is recorded with what policy allows, and a person still can", async () => {
    const tenant = newTenant();
    const held = await fx.client.evaluateSpendGate({ policyName: "equity", action: buy(300, 0.9) }, as(tenant, AGENT, "sess-1"));
    expect(held.approvalChannels).toEqual(["approver", "operator", "console"]);
    const stored = (await fx.client.getSpendRequest({ requestSeq: held.ledgerSeq }, as(tenant, AGENT))).request!;
    expect(stored).toMatchObject({ channels: ["approver", "operator", "console"], channelsRule: "approvalChannels.spend.default" });

    const approve = await failure(fx.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "elicitation" }, as(tenant, AGENT, "sess-1")));
    expect(approve.code).toBe("permission_denied");
    expect(approve.message).toMatch(
      /^channel_not_allowed: policy allows approver, operator, console for spend request \d+ \(spend policy equity\), by rule approvalChannels\.spend\.default, not client_elicitation/,
    );
    const decline = await failure(fx.client.declineSpend({ requestSeq: held.ledgerSeq, approvedVia: "elicitation" }, as(tenant, AGENT, "sess-1")));
    expect(decline.message).toMatch(/^channel_not_allowed: /);
    const refused = (await allEvents(fx.client, as(tenant, AGENT))).slice(-2);
    const recorded = { code: "channel_not_allowed", channel: "client_elicitation", allowed: ["approver", "operator", "console"], channels_rule: "approvalChannels.spend.default" };
    expect(refused).toMatchObject([
      { type: "spend.approval_refused", request_seq: Number(held.ledgerSeq), ...recorded },
      { type: "spend.decline_refused", request_seq: Number(held.ledgerSeq), ...recorded },
    ]);

    // Neither refusal answered the request: a person with a credential of their own still can.
    expect((await fx.client.getSpendRequest({ requestSeq: held.ledgerSeq }, as(tenant, AGENT))).request?.state).toBe("PENDING");
    const approved = await fx.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER));
    expect(await eventAt(fx.client, as(tenant, APPROVER), approved.ledgerSeq)).toMatchObject({
      type: "spend.approved",
      channel: "approver",
      channels_rule: "approvalChannels.spend.default",
    });
  });

  it("with the operator's opt-in for wire (spend.policies.wire) the client's form approves a wire, recorded as client_elicitation; the tool's own entry wins, and only the requesting session counts", async () => {
    const tenant = newTenant();
    await fx.putPolicy(tenant, { approvalChannels: { spend: { policies: { wire: ALL } } } });
    const held = await heldWire(tenant);
    expect(held.approvalChannels).toEqual(ALL);
    expect((await fx.client.getSpendRequest({ requestSeq: held.ledgerSeq }, as(tenant, AGENT))).request).toMatchObject({
      channels: ALL,
      channelsRule: "approvalChannels.spend.policies.wire",
    });
    const otherSession = await failure(fx.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "elicitation" }, as(tenant, AGENT, "sess-2")));
    expect(otherSession.message).toMatch(/^wrong_session: /);
    const approved = await fx.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "elicitation" }, as(tenant, AGENT, "sess-1"));
    expect(approved).toMatchObject({ state: "LOCKED", channel: "client_elicitation", receiptPending: false });
    expect(approved.receipt).toMatchObject({ actor: `elicitation:${AGENT}`, tool: "wire_treasury_transfer" });
    expect(await eventAt(fx.client, as(tenant, AGENT), approved.ledgerSeq)).toMatchObject({
      type: "spend.approved",
      approver: `elicitation:${AGENT}`,
      channel: "client_elicitation",
      channels_rule: "approvalChannels.spend.policies.wire",
    });

    // spend.tools.wire_treasury_transfer is looked up first: the operator can take the form away from the wire tool alone.
    await fx.putPolicy(tenant, { approvalChannels: { spend: { policies: { wire: ALL }, tools: { wire_treasury_transfer: ["approver"] } } } });
    const next = await heldWire(tenant, { ...wire, amount: 1300 });
    expect(next.approvalChannels).toEqual(["approver"]);
    const refused = await failure(fx.client.approveSpend({ requestSeq: next.ledgerSeq, approvedVia: "elicitation" }, as(tenant, AGENT, "sess-1")));
    expect(refused.message).toMatch(/by rule approvalChannels\.spend\.tools\.wire_treasury_transfer, not client_elicitation/);
    await fx.putPolicy(tenant, { approvalChannels: { spend: { tools: { wire_treasury_transfer: ALL } } } });
    const viaTool = await fx.client.approveSpend({ requestSeq: next.ledgerSeq, approvedVia: "elicitation" }, as(tenant, AGENT, "sess-1"));
    expect(viaTool).toMatchObject({ state: "LOCKED", channel: "client_elicitation" });
  });

  it("a wire held for a request without a session is labelled request:<ref>, and the client's form answers it only through the requester's own request (not_requester otherwise, recorded)", async () => {
    const tenant = newTenant();
    await fx.putPolicy(tenant, { approvalChannels: { spend: { policies: { wire: ALL } } } });
    const ref = (requestRef: string, principal = AGENT) => ({ ctx: { tenant, principal, requestRef } });
    const held = await fx.client.requestAuthorization({ tool: "wire_treasury_transfer", arguments: wire }, ref("AAECAwQFBgcICQoLDA0ODw"));
    expect(held.status).toBe("HITL_REQUIRED");
    const entry = async (seq: bigint) => (await fx.client.listEntries({ afterSeq: seq - 1n, limit: 1 }, as(tenant, AGENT))).entries[0]!;
    expect((await entry(held.ledgerSeq)).session).toBe("request:AAECAwQFBgcICQoLDA0ODw");
    expect((await fx.client.getSpendRequest({ requestSeq: held.ledgerSeq }, as(tenant, AGENT))).request).toMatchObject({
      requestedBy: AGENT,
      requestedInSession: "request:AAECAwQFBgcICQoLDA0ODw",
    });
    const { rows } = await admin.query("SELECT session FROM ledger.spend_requests WHERE tenant_id = $1 AND request_seq = $2", [tenant, Number(held.ledgerSeq)]);
    expect(rows).toEqual([{ session: "request:AAECAwQFBgcICQoLDA0ODw" }]);

    for (const [who, opts] of [
      ["another principal's request", ref("BBECAwQFBgcICQoLDA0ODw", APPROVER)],
      ["a session of the requester", as(tenant, AGENT, "sess-1")],
      ["the requester without a request ref", as(tenant, AGENT)],
    ] as const) {
      const refused = await failure(fx.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "elicitation" }, opts));
      expect(refused.code, who).toBe("permission_denied");
      expect(refused.message, who).toMatch(/^not_requester: it was made without a session/);
      expect((await allEvents(fx.client, as(tenant, AGENT))).at(-1), who).toMatchObject({ type: "spend.approval_refused", code: "not_requester" });
    }
    const declined = await failure(fx.client.declineSpend({ requestSeq: held.ledgerSeq, approvedVia: "elicitation" }, as(tenant, AGENT, "sess-1")));
    expect(declined.message).toMatch(/^not_requester: /);

    const approved = await fx.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "elicitation" }, ref("BBECAwQFBgcICQoLDA0ODw"));
    expect(approved).toMatchObject({ state: "LOCKED", channel: "client_elicitation", receiptPending: false });
    expect((await entry(approved.ledgerSeq)).session).toBe("request:BBECAwQFBgcICQoLDA0ODw");

    // And the other way round: a session's request is not answered from a request of the same principal.
    const inSession = await heldWire(tenant, { ...wire, amount: 1300 });
    const fromRequest = await failure(fx.client.approveSpend({ requestSeq: inSession.ledgerSeq, approvedVia: "elicitation" }, ref("CCECAwQFBgcICQoLDA0ODw")));
    expect(fromRequest.message).toMatch(/^wrong_session: /);
  });

  it("an answer is checked against policy when it is given: a channel the operator removed no longer answers a request made before", async () => {
    const tenant = newTenant();
    await fx.putPolicy(tenant, { approvalChannels: { spend: { policies: { wire: ALL } } } });
    const held = await heldWire(tenant);
    await fx.putPolicy(tenant, {});
    const refused = await failure(fx.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "elicitation" }, as(tenant, AGENT, "sess-1")));
    expect(refused.message).toMatch(/^channel_not_allowed: .*by rule approvalChannels\.spend\.default/);
    // The operator channel answers only where policy lists it too.
    await fx.putPolicy(tenant, { approvalChannels: { spend: { default: ["approver", "console"] } } });
    const operator = await failure(fx.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "operator" }, as(tenant, "operator")));
    expect(operator.message).toMatch(/^channel_not_allowed: policy allows approver, console .* not operator \(refusal recorded/);
  });

  it("with the policy service down nothing is approved or declined, and the request waits for it", async () => {
    const tenant = newTenant();
    const held = await heldWire(tenant);
    // A real gRPC client on a port nothing listens on: the policy service is down.
    const down = createGrpcClient(PolicyService, "127.0.0.1:1", new ContextSigner("ledger-test-key-0123456789abcdefghijkl"), { timeoutMs: 2000 });
    const restarted = await fx.restart({ policy: down.client });
    try {
      const before = (await allEvents(restarted.client, as(tenant, AGENT))).length;
      const approve = await failure(restarted.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER)));
      expect(approve.code).toBe("unavailable");
      expect(approve.message).toMatch(/^the policy service did not say which approval channels may answer, so nothing was approved/);
      expect((await failure(restarted.client.declineSpend({ requestSeq: held.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER)))).code).toBe("unavailable");
      // A wire always needs a person, so even asking for one needs policy's channels.
      expect((await failure(restarted.client.requestAuthorization({ tool: "wire_treasury_transfer", arguments: { ...wire, amount: 7 } }, as(tenant, AGENT)))).code).toBe(
        "unavailable",
      );
      expect((await allEvents(restarted.client, as(tenant, AGENT))).length).toBe(before);
      expect((await restarted.client.getSpendRequest({ requestSeq: held.ledgerSeq }, as(tenant, AGENT))).request?.state).toBe("PENDING");
    } finally {
      await restarted.close();
      down.close();
    }
  });
});

describe("finance reference tools", () => {
  const order = (notional: number) => ({ symbol: "AAPL", side: "BUY", quantity: 1, notional, confidence: 0.9 });

  it("under the HITL threshold: receipt → EXECUTED once; then replay, args_changed and missing_receipt, each recorded", async () => {
    const tenant = newTenant();
    const requested = await fx.client.requestAuthorization({ tool: "place_equity_order", arguments: order(200) }, as(tenant, AGENT));
    expect(requested).toMatchObject({ status: "AUTHORIZED", code: "AUTHORIZED" });
    const receipt = requested.receipt!;
    expect(receipt).toMatchObject({ kind: "authorization", tool: "place_equity_order", resource: "trading:equities:place", policy_version: "equity-1", risk: "high", decision: "allow" });
    // Nothing is committed until the tool runs.
    expect(await committedInDb(admin, tenant, "equity")).toBe(0);

    const executed = await fx.client.executeReferenceTool({ tool: "place_equity_order", arguments: order(200), receipt }, as(tenant, AGENT));
    expect(executed).toMatchObject({ executed: true, code: "EXECUTED", detailCode: "AUTHORIZED" });
    expect(executed.result).toMatchObject({ status: "filled", symbol: "AAPL", notional: 200, synthetic: true });
    expect(executed.result?.order_id).toMatch(/^ord-sim-[0-9a-f]{16}$/);
    expect(await eventAt(fx.client, as(tenant, AGENT), executed.ledgerSeq)).toMatchObject({ type: "reference.executed", code: "AUTHORIZED", authorized: true, committed_after: 200 });
    expect(await committedInDb(admin, tenant, "equity")).toBe(200);

    const replay = await fx.client.executeReferenceTool({ tool: "place_equity_order", arguments: order(200), receipt }, as(tenant, AGENT));
    expect(replay).toMatchObject({ executed: false, code: "replay", detailCode: "replayed_receipt" });

    const second = (await fx.client.requestAuthorization({ tool: "place_equity_order", arguments: order(200) }, as(tenant, AGENT))).receipt!;
    const changed = await fx.client.executeReferenceTool({ tool: "place_equity_order", arguments: order(201), receipt: second }, as(tenant, AGENT));
    expect(changed).toMatchObject({ executed: false, code: "args_changed", detailCode: "changed_arguments" });
    const missing = await fx.client.executeReferenceTool({ tool: "place_equity_order", arguments: order(200) }, as(tenant, AGENT));
    expect(missing).toMatchObject({ executed: false, code: "missing_receipt", detailCode: "allowlist_is_not_authorization" });
    for (const r of [replay, changed, missing]) {
      expect(await eventAt(fx.client, as(tenant, AGENT), r.ledgerSeq)).toMatchObject({ type: "reference.executed", authorized: false, code: r.detailCode });
    }
    // Only the executed call counted; the unused receipt still runs its own call.
    expect(await committedInDb(admin, tenant, "equity")).toBe(200);
    const own = await fx.client.executeReferenceTool({ tool: "place_equity_order", arguments: order(200), receipt: second }, as(tenant, AGENT));
    expect(own.code).toBe("EXECUTED");
  });

  it("a wire transfer always needs a human: HITL_REQUIRED → another principal approves → the requester collects the receipt → EXECUTED", async () => {
    const tenant = newTenant();
    const wire = { beneficiary: "ACME Supplies GmbH", amount: 1, currency: "EUR", memo: "invoice 42" };
    const requested = await fx.client.requestAuthorization({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT));
    expect(requested).toMatchObject({ status: "HITL_REQUIRED", code: "HITL_REQUIRED" });
    expect(requested.receipt).toBeUndefined();
    const noReceipt = await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT));
    expect(noReceipt.code).toBe("missing_receipt");

    const self = await failure(fx.client.approveSpend({ requestSeq: requested.ledgerSeq, approvedVia: "approver_role" }, as(tenant, AGENT)));
    expect(self.message).toMatch(/^self_approval: /);
    const approved = await fx.client.approveSpend({ requestSeq: requested.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER2));
    expect(approved.state).toBe("LOCKED");
    // The receipt is the requester's: the approver never holds it.
    expect(approved.receipt).toBeUndefined();
    expect(approved).toMatchObject({ receiptPending: true, channel: "approver", requester: AGENT });
    const collected = await fx.client.collectSpendApproval({ requestSeq: requested.ledgerSeq, ttlSeconds: 120 }, as(tenant, AGENT));
    const receipt = collected.receipt!;
    expect(receipt).toMatchObject({ kind: "authorization", tool: "wire_treasury_transfer", resource: "treasury:wire", actor: APPROVER2, risk: "critical", policy_version: "wire-1" });
    expect(Date.parse(receipt.expiry as string) - Date.parse(receipt.issued_at as string)).toBe(120_000);
    // Approval does not commit a finance call; execution does.
    expect(await committedInDb(admin, tenant, "wire")).toBe(0);

    const executed = await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire, receipt }, as(tenant, AGENT));
    expect(executed).toMatchObject({ executed: true, code: "EXECUTED" });
    expect(executed.result).toMatchObject({ status: "sent", amount: 1, currency: "EUR", synthetic: true });
    expect(await committedInDb(admin, tenant, "wire")).toBe(1);
    const again = await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire, receipt }, as(tenant, AGENT));
    expect(again.code).toBe("replay");
  });

  it("a finance tool whose spend policy the operator did not configure is ambiguous_policy, never checked against the tool-approval policy", async () => {
    const tenant = newTenant();
    const configured = await fx.restart({
      policies: {
        tenants: {
          [tenant]: {
            spend_policies: { equity: { version: "eq-7", max_notional: 500, daily_cap: 2500, hitl_threshold: 250, min_confidence: 0.55, allowed_actions: ["BUY", "SELL"], per_asset_limits: {} } },
            // A tool-approval policy that happens to list the tool must not stand in for the spend policy.
            tool_approval: { version: "tp-1", tools: { wire_treasury_transfer: { risk: "critical", resources: ["treasury:wire"] } } },
          },
        },
      },
    });
    try {
      const wire = { beneficiary: "ACME Supplies GmbH", amount: 1, currency: "EUR" };
      const requested = await failure(configured.client.requestAuthorization({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT)));
      expect(requested.code).toBe("not_found");
      const executed = await configured.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT));
      expect(executed).toMatchObject({ executed: false, code: "ambiguous_policy", detailCode: "ambiguous_policy" });
      expect(executed.problem).toMatch(/^no spend policy "wire" is configured for this tenant, so wire_treasury_transfer cannot run; the operator configured: equity$/);
      expect(await eventAt(configured.client, as(tenant, AGENT), executed.ledgerSeq)).toMatchObject({ type: "reference.executed", code: "ambiguous_policy" });
      // The tenant's own equity policy is the one in force.
      const equity = await configured.client.requestAuthorization({ tool: "place_equity_order", arguments: order(100) }, as(tenant, AGENT));
      expect(equity.receipt?.policy_version).toBe("eq-7");
    } finally {
      await configured.close();
    }
  });

  it("the daily cap holds at execution: eleven receipts issued under it, executed concurrently, ten run", async () => {
    const tenant = newTenant();
    const receipts: JsonObject[] = [];
    for (let i = 0; i < 11; i++) {
      const r = await fx.client.requestAuthorization({ tool: "place_equity_order", arguments: order(240) }, as(tenant, AGENT));
      expect(r.status).toBe("AUTHORIZED");
      receipts.push(r.receipt!);
    }
    const results = await Promise.all(
      receipts.map((receipt) => fx.client.executeReferenceTool({ tool: "place_equity_order", arguments: order(240), receipt }, as(tenant, AGENT))),
    );
    expect(results.filter((r) => r.code === "EXECUTED")).toHaveLength(10);
    const denied = results.filter((r) => !r.executed);
    expect(denied).toHaveLength(1);
    expect(denied[0]).toMatchObject({ code: "policy_deny", detailCode: "daily_cap_exceeded" });
    expect(denied[0]!.problem).toMatch(
      /^daily cap on \d{4}-\d{2}-\d{2} \(UTC\): 2400\.0 committed today \+ 240\.0 = 2640\.0 exceeds daily_cap 2500\.0 \(spend policy equity, version equity-1\)$/,
    );
    expect(denied[0]!.result).toBeUndefined();
    expect(await committedInDb(admin, tenant, "equity")).toBe(2400);
    // The refused call's nonce was not consumed: the refusal is the cap's, not the receipt's.
    const nonces = await admin.query("SELECT count(*)::int AS n FROM ledger.nonces WHERE tenant_id = $1", [tenant]);
    expect((nonces.rows[0] as { n: number }).n).toBe(10);
  });
});

describe("an operator spend policy with require_confidence", () => {
  const equity = { version: "eq-conf-1", max_notional: 500, daily_cap: 2500, hitl_threshold: 250, min_confidence: 0.55, allowed_actions: ["BUY", "SELL"], per_asset_limits: {} };
  // No confidence key at all, as an agent that leaves it out sends it.
  const unconfident = (notional: number) => ({ action: "BUY", asset: "AAPL", notional });
  const requiring = (tenant: string) => ({ tenants: { [tenant]: { spend_policies: { equity: { ...equity, require_confidence: true } } } } });

  it("refuses an evaluation without confidence before the gate, recorded; with one, the gate decides as without the option", async () => {
    const tenant = newTenant();
    const plain = newTenant();
    const strict = await fx.restart({ policies: { tenants: { ...requiring(tenant).tenants, [plain]: { spend_policies: { equity } } } } });
    try {
      const refused = await failure(strict.client.evaluateSpendGate({ policyName: "equity", action: unconfident(100) }, as(tenant, AGENT)));
      expect(refused.code).toBe("policy_denied");
      expect(refused.message).toMatch(/^confidence_required: the spend policy \(version eq-conf-1\) requires action\.confidence, a number from 0 to 1, and none was given; the gate did not run/);
      const fromFinance = await failure(
        strict.client.requestAuthorization({ tool: "place_equity_order", arguments: { symbol: "AAPL", side: "BUY", quantity: 1, notional: 100 } }, as(tenant, AGENT)),
      );
      expect(fromFinance.message).toMatch(/^confidence_required: .*requires args\.confidence/);
      // Both refusals are in the ledger, and the gate decided nothing.
      const events = await allEvents(strict.client, as(tenant, AGENT));
      expect(events).toEqual([
        expect.objectContaining({ type: "spend_gate.refused", code: "confidence_required", policy: "equity", policy_version: "eq-conf-1" }),
        expect.objectContaining({ type: "spend_gate.refused", code: "confidence_required", policy: "equity", tool: "place_equity_order" }),
      ]);
      expect(await committedInDb(admin, tenant, "equity")).toBe(0);

      // With a confidence the claims and content hash are the ones the same policy without the option gives.
      const confident = await strict.client.evaluateSpendGate({ policyName: "equity", action: buy(100, 0.8) }, as(tenant, AGENT));
      const reference = await strict.client.evaluateSpendGate({ policyName: "equity", action: buy(100, 0.8) }, as(plain, AGENT));
      expect(confident.state).toBe("LOCKED");
      expect(confident.contentHash).toBe(reference.contentHash);
      expect(confident.result?.claims).toEqual(reference.result?.claims);
      expect(confident.result?.policy).toMatchObject({ version: "eq-conf-1", require_confidence: true });
      // Without the option, a missing confidence still skips min-confidence, as CHP says.
      const skipped = await strict.client.evaluateSpendGate({ policyName: "equity", action: unconfident(100) }, as(plain, AGENT));
      expect(skipped.state).toBe("LOCKED");
    } finally {
      await strict.close();
    }
  });

  it("refuses to approve a held request without confidence once the operator requires one", async () => {
    const tenant = newTenant();
    const held = await fx.client.evaluateSpendGate({ policyName: "equity", action: unconfident(300) }, as(tenant, AGENT));
    expect(held.state).toBe("HITL_REQUIRED");
    const strict = await fx.restart({ policies: requiring(tenant) });
    try {
      const refused = await failure(strict.client.approveSpend({ requestSeq: held.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER)));
      expect(refused.code).toBe("failed_precondition");
      expect(refused.message).toMatch(/^confidence_required: .*requires the request's confidence/);
      expect((await allEvents(strict.client, as(tenant, AGENT))).at(-1)).toMatchObject({ type: "spend.approval_refused", code: "confidence_required" });
    } finally {
      await strict.close();
    }
  });
});
