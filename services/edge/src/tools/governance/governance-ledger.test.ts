import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ElicitRequestSchema, type CallToolResult, type ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { verifyConsistency, verifyInclusion } from "@chaos-core/ledger";
import { hashApiKey } from "../../auth/api-keys.js";
import type { EdgeDeps } from "../../deps/edge-deps.js";
import { httpClient } from "../../test-support/http.js";
import { connectInMemory, uniqueTenant, withEveryToolset, type Connected } from "../../test-support/in-memory.js";
import { startTestLedger, type TestLedger } from "../../test-support/ledger.js";
import { startTestServices, type TestServices } from "../../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "../../transport/http.js";
import { ok, refused } from "../../test-support/results.js";

// The governance and finance-reference tools end to end against the real ledger handlers on
// Postgres: the spend gate, the human path, receipts, authorization, the synthetic finance
// tools and the audit ledger, through a real MCP client.

const TOOL_POLICY = {
  version: "tap-1",
  tools: {
    "stripe.create_charge": { risk: "high", resources: ["acct_live_acme"] },
    "search.azure_ai": { risk: "low", resources: ["tenant:acme"], host_bound_fields: ["index_name"] },
  },
  host_context: { index_name: "prod-docs" },
};

// One tenant with its own equity policy, which requires a confidence; every other tenant has the reference set.
const STRICT_TENANT = uniqueTenant("gov-strict");
const STRICT_EQUITY = {
  version: "eq-strict-2",
  max_notional: 400,
  daily_cap: 1200,
  hitl_threshold: 200,
  min_confidence: 0.7,
  allowed_actions: ["BUY"],
  per_asset_limits: { TSLA: 50 },
  require_confidence: true,
};

const charge = { tool: "stripe.create_charge", resource: "acct_live_acme", arguments: { amount: 2500, currency: "usd", customer: "cus_123" } };
const equity = { symbol: "AAPL", side: "BUY", quantity: 10, notional: 100, confidence: 0.9 };

let services: TestServices;
let ledger: TestLedger;
let deps: EdgeDeps;
const open: Connected[] = [];

interface Gate {
  state: string;
  reason: string;
  claims: Array<{ rule: string; passed: boolean; detail: string }>;
  committed_today?: number;
  content_hash: string;
  ledger_seq: number;
  next_step: string;
}



/** A session of a fresh tenant whose user answers every elicitation with `answer`, or cannot be asked. */
async function connect(answer?: ElicitResult, asked: string[] = [], tenant = uniqueTenant("gov")): Promise<Connected> {
  const c = await connectInMemory(
    deps,
    { tenant, principal: "agent" },
    answer
      ? {
          capabilities: { elicitation: { form: {} } },
          setup: (client: Client) =>
            client.setRequestHandler(ElicitRequestSchema, (req) => {
              asked.push(req.params.message);
              return answer;
            }),
        }
      : {},
  );
  open.push(c);
  return c;
}

const yes: ElicitResult = { action: "accept", content: { confirm: true } };

/**
 * A session whose user answers every elicitation with `answer`, in a tenant whose operator lets
 * the client's own form answer spends and high-risk receipts (by default it answers neither).
 */
async function connectOptedIn(answer: ElicitResult, asked: string[] = []): Promise<Connected> {
  const tenant = uniqueTenant("gov-optin");
  const every = { channels: ["CLIENT_ELICITATION", "APPROVER", "OPERATOR", "CONSOLE"].map((c) => `APPROVAL_CHANNEL_${c}`) };
  await services.putPolicy(tenant, { approvalChannels: { high: every, spendDefault: every } });
  return connect(answer, asked, tenant);
}
const gate = (notional: number, extra: Record<string, unknown> = {}) => ({
  policy: "equity",
  action: { action: "BUY", asset: "AAPL", notional, confidence: 0.9 },
  ...extra,
});

beforeAll(async () => {
  services = await startTestServices("governance_ledger");
  ledger = await startTestLedger(
    "governance_ledger",
    {
      defaults: { tool_approval: TOOL_POLICY },
      tenants: { [STRICT_TENANT]: { spend_policies: { equity: STRICT_EQUITY } } },
    },
    services.policy,
  );
  // The finance reference tools are opt-in: these tenants' operator enabled every toolset.
  deps = withEveryToolset({ ...services.deps(), ledger: ledger.client });
});

afterAll(async () => {
  for (const c of open) await c.close();
  await ledger?.close();
  await services?.close();
});

describe("evaluate_spend_gate", () => {
  it("locks under the threshold and counts it toward today's total", async () => {
    const c = await connect();
    const first = ok<Gate>(await c.call("evaluate_spend_gate", gate(100)));
    expect(first).toMatchObject({ state: "LOCKED", reason: "auto-approved under CHP thresholds", committed_today: 0, ledger_seq: 1 });
    expect(first.claims.map((x) => x.rule)).toEqual(["sane-notional", "allowed-action", "per-asset-cap", "max-notional", "daily-cap", "min-confidence"]);
    expect(first.content_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(first.next_step).toMatch(/Evaluating the gate runs nothing/);
    const second = ok<Gate>(await c.call("evaluate_spend_gate", gate(100)));
    expect(second).toMatchObject({ state: "LOCKED", committed_today: 100, ledger_seq: 2 });
  });

  it("holds a spend at the threshold for a person and blocks what breaks a hard rule", async () => {
    const c = await connect();
    const held = ok<Gate>(await c.call("evaluate_spend_gate", gate(250)));
    expect(held).toMatchObject({ state: "HITL_REQUIRED", reason: "human approval required: 250.0 >= HITL threshold 250.0" });
    expect(held.next_step).toContain(`approve_spend {"request_seq": ${held.ledger_seq}}`);
    const blocked = ok<Gate>(await c.call("evaluate_spend_gate", gate(501)));
    expect(blocked).toMatchObject({ state: "BLOCKED", reason: "blocked: per-asset-cap, max-notional" });
    expect(blocked.next_step).toMatch(/No approval can override/);
    const negative = ok<Gate>(await c.call("evaluate_spend_gate", gate(-50)));
    expect(negative).toMatchObject({ state: "BLOCKED", reason: "blocked: sane-notional" });
  });

  it("lets an agent policy tighten the operator's, never loosen it", async () => {
    const c = await connect();
    expect(ok<Gate>(await c.call("evaluate_spend_gate", gate(150, { agent_policy: { max_notional: 120 } }))).state).toBe("BLOCKED");
    const looser = refused(await c.call("evaluate_spend_gate", gate(150, { agent_policy: { max_notional: 100_000 } })));
    expect(looser.code).toBe("policy_denied");
    expect(looser.message).toMatch(/max_notional/);
    expect(refused(await c.call("evaluate_spend_gate", { ...gate(1), policy: "casino" })).code).toBe("not_found");
  });
});

describe("a spend policy that requires confidence", () => {
  it("refuses a spend without confidence before the gate, in words and recorded; with one the gate decides", async () => {
    const c = await connect(undefined, [], STRICT_TENANT);
    const refusal = refused(await c.call("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 100 } }));
    expect(refusal.code).toBe("policy_denied");
    expect(refusal.message).toMatch(/^confidence_required: the spend policy \(version eq-strict-2\) requires action\.confidence/);
    const audit = ok<{ entries: Array<{ event: Record<string, unknown> }> }>(await c.call("inspect_audit_ledger", { limit: 1 }));
    expect(audit.entries[0]!.event).toMatchObject({ type: "spend_gate.refused", code: "confidence_required", policy: "equity" });
    const decided = ok<Gate>(await c.call("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 100, confidence: 0.8 } }));
    expect(decided.state).toBe("LOCKED");
    expect(decided.claims.map((x) => x.rule)).toContain("min-confidence");
  });
});

describe("approve_spend", () => {
  it("locks a held spend once the person confirms, exactly once", async () => {
    const asked: string[] = [];
    const c = await connectOptedIn(yes, asked);
    const held = ok<Gate>(await c.call("evaluate_spend_gate", gate(300)));
    const approved = ok<Gate & { human: unknown }>(await c.call("approve_spend", { request_seq: held.ledger_seq }));
    expect(approved).toMatchObject({ state: "LOCKED", reason: "human-approved by elicitation:agent", human: { answer: "confirmed", via: "elicitation" } });
    expect(approved.claims).toEqual([{ rule: "human-approval", passed: true, detail: "approved by elicitation:agent" }]);
    // The person saw the request the ledger stored.
    expect(asked[0]).toContain(`Spend request at ledger entry ${held.ledger_seq} (a spend under spend policy equity, version equity-1)`);
    expect(asked[0]).toContain("\n  notional = 300\n");
    // Answered in the requester's own session, the approval was collected with it: once.
    const again = refused(await c.call("approve_spend", { request_seq: held.ledger_seq }));
    expect(again.code).toBe("failed_precondition");
    expect(again.message).toMatch(/^already_collected: /);
  });

  it("records a person's decline in the audit ledger as the request's answer, and approves nothing, ever", async () => {
    const c = await connectOptedIn({ action: "decline" });
    const held = ok<Gate>(await c.call("evaluate_spend_gate", gate(300)));
    const out = ok<{ human: unknown; decline_seq: number; state?: string }>(await c.call("approve_spend", { request_seq: held.ledger_seq }));
    expect(out).toMatchObject({ human: { answer: "declined" }, decline_seq: held.ledger_seq + 1 });
    expect(out.state).toBeUndefined();
    const audit = ok<{ entries: Array<{ seq: number; event: Record<string, unknown> }> }>(await c.call("inspect_audit_ledger", {}));
    expect(audit.entries.map((e) => e.event.type)).toEqual(["spend.declined", "spend_gate.evaluated"]);
    expect(audit.entries[0]!.event).toMatchObject({ request_seq: held.ledger_seq, declined_by: "elicitation:agent", channel: "client_elicitation" });
    // Declined is final: asking again says so and approves nothing.
    const again = refused(await c.call("approve_spend", { request_seq: held.ledger_seq }));
    expect(again.message).toMatch(/^declined: request \d+ was declined by elicitation:agent/);
  });

  it("by default does not ask a client that auto-accepts: the attempt is recorded, nothing is approved, and only a person's channels are named", async () => {
    const asked: string[] = [];
    const c = await connect(yes, asked);
    const held = ok<Gate & { approval_channels: Array<{ channel: string }> }>(await c.call("evaluate_spend_gate", gate(300)));
    expect(held.approval_channels.map((x) => x.channel)).toEqual(["approver"]);
    expect(held.next_step).not.toMatch(/client_elicitation/);
    const refusal = refused(await c.call("approve_spend", { request_seq: held.ledger_seq }));
    expect(refusal.code).toBe("approval_required");
    expect(refusal.message).toMatch(/policy does not accept an answer from this client for it \(spend policy equity, rule approvalChannels\.spend\.default\)/);
    expect(asked).toEqual([]);
    const audit = ok<{ entries: Array<{ event: Record<string, unknown> }> }>(await c.call("inspect_audit_ledger", { limit: 1 }));
    expect(audit.entries[0]!.event).toMatchObject({ type: "spend.collect_refused", code: "approval_pending", request_seq: held.ledger_seq });
  });

  it("cannot approve a blocked spend", async () => {
    const c = await connect(yes);
    const blocked = ok<Gate>(await c.call("evaluate_spend_gate", gate(900)));
    expect(refused(await c.call("approve_spend", { request_seq: blocked.ledger_seq })).code).toBe("failed_precondition");
  });
});

describe("tool approval receipts", () => {
  it("an allowlist is not an authorization: receipt required, then authorized once, then replay", async () => {
    const c = await connectOptedIn(yes);
    const evaluated = ok<{ status: string; code: string; args_hash: string; policy_version: string; risk: string; request_seq: number }>(
      await c.call("evaluate_tool_approval", { call: charge }),
    );
    expect(evaluated).toMatchObject({ status: "RECEIPT_REQUIRED", code: "allowlist_is_not_authorization", policy_version: "tap-1", risk: "high" });

    const bare = ok<{ status: string; code: string; ledger_seq: number }>(await c.call("authorize_tool_call", { call: charge }));
    expect(bare).toMatchObject({ status: "DENIED", code: "allowlist_is_not_authorization" });

    const issued = ok<{ receipt: Record<string, unknown>; decision_log: Record<string, unknown> }>(
      await c.call("issue_approval_receipt", { request_seq: evaluated.request_seq, call: charge, decision: "allow", ttl_seconds: 120 }),
    );
    expect(issued.receipt).toMatchObject({ kind: "chaoscore.tool_approval_receipt", tool: charge.tool, args_hash: evaluated.args_hash, decision: "allow" });

    // Key order does not matter; the canonical hash does.
    const reordered = { ...charge, arguments: { customer: "cus_123", currency: "usd", amount: 2500 } };
    const changed = { ...charge, arguments: { ...charge.arguments, amount: 2_500_000 } };
    expect(ok(await c.call("authorize_tool_call", { call: changed, receipt: issued.receipt }))).toMatchObject({ code: "changed_arguments" });
    expect(ok(await c.call("authorize_tool_call", { call: reordered, receipt: issued.receipt }))).toMatchObject({ status: "AUTHORIZED", authorized: true });
    const replay = ok<{ code: string; next_step: string }>(await c.call("authorize_tool_call", { call: charge, receipt: issued.receipt }));
    expect(replay.code).toBe("replayed_receipt");
    expect(replay.next_step).toMatch(/works once/);
    const tampered = { ...issued.receipt, decision: "allow", args_hash: "0".repeat(64) };
    expect(ok(await c.call("authorize_tool_call", { call: charge, receipt: tampered }))).toMatchObject({ code: "bad_signature" });
  });

  it("records a person's deny as a signed refusal", async () => {
    const c = await connectOptedIn(yes);
    const { request_seq } = ok<{ request_seq: number }>(await c.call("evaluate_tool_approval", { call: charge }));
    const issued = ok<{ receipt: Record<string, unknown> }>(await c.call("issue_approval_receipt", { request_seq, call: charge, decision: "deny" }));
    expect(ok(await c.call("authorize_tool_call", { call: charge, receipt: issued.receipt }))).toMatchObject({ code: "human_denied" });
  });

  it("denies a host-bound override, and binds the host's value otherwise", async () => {
    const c = await connect(yes);
    const search = { tool: "search.azure_ai", resource: "tenant:acme", arguments: { query: "Q3 revenue", top_k: 5 } };
    const override = { ...search, arguments: { ...search.arguments, index_name: "other-index" } };
    expect(ok(await c.call("evaluate_tool_approval", { call: override }))).toMatchObject({ status: "DENIED", code: "host_bound_override" });
    const same = ok<{ args_hash: string }>(await c.call("evaluate_tool_approval", { call: { ...search, arguments: { ...search.arguments, index_name: "prod-docs" } } }));
    const plain = ok<{ args_hash: string }>(await c.call("evaluate_tool_approval", { call: search }));
    expect(same.args_hash).toBe(plain.args_hash);
  });
});

describe("the finance reference tools", () => {
  it("run once with a receipt from request_authorization, and record every refusal", async () => {
    const c = await connect();
    const missing = ok<{ executed: boolean; code: string; next_step: string }>(await c.call("place_equity_order", equity));
    expect(missing).toMatchObject({ executed: false, code: "missing_receipt" });
    expect(missing.next_step).toContain('request_authorization {"tool": "place_equity_order"');

    const auth = ok<{ status: string; receipt: Record<string, unknown>; request_seq: number }>(
      await c.call("request_authorization", { tool: "place_equity_order", args: equity }),
    );
    expect(auth.status).toBe("AUTHORIZED");
    expect(auth.receipt).toMatchObject({ kind: "authorization", tool: "place_equity_order", resource: "trading:equities:place" });

    expect(ok(await c.call("place_equity_order", { ...equity, quantity: 11, receipt: auth.receipt }))).toMatchObject({
      executed: false,
      code: "args_changed",
      detail_code: "changed_arguments",
    });
    const ran = ok<{ executed: boolean; code: string; result: Record<string, unknown>; synthetic: boolean }>(
      await c.call("place_equity_order", { ...equity, receipt: auth.receipt }),
    );
    expect(ran).toMatchObject({ executed: true, code: "EXECUTED", synthetic: true, result: { status: "filled", synthetic: true } });
    expect(String(ran.result.order_id)).toMatch(/^ord-sim-/);
    expect(ok(await c.call("place_equity_order", { ...equity, receipt: auth.receipt }))).toMatchObject({ executed: false, code: "replay" });

    const audit = ok<{ entries: Array<{ event: Record<string, unknown> }> }>(await c.call("inspect_audit_ledger", { limit: 10 }));
    const executions = audit.entries.filter((e) => e.event.type === "reference.executed").map((e) => e.event.authorized);
    expect(executions).toEqual([false, true, false, false]);
  });

  it("answer a tampered receipt missing_receipt, saying the signature is bad (detail bad_signature), and record it", async () => {
    const c = await connect();
    const auth = ok<{ receipt: Record<string, unknown> }>(await c.call("request_authorization", { tool: "place_equity_order", args: equity }));
    const tampered = { ...auth.receipt, expiry: "2099-01-01T00:00:00.000Z" };
    const out = ok<{ executed: boolean; code: string; detail_code: string; message: string; ledger_seq: number; next_step: string; result?: unknown }>(
      await c.call("place_equity_order", { ...equity, receipt: tampered }),
    );
    expect(out).toMatchObject({ executed: false, code: "missing_receipt", detail_code: "bad_signature" });
    expect(out.message).toMatch(/signature is bad/);
    expect(out.result).toBeUndefined();
    expect(out.next_step).toContain("bad_signature");
    expect(out.next_step).toMatch(/signature is bad/);
    // A receipt was presented: the advice is about one that cannot be verified, not an absent one.
    expect(out.next_step).toMatch(/cannot be verified/);
    expect(out.next_step).not.toMatch(/runs only with a receipt/);
    const audit = ok<{ entries: Array<{ seq: number; event: Record<string, unknown> }> }>(await c.call("inspect_audit_ledger", { limit: 1 }));
    expect(audit.entries[0]).toMatchObject({ seq: out.ledger_seq, event: { type: "reference.executed", code: "bad_signature", authorized: false } });
    expect(String(audit.entries[0]!.event.problem)).toMatch(/signature is bad/);
  });

  it("answer another tenant's receipt args_changed, saying it is another tenant's (detail tenant_mismatch)", async () => {
    const issuer = await connect();
    const auth = ok<{ receipt: Record<string, unknown> }>(await issuer.call("request_authorization", { tool: "place_equity_order", args: equity }));
    const other = await connect();
    const out = ok<{ executed: boolean; code: string; detail_code: string; message: string; next_step: string }>(
      await other.call("place_equity_order", { ...equity, receipt: auth.receipt }),
    );
    expect(out).toMatchObject({ executed: false, code: "args_changed", detail_code: "tenant_mismatch" });
    expect(out.message).toMatch(/issued in another tenant/);
    expect(out.next_step).toMatch(/valid only in the tenant it was issued in/);
    expect(out.next_step).not.toMatch(/arguments differ/);
    // The receipt still works in its own tenant: the refusal did not burn it.
    expect(ok(await issuer.call("place_equity_order", { ...equity, receipt: auth.receipt }))).toMatchObject({ executed: true });
  });

  it("always needs a person for a wire; the approval returns the receipt", async () => {
    const c = await connectOptedIn(yes);
    const wire = { beneficiary: "ACME Ltd", amount: 1200, currency: "USD", confidence: 0.9 };
    const held = ok<{ status: string; request_seq: number; next_step: string }>(
      await c.call("request_authorization", { tool: "wire_treasury_transfer", args: wire }),
    );
    expect(held.status).toBe("HITL_REQUIRED");
    expect(held.next_step).toContain(`approve_spend {"request_seq": ${held.request_seq}}`);
    const approved = ok<{ state: string; receipt: Record<string, unknown>; next_step: string }>(
      await c.call("approve_spend", { request_seq: held.request_seq }),
    );
    expect(approved.state).toBe("LOCKED");
    expect(approved.receipt).toMatchObject({ kind: "authorization", tool: "wire_treasury_transfer" });
    expect(approved.next_step).toMatch(/wire_treasury_transfer/);
    expect(ok(await c.call("wire_treasury_transfer", { ...wire, receipt: approved.receipt }))).toMatchObject({ executed: true });
  });
});

describe("spend answers name the caps that decide them", () => {
  interface Finance {
    executed: boolean;
    code: string;
    detail_code: string;
    message: string;
    ledger_seq: number;
    next_step: string;
  }
  const lastEvent = async (c: Connected) =>
    ok<{ entries: Array<{ seq: number; event: Record<string, unknown> }> }>(await c.call("inspect_audit_ledger", { limit: 1 })).entries[0]!;

  it("a wire over the wire cap without a receipt says no receipt can cover it and names the 10,000 cap", async () => {
    const c = await connect();
    const out = ok<Finance>(await c.call("wire_treasury_transfer", { beneficiary: "ACME Ltd", amount: 25_000, currency: "EUR", confidence: 0.9 }));
    // The seed's code and its check order: no receipt was presented, so that is what decides.
    expect(out).toMatchObject({ executed: false, code: "missing_receipt", detail_code: "allowlist_is_not_authorization" });
    expect(out.message).toContain("no receipt can authorize this call: 25000.0 exceeds max_notional 10000.0 (spend policy wire, version wire-1)");
    expect(out.next_step).toContain("25000.0 exceeds max_notional 10000.0");
    // Asking for a receipt would only be refused: the next step does not send the agent there.
    expect(out.next_step).not.toContain("request_authorization");
    // What the agent was told is what the ledger recorded.
    expect(await lastEvent(c)).toMatchObject({ seq: out.ledger_seq, event: { type: "reference.executed", code: "allowlist_is_not_authorization", problem: out.message } });
  });

  it("an equity order over the cap names the 500 cap, whether it asks for a receipt or calls the tool", async () => {
    const c = await connect();
    const big = { ...equity, quantity: 150, notional: 1500 };
    const denied = ok<{ status: string; code: string; gate: { reason: string; content_hash: string }; next_step: string }>(
      await c.call("request_authorization", { tool: "place_equity_order", args: big }),
    );
    // CHP's reason is normative (and hashed): it stays exactly as CHP defines it.
    expect(denied).toMatchObject({ status: "DENIED", code: "policy_deny", gate: { reason: "blocked: per-asset-cap, max-notional" } });
    expect(denied.next_step).toContain("1500.0 exceeds max_notional 500.0 (spend policy equity, version equity-1)");

    const called = ok<Finance>(await c.call("place_equity_order", big));
    expect(called).toMatchObject({ executed: false, code: "missing_receipt", detail_code: "allowlist_is_not_authorization" });
    expect(called.message).toContain("no receipt can authorize this call: 1500.0 exceeds max_notional 500.0 (spend policy equity, version equity-1)");
    expect(called.next_step).not.toContain("request_authorization");
  });

  it("a blocked spend names every cap it breaks with its value, and keeps CHP's reason", async () => {
    const c = await connect(undefined, [], STRICT_TENANT);
    const blocked = ok<Gate>(await c.call("evaluate_spend_gate", { policy: "equity", action: { action: "SELL", asset: "TSLA", notional: 60, confidence: 0.6 } }));
    expect(blocked).toMatchObject({ state: "BLOCKED", reason: "blocked: allowed-action, per-asset-cap, min-confidence" });
    expect(blocked.next_step).toContain(
      "action SELL is not in allowed_actions [BUY], 60.0 exceeds per_asset_limits.TSLA 50.0 and confidence 0.6 is below min_confidence 0.7 (spend policy equity, version eq-strict-2)",
    );
    // A cap the action stays within is not named as deciding it.
    expect(blocked.next_step).not.toContain("max_notional");
  });

  it("a spend over today's total names what is committed today and the daily cap", async () => {
    const c = await connect();
    for (let i = 0; i < 10; i++) expect(ok<Gate>(await c.call("evaluate_spend_gate", gate(240))).state).toBe("LOCKED");
    const blocked = ok<Gate>(await c.call("evaluate_spend_gate", gate(240)));
    expect(blocked).toMatchObject({ state: "BLOCKED", reason: "blocked: daily-cap" });
    expect(blocked.next_step).toContain("2400.0 committed today + 240.0 = 2640.0 exceeds daily_cap 2500.0 (spend policy equity, version equity-1)");
  });

  it("a call the daily cap refuses at execution says what is committed today and names the cap", async () => {
    const c = await connect();
    const order = { ...equity, notional: 240 };
    const auth = ok<{ receipt: Record<string, unknown> }>(await c.call("request_authorization", { tool: "place_equity_order", args: order }));
    for (let i = 0; i < 10; i++) ok(await c.call("evaluate_spend_gate", gate(240)));
    const out = ok<Finance>(await c.call("place_equity_order", { ...order, receipt: auth.receipt }));
    expect(out).toMatchObject({ executed: false, code: "policy_deny", detail_code: "daily_cap_exceeded" });
    expect(out.message).toContain("2400.0 committed today + 240.0 = 2640.0 exceeds daily_cap 2500.0 (spend policy equity, version equity-1)");
    expect(await lastEvent(c)).toMatchObject({ seq: out.ledger_seq, event: { code: "daily_cap_exceeded", problem: out.message } });
  });

  it("an approval the daily cap blocks names the cap to the person approving and to the requester collecting it", async () => {
    const c = await connectOptedIn(yes);
    const held = ok<Gate>(await c.call("evaluate_spend_gate", gate(300)));
    for (let i = 0; i < 9; i++) ok(await c.call("evaluate_spend_gate", gate(249)));
    const approved = ok<Gate>(await c.call("approve_spend", { request_seq: held.ledger_seq }));
    expect(approved).toMatchObject({ state: "BLOCKED", reason: "approval by elicitation:agent rejected: blocked: daily-cap" });
    const words = "2241.0 committed today + 300.0 = 2541.0 exceeds daily_cap 2500.0 (spend policy equity, version equity-1)";
    expect(approved.next_step).toContain(words);
    const collected = refused(await c.call("approve_spend", { request_seq: held.ledger_seq }));
    expect(collected.message).toMatch(/^approval_blocked: /);
    expect(collected.message).toContain(words);
  });

  it("a spend held for a person names the threshold that holds it", async () => {
    const c = await connect();
    const held = ok<Gate>(await c.call("evaluate_spend_gate", gate(300)));
    expect(held).toMatchObject({ state: "HITL_REQUIRED", reason: "human approval required: 300.0 >= HITL threshold 250.0" });
    expect(held.next_step).toContain("300.0 is at or above hitl_threshold 250.0 (spend policy equity, version equity-1)");
    const wire = ok<Finance>(await c.call("wire_treasury_transfer", { beneficiary: "ACME Ltd", amount: 1200, currency: "USD", confidence: 0.9 }));
    expect(wire).toMatchObject({ executed: false, code: "missing_receipt", detail_code: "approval_pending" });
    expect(wire.message).toContain("1200.0 is at or above hitl_threshold 0.0 (spend policy wire, version wire-1)");
  });
});

describe("inspect_audit_ledger and chp_version", () => {
  it("shows the chain, the signed checkpoint and proofs that verify", async () => {
    const c = await connect();
    for (const n of [10, 20, 30]) ok(await c.call("evaluate_spend_gate", gate(n)));
    const out = ok<{
      order: string;
      entries: Array<{ seq: number; sig: string; prev_sig: string }>;
      size: number;
      chain: { ok: boolean; entries: number };
      checkpoint: { size: number; root_hash: string; note: string; verifier_key: string };
      inclusion_proof: { leaf_index: number; tree_size: number; leaf_hash: string; hashes: string[]; root_hash: string };
      consistency_proof: { from_size: number; to_size: number; hashes: string[]; from_root: string; to_root: string };
    }>(await c.call("inspect_audit_ledger", { proof: { seq: 2 }, consistency: { from_size: 1 } }));
    expect(out.order).toBe("newest_first");
    expect(out.entries.map((e) => e.seq)).toEqual([3, 2, 1]);
    expect(out.entries[0]!.prev_sig).toBe(out.entries[1]!.sig);
    expect(out).toMatchObject({ size: 3, chain: { ok: true, entries: 3 }, checkpoint: { size: 3 } });
    expect(out.checkpoint.note).toContain(out.checkpoint.root_hash);
    const b = (s: string) => Buffer.from(s, "base64");
    const p = out.inclusion_proof;
    expect(verifyInclusion(p.leaf_index, p.tree_size, b(p.leaf_hash), p.hashes.map(b), b(p.root_hash))).toBe(true);
    expect(verifyInclusion(p.leaf_index, p.tree_size, b(p.leaf_hash), p.hashes.map(b), b(out.checkpoint.root_hash))).toBe(true);
    const q = out.consistency_proof;
    expect(verifyConsistency(q.from_size, q.to_size, b(q.from_root), b(q.to_root), q.hashes.map(b))).toBe(true);

    const page = ok<{ order: string; entries: Array<{ seq: number }>; next_after_seq: number }>(
      await c.call("inspect_audit_ledger", { after_seq: 0, limit: 2 }),
    );
    expect(page).toMatchObject({ order: "oldest_first", next_after_seq: 2 });
    expect(page.entries.map((e) => e.seq)).toEqual([1, 2]);
  });

  it("chaoscore_inspect {what: audit} shows the tenant's ledger at a glance, and only the tenant's", async () => {
    const c = await connect();
    const empty = ok<{ available: boolean; audit: { entries: number; chain_ok: boolean; recent: unknown[] } }>(
      await c.call("chaoscore_inspect", { what: "audit" }),
    );
    expect(empty).toMatchObject({ available: true, audit: { entries: 0, chain_ok: true, recent: [] } });
    for (const n of [10, 20]) ok(await c.call("evaluate_spend_gate", gate(n)));
    const out = ok<{ audit: { entries: number; chain_ok: boolean; checkpoint: { size: number }; recent: Array<{ seq: number; type: string; principal: string }> } }>(
      await c.call("chaoscore_inspect", { what: "audit" }),
    );
    expect(out.audit).toMatchObject({ entries: 2, chain_ok: true, checkpoint: { size: 2 } });
    expect(out.audit.recent).toEqual([
      expect.objectContaining({ seq: 2, type: "spend_gate.evaluated", principal: "agent" }),
      expect.objectContaining({ seq: 1, type: "spend_gate.evaluated", principal: "agent" }),
    ]);
    const other = await connect();
    expect(ok<{ audit: { entries: number } }>(await other.call("chaoscore_inspect", { what: "audit" })).audit.entries).toBe(0);
  });

  it("lists each of the caller's spend policies with its limits, and no other tenant's", async () => {
    const strict = await connect(undefined, [], STRICT_TENANT);
    const mine = ok<{ info: { spend_policies: Array<Record<string, unknown>> } }>(await strict.call("chp_version", {})).info.spend_policies;
    expect(mine).toEqual([{ name: "equity", ...STRICT_EQUITY }]);
    const other = await connect();
    const theirs = ok<{ info: { spend_policies: Array<Record<string, unknown>> } }>(await other.call("chp_version", {})).info;
    expect(theirs.spend_policies.map((p) => p.name)).toEqual(["equity", "wire", "rebalance"]);
    expect(theirs.spend_policies[0]).toEqual({
      name: "equity",
      version: "equity-1",
      max_notional: 500,
      daily_cap: 2500,
      hitl_threshold: 250,
      min_confidence: 0.55,
      allowed_actions: ["BUY", "SELL"],
      per_asset_limits: {},
      require_confidence: false,
    });
    expect(JSON.stringify(theirs)).not.toContain("eq-strict-2");
  });

  it("describes the protocol with public keys only", async () => {
    const c = await connect();
    const out = ok<{ edge_version: string; info: Record<string, unknown> }>(await c.call("chp_version", {}));
    expect(out.edge_version).toBe("0.0.0-test");
    expect(out.info).toMatchObject({ chp: { version: "1.0", profile: "B" }, finance_reason_codes: expect.arrayContaining(["missing_receipt"]) });
    expect(JSON.stringify(out.info)).not.toMatch(/PRIVATE/);
  });
});

describe("without a tool-approval policy", () => {
  let bare: TestLedger;
  let bareDeps: EdgeDeps;

  beforeAll(async () => {
    // The reference spend policies and no tool-approval policy: the ledger's default.
    bare = await startTestLedger("governance_bare");
    bareDeps = { ...services.deps(), ledger: bare.client };
  });

  afterAll(async () => {
    await bare?.close();
  });

  it("evaluate_tool_approval and authorize_tool_call say in words that none is configured, not a bare ambiguous_policy", async () => {
    const c = await connectInMemory(bareDeps, { tenant: uniqueTenant("gov-bare"), principal: "agent" });
    open.push(c);
    const evaluated = ok<{ status: string; code: string; message: string; next_step: string }>(await c.call("evaluate_tool_approval", { call: charge }));
    expect(evaluated).toMatchObject({ status: "DENIED", code: "ambiguous_policy" });
    expect(evaluated.message).toMatch(/^no tool-approval policy is configured for this tenant/);
    expect(evaluated.message).toContain("CHAOS_CORE_LEDGER_POLICY_FILE");
    expect(evaluated.next_step).toMatch(/no tool-approval policy is configured/);
    const authorized = ok<{ status: string; code: string; message: string; next_step: string }>(await c.call("authorize_tool_call", { call: charge }));
    expect(authorized).toMatchObject({ status: "DENIED", code: "ambiguous_policy" });
    expect(authorized.message).toMatch(/^no tool-approval policy is configured for this tenant/);
    expect(authorized.next_step).toMatch(/no tool-approval policy is configured/);
  });
});

describe("the approver role over HTTP", () => {
  const keys = { agent: randomBytes(24).toString("base64url"), alice: randomBytes(24).toString("base64url") };
  const tenant = `gov-http-${randomBytes(3).toString("hex")}`;
  let edge: RunningHttpTransport;
  const clients: Client[] = [];

  beforeAll(async () => {
    edge = await startHttpTransport(deps, {
      port: 0,
      apiKeys: [
        { tenant, principal: "agent", sha256: hashApiKey(keys.agent) },
        { tenant, principal: "alice", sha256: hashApiKey(keys.alice), roles: ["approver"] },
      ],
    });
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    await edge?.close();
  });

  async function as(key: string): Promise<Client> {
    const { client } = await httpClient(edge.url, { headers: { authorization: `Bearer ${key}` } });
    clients.push(client);
    return client;
  }
  const callTool = async (c: Client, name: string, args: Record<string, unknown>) =>
    (await c.callTool({ name, arguments: args })) as CallToolResult;

  it("lets an approver approve another principal's request, never their own", async () => {
    const agent = await as(keys.agent);
    const alice = await as(keys.alice);
    const held = ok<Gate>(await callTool(agent, "evaluate_spend_gate", gate(300)));
    expect(refused(await callTool(agent, "approve_spend", { request_seq: held.ledger_seq })).code).toBe("approval_required");
    const approved = ok<Gate & { human: unknown }>(await callTool(alice, "approve_spend", { request_seq: held.ledger_seq }));
    expect(approved).toMatchObject({ state: "LOCKED", reason: "human-approved by alice", human: { via: "approver_role" } });

    const own = ok<Gate>(await callTool(alice, "evaluate_spend_gate", gate(300)));
    const self = refused(await callTool(alice, "approve_spend", { request_seq: own.ledger_seq }));
    expect(self.code).toBe("permission_denied");
    expect(self.message).toMatch(/self_approval/);

    const { request_seq } = ok<{ request_seq: number }>(await callTool(agent, "evaluate_tool_approval", { call: charge }));
    const issued = ok<{ receipt: Record<string, unknown> }>(
      await callTool(alice, "issue_approval_receipt", { request_seq, call: charge, decision: "allow" }),
    );
    expect(issued.receipt).toMatchObject({ actor: "alice", decision: "allow" });
    expect(ok(await callTool(agent, "authorize_tool_call", { call: charge, receipt: issued.receipt }))).toMatchObject({ status: "AUTHORIZED" });
  });

  const wire = { beneficiary: "Northwind Traders", amount: 900, currency: "USD", memo: "PO 7781", confidence: 0.9 };

  it("closes the loop for a wire: held → the agent is told who can approve → alice approves → the agent's approve_spend gets the receipt, once", async () => {
    const agent = await as(keys.agent);
    const alice = await as(keys.alice);
    const held = ok<{ status: string; request_seq: number; approval_channels: Array<{ channel: string; call?: string }>; next_step: string }>(
      await callTool(agent, "request_authorization", { tool: "wire_treasury_transfer", args: wire }),
    );
    expect(held.status).toBe("HITL_REQUIRED");
    const call = `approve_spend {"request_seq": ${held.request_seq}}`;
    expect(held.approval_channels).toEqual([{ channel: "approver", how: expect.stringContaining("approver role"), call }]);
    expect(held.next_step).toContain("you cannot approve it yourself");
    expect(held.next_step).toContain(`your next ${call} (or wire_treasury_transfer with exactly the same arguments) receives the receipt`);
    const waiting = refused(await callTool(agent, "approve_spend", { request_seq: held.request_seq }));
    expect(waiting.code).toBe("approval_required");

    const approved = ok<{ state: string; receipt_pending: boolean; receipt?: unknown; next_step: string }>(
      await callTool(alice, "approve_spend", { request_seq: held.request_seq }),
    );
    expect(approved).toMatchObject({ state: "LOCKED", receipt_pending: true });
    expect(approved.receipt).toBeUndefined();

    const collected = ok<{ receipt: Record<string, unknown>; approved_by: string; channel: string; human: unknown }>(
      await callTool(agent, "approve_spend", { request_seq: held.request_seq }),
    );
    expect(collected).toMatchObject({ approved_by: "alice", channel: "approver", human: { answer: "confirmed", via: "approver_role" } });
    expect(collected.receipt).toMatchObject({ kind: "authorization", actor: "alice", tool: "wire_treasury_transfer" });
    const twice = refused(await callTool(agent, "approve_spend", { request_seq: held.request_seq }));
    expect(twice.message).toMatch(/^already_collected: /);
    expect(ok(await callTool(agent, "wire_treasury_transfer", { ...wire, receipt: collected.receipt }))).toMatchObject({ executed: true });
  });

  it("the wire itself, called directly without a receipt, is held for a person who is told how to approve it, and runs once after", async () => {
    const agent = await as(keys.agent);
    const alice = await as(keys.alice);
    const args = { ...wire, amount: 901 };
    const pending = ok<{ executed: boolean; code: string; detail_code: string; approval_request_seq: number; next_step: string }>(
      await callTool(agent, "wire_treasury_transfer", args),
    );
    expect(pending).toMatchObject({ executed: false, code: "missing_receipt", detail_code: "approval_pending" });
    const held = { request_seq: pending.approval_request_seq };
    expect(pending.next_step).toContain(`- approver: someone holding the approver role calls approve_spend {"request_seq": ${held.request_seq}}`);
    expect(pending.next_step).toContain("(or wire_treasury_transfer with exactly the same arguments) receives the receipt");
    ok(await callTool(alice, "approve_spend", { request_seq: held.request_seq }));
    const ran = ok<{ executed: boolean; approval_request_seq: number; result: Record<string, unknown>; next_step: string }>(
      await callTool(agent, "wire_treasury_transfer", args),
    );
    expect(ran).toMatchObject({ executed: true, approval_request_seq: held.request_seq, result: { beneficiary: "Northwind Traders", amount: 901 } });
    expect(ran.next_step).toMatch(new RegExp(`approval of spend request ${held.request_seq} was used by this call, once`));
    expect(ok(await callTool(agent, "wire_treasury_transfer", args))).toMatchObject({ executed: false, code: "missing_receipt" });
  });
});
