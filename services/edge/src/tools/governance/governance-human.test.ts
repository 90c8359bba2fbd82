import { randomBytes } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import { ChaosError } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ElicitRequestSchema, type CallToolResult, type ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { hashApiKey } from "../../auth/api-keys.js";
import type { EdgeDeps } from "../../deps/edge-deps.js";
import { httpClient } from "../../test-support/http.js";
import { connectInMemory, uniqueTenant, withEveryToolset, type Connected } from "../../test-support/in-memory.js";
import { createRecordingLedger, type RecordingLedger } from "../../test-support/recording-ledger.js";
import { startTestServices, type TestServices } from "../../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "../../transport/http.js";
import { ok, refused } from "../../test-support/results.js";
import type { Client as V2Client } from "@modelcontextprotocol/client";
import { newMrtrKeyringFile, parseMrtrKeyring } from "../../mrtr/keyring.js";
import { modernClient, retryParams, type WireResult } from "../../../../../test/support/mrtr.js";


// The edge's own duties on the human path, against a ledger that only records what it is sent
// (its decisions are tested against the real ledger): who counts as the human, what the person
// is shown, that nothing is sent when nobody approved, and that an argument never approves.

// The entry at request_seq 7 for issue_approval_receipt: a tool-approval request at medium risk,
// where policy accepts the client's own answer by default.
const RECORDED_EVENT = {
  type: "tool_approval.evaluated",
  tool: "stripe.create_charge",
  resource: "acct_live_acme",
  status: "RECEIPT_REQUIRED",
  args_hash: "b".repeat(64),
  policy_version: "tap-1",
  risk: "medium",
};

/** Every channel: the operator opted the client's own form in for this spend. */
const ALL_CHANNELS = ["client_elicitation", "approver", "operator", "console"];

// The stored spend request at request_seq 7: a wire with every argument, as the ledger keeps it.
const STORED_WIRE = {
  beneficiary: "ACME Supplies GmbH",
  amount: 300,
  currency: "EUR",
  // Longer than anything the old prompt showed whole (it cut at 4000 characters).
  memo: `invoice 42 ${"x".repeat(4100)} END-OF-MEMO`,
};

function storedRequest(overrides: Record<string, unknown> = {}) {
  return {
    requestSeq: 7n,
    kind: "finance",
    policy: "wire",
    policyVersion: "wire-1",
    tool: "wire_treasury_transfer",
    action: { action: "WIRE", asset: "EUR", notional: 300, confidence: null },
    arguments: STORED_WIRE,
    argsHash: "d".repeat(64),
    requestedBy: "agent",
    requestedInSession: "s-1",
    createdAt: "2025-06-01T12:00:00.000Z",
    expiresAt: "2025-06-02T12:00:00.000Z",
    state: "PENDING",
    gate: { state: "HITL_REQUIRED", reason: "human approval required: 300.0 >= HITL threshold 0.0" },
    contentHash: "c".repeat(64),
    argumentsVerified: true,
    channels: ALL_CHANNELS,
    channelsRule: "approvalChannels.spend.policies.wire",
    ...overrides,
  };
}

/**
 * A ledger that answers with fixed messages and records every request: `request` is the stored
 * spend request at 7, `event` the entry at 7.
 */
function recordingLedger(
  request: Record<string, unknown> = storedRequest(),
  event: JsonObject = RECORDED_EVENT,
  more: Parameters<typeof createRecordingLedger>[0] = {},
): RecordingLedger {
  return createRecordingLedger({
    ...more,
    getSpendRequest: async (req) => {
      if (req.requestSeq !== 7n) throw new ChaosError("not_found", `no ledger entry ${req.requestSeq} in this tenant`);
      return { request };
    },
    declineSpend: async () => ({ ledgerSeq: 9n, declinedBy: "elicitation:agent", channel: "client_elicitation" }),
    // As the ledger does: nothing to collect while no person answered (and the attempt is recorded).
    collectSpendApproval: async () => {
      if (request.state === "PENDING") {
        throw new ChaosError("failed_precondition", "approval_pending: no person has answered request 7 yet (refusal recorded as ledger entry 9)");
      }
      return {
      state: "LOCKED",
      result: { reason: "human-approved by operator", claims: [{ rule: "human-approval", passed: true, detail: "approved by operator" }] },
      receipt: { kind: "authorization", tool: "wire_treasury_transfer", expiry: "2025-06-01T12:05:00.000Z" },
      ledgerSeq: 13n,
      contentHash: "e".repeat(64),
      approvedBy: "operator",
      channel: "operator",
      approvalSeq: 8n,
      };
    },
    // The entry at request_seq 7 is the recorded request; there is no other.
    listEntries: async (req) =>
      req.afterSeq === 6n
        ? {
            entries: [
              {
                seq: 7n,
                ts: "2025-06-01T12:00:00.000Z",
                tenant: "t",
                session: "s-1",
                principal: "agent",
                event,
                contentHash: "c".repeat(64),
              },
            ],
            size: 8n,
          }
        : { entries: [], size: 8n },
    approveSpend: async (req) => ({
      state: "LOCKED",
      result: { reason: "human-approved by alice", claims: [{ rule: "human-approval", passed: true, detail: "approved by alice" }] },
      contentHash: "a".repeat(64),
      ledgerSeq: 8n,
      receiptPending: req.approvedVia !== "elicitation",
      channel: req.approvedVia === "elicitation" ? "client_elicitation" : "approver",
      requester: "agent",
    }),
    append: async () => ({ entry: { seq: 9n } }),
    issueReceipt: async () => ({ receipt: { kind: "chaoscore.tool_approval_receipt" }, decisionLog: { decision: "allow" }, ledgerSeq: 10n }),
    authorize: async () => ({ authorized: false, code: "allowlist_is_not_authorization", step: "receipt", argsHash: "b".repeat(64), ledgerSeq: 11n }),
    executeReferenceTool: async () => ({ executed: false, code: "missing_receipt", detailCode: "allowlist_is_not_authorization", ledgerSeq: 12n }),
  });
}

const call = { tool: "stripe.create_charge", resource: "acct_live_acme", arguments: { amount: 2500, currency: "usd" } };

let services: TestServices;
const open: Connected[] = [];



/**
 * A client whose user answers every elicitation with `answer` (recording the questions), or one
 * that cannot elicit; `operator` makes the edge standalone's, with the operator's command. Its
 * tenant's operator enabled every toolset: the finance reference tools are served.
 */
async function connectWithUser(ledger: RecordingLedger, answer?: ElicitResult, asked: string[] = [], operator?: EdgeDeps["operator"]): Promise<Connected> {
  const deps: EdgeDeps = withEveryToolset({ ...services.deps(), ledger: ledger.client, ...(operator ? { operator } : {}) });
  const c = await connectInMemory(
    deps,
    { tenant: uniqueTenant("gov-human"), principal: "agent" },
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

beforeAll(async () => {
  services = await startTestServices("governance_human");
});

afterAll(async () => {
  for (const c of open) await c.close();
  await services?.close();
});

describe("approve_spend through elicitation", () => {
  it("shows the person the stored request, every argument whole, and sends approved_via elicitation only after they confirm", async () => {
    const ledger = recordingLedger();
    const asked: string[] = [];
    const c = await connectWithUser(ledger, { action: "accept", content: { confirm: true } }, asked);
    const out = ok<{ human: unknown; state: string; ledger_seq: number; next_step: string }>(
      await c.call("approve_spend", { request_seq: 7, ttl_seconds: 120 }),
    );
    expect(out).toMatchObject({ human: { answer: "confirmed", via: "elicitation" }, state: "LOCKED", ledger_seq: 8 });
    expect(asked).toHaveLength(1);
    // What the person reads comes from the ledger's stored request, never from the agent: every
    // argument of the wire, the beneficiary and the whole memo included, and the hashes.
    expect(asked[0]).toContain("Spend request at ledger entry 7 (wire_treasury_transfer under spend policy wire, version wire-1)");
    expect(asked[0]).toContain('\n  beneficiary = "ACME Supplies GmbH"\n');
    expect(asked[0]).toContain(`\n  memo = ${JSON.stringify(STORED_WIRE.memo)}\n`);
    expect(asked[0]).toContain("\n  amount = 300\n");
    expect(asked[0]).toContain('\n  currency = "EUR"\n');
    expect(asked[0]).toContain(`args_hash: ${"d".repeat(64)}`);
    expect(asked[0]).toContain("Who may approve it (policy's channels): client_elicitation, approver, operator, console (rule approvalChannels.spend.policies.wire)");
    expect(asked[0]).not.toMatch(/cut/);
    expect(ledger.requests("getSpendRequest")[0]).toMatchObject({ requestSeq: 7n });
    const sent = ledger.requests("approveSpend");
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ requestSeq: 7n, approvedVia: "elicitation", ttlSeconds: 120 });
    // The ledger learns who asked from the call context, with the session the request came from.
    expect(ledger.calls.find((x) => x.method === "approveSpend")!.call).toMatchObject({ principal: "agent", sessionId: c.session.id });
  });

  it("does not ask through a form when the stored request is too long for one, and names who can answer", async () => {
    const tooLong = recordingLedger(storedRequest({ arguments: { ...STORED_WIRE, memo: "wire for INV-104 ".repeat(1200) } }));
    const notAsked: string[] = [];
    // In standalone, where the operator's command is one of the ways.
    const d = await connectWithUser(tooLong, { action: "accept", content: { confirm: true } }, notAsked, { dataDir: "/srv/cc" });
    const error = refused(await d.call("approve_spend", { request_seq: 7 }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toMatch(/too long to show in a form .* and is never shown cut/);
    expect(error.message).toContain('approve_spend {"request_seq": 7}');
    expect(error.message).toMatch(/- operator: the operator of this server runs chaos-core approvals approve-spend 7 --tenant gov-human-\S+ --data-dir \/srv\/cc\n/);
    expect(notAsked).toEqual([]);
    expect(tooLong.requests("approveSpend")).toEqual([]);
  });

  it("issues nothing when the person declines or unticks confirm, and declines the request for good", async () => {
    for (const answer of [{ action: "decline" }, { action: "accept", content: { confirm: false } }] as ElicitResult[]) {
      const ledger = recordingLedger();
      const c = await connectWithUser(ledger, answer);
      const out = ok<{ human: unknown; decline_seq: number; next_step: string }>(await c.call("approve_spend", { request_seq: 7 }));
      expect(out.human).toEqual({ answer: "declined", via: "elicitation" });
      expect(out.decline_seq).toBe(9);
      expect(out.next_step).toMatch(/nothing was approved or issued, and the request will never run/);
      expect(ledger.requests("approveSpend")).toEqual([]);
      // The decline is the request's answer in the ledger, so no one approves it afterwards.
      expect(ledger.requests("declineSpend")).toEqual([expect.objectContaining({ requestSeq: 7n, approvedVia: "elicitation" })]);
      expect(ledger.requests("append")).toEqual([]);
    }
  });

  it("issues and records nothing when the person dismisses the question", async () => {
    const ledger = recordingLedger();
    const c = await connectWithUser(ledger, { action: "cancel" });
    const out = ok<{ human: unknown; next_step: string }>(await c.call("approve_spend", { request_seq: 7 }));
    expect(out.human).toEqual({ answer: "cancelled", via: "elicitation" });
    expect(out.next_step).toContain('approve_spend {"request_seq": 7}');
    expect(ledger.calls.map((x) => x.method)).toEqual(["getSpendRequest"]);
  });

  it("refuses an answer without the confirm field", async () => {
    const ledger = recordingLedger();
    const c = await connectWithUser(ledger, { action: "accept", content: { approve: true } });
    expect(refused(await c.call("approve_spend", { request_seq: 7 })).code).toBe("invalid_argument");
    expect(ledger.requests("approveSpend")).toEqual([]);
  });

  it("does not ask about a request the ledger does not hold", async () => {
    const ledger = recordingLedger();
    const asked: string[] = [];
    const c = await connectWithUser(ledger, { action: "accept", content: { confirm: true } }, asked);
    const error = refused(await c.call("approve_spend", { request_seq: 42 }));
    expect(error.code).toBe("not_found");
    expect(error.message).toMatch(/no ledger entry 42/);
    expect(asked).toEqual([]);
    expect(ledger.requests("approveSpend")).toEqual([]);
  });
});

describe("approve_spend by the requester once a person answered", () => {
  it("collects the approval another channel gave and hands over the receipt, asking no one and approving nothing", async () => {
    const ledger = recordingLedger(storedRequest({ state: "APPROVED", answeredBy: "operator", answerChannel: "operator", answerSeq: 8n }));
    const asked: string[] = [];
    const c = await connectWithUser(ledger, { action: "accept", content: { confirm: true } }, asked);
    const out = ok<{ human: unknown; receipt: unknown; approved_by: string; channel: string; collect_seq: number; ledger_seq: number; next_step: string }>(
      await c.call("approve_spend", { request_seq: 7, ttl_seconds: 60 }),
    );
    expect(out).toMatchObject({ human: { answer: "confirmed", via: "operator" }, approved_by: "operator", channel: "operator", collect_seq: 13, ledger_seq: 8 });
    expect(out.receipt).toMatchObject({ kind: "authorization", tool: "wire_treasury_transfer" });
    expect(out.next_step).toMatch(/pass it whole as "receipt" to wire_treasury_transfer with the same arguments before 2025-06-01T12:05:00.000Z/);
    expect(asked).toEqual([]);
    expect(ledger.requests("collectSpendApproval")).toEqual([expect.objectContaining({ requestSeq: 7n, ttlSeconds: 60 })]);
    expect(ledger.requests("approveSpend")).toEqual([]);
  });
});

describe("without a role or elicitation", () => {
  it("approve_spend answers approval_required naming every way a person can approve it here, and approves nothing", async () => {
    const ledger = recordingLedger();
    const c = await connectWithUser(ledger);
    const error = refused(await c.call("approve_spend", { request_seq: 7 }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toMatch(/no person has answered spend request 7 yet/);
    expect(error.message).toContain('- approver: someone holding the approver role calls approve_spend {"request_seq": 7} with their own API key');
    // This server runs no operator endpoint and this client cannot be asked: neither is offered.
    expect(error.message).not.toMatch(/- operator|- client_elicitation/);
    expect(error.message).toContain('your next approve_spend {"request_seq": 7} (or wire_treasury_transfer with exactly the same arguments) receives the receipt');
    // The attempt still reaches the ledger, which records it (and would hand over an approval given meanwhile).
    expect(ledger.calls.map((x) => x.method)).toEqual(["getSpendRequest", "collectSpendApproval"]);
    expect(error.message).toContain("This attempt is recorded in ledger entry 9.");
  });

  it("where the operator's endpoint runs, the exact command is one of the ways", async () => {
    const ledger = recordingLedger();
    const deps: EdgeDeps = { ...services.deps(), ledger: ledger.client, operator: { dataDir: "/srv/chaos core" } };
    const c = await connectInMemory(deps, { tenant: "acme", principal: "agent" });
    open.push(c);
    const error = refused(await c.call("approve_spend", { request_seq: 7 }));
    expect(error.message).toContain("- operator: the operator of this server runs chaos-core approvals approve-spend 7 --tenant acme --data-dir '/srv/chaos core'");
  });

  it("answers issue_approval_receipt approval_required, naming who can decide it here, and issues nothing", async () => {
    const ledger = recordingLedger();
    const c = await connectWithUser(ledger);
    for (const decision of ["allow", "deny"]) {
      const error = refused(await c.call("issue_approval_receipt", { request_seq: 7, call, decision }));
      expect(error.code, decision).toBe("approval_required");
      expect(error.message, decision).toMatch(/this client cannot ask its user \(it did not declare elicitation\)/);
      expect(error.message, decision).toContain(
        `- approver: someone holding the approver role calls issue_approval_receipt {"request_seq": 7, "call": <the same call>, "decision": "${decision}"} with their own API key`,
      );
    }
    // Only the recorded request was read.
    expect(ledger.requests("issueReceipt")).toEqual([]);
    expect(ledger.requests("append")).toEqual([]);
  });

  it("does not let an argument stand in for a person", async () => {
    const ledger = recordingLedger();
    const c = await connectWithUser(ledger);
    expect((await c.call("approve_spend", { request_seq: 7, approved: true })).isError).toBe(true);
    expect((await c.call("issue_approval_receipt", { request_seq: 7, call, decision: "allow", confirmed: true })).isError).toBe(true);
    expect(ledger.calls).toEqual([]);
  });
});

describe("issue_approval_receipt through elicitation", () => {
  it("shows the call and the recorded request, and never sends a step binding", async () => {
    const ledger = recordingLedger();
    const asked: string[] = [];
    const c = await connectWithUser(ledger, { action: "accept", content: { confirm: true } }, asked);
    const out = ok<{ human: unknown; receipt: unknown; ledger_seq: number; next_step: string }>(
      await c.call("issue_approval_receipt", { request_seq: 7, call, decision: "allow", ttl_seconds: 60, reason: "invoice INV-104" }),
    );
    expect(out).toMatchObject({ human: { answer: "confirmed", via: "elicitation" }, ledger_seq: 10 });
    expect(out.receipt).toEqual({ kind: "chaoscore.tool_approval_receipt" });
    expect(out.next_step).toMatch(/authorize_tool_call/);
    expect(asked[0]).toContain("ALLOW one tool call");
    expect(asked[0]).toContain("Tool call stripe.create_charge on acct_live_acme (risk medium), requested in ledger entry 7");
    expect(asked[0]).toContain("\n  amount = 2500\n");
    expect(asked[0]).toContain('\n  currency = "usd"\n');
    expect(asked[0]).toContain("Ledger entry 7");
    expect(asked[0]).toContain("valid for 60 seconds");
    const [sent] = ledger.requests("issueReceipt");
    expect(sent).toMatchObject({
      call: { tool: call.tool, resource: call.resource, arguments: call.arguments },
      decision: "allow",
      ttlSeconds: 60,
      approvedVia: "elicitation",
      requestSeq: 7n,
      reason: "invoice INV-104",
    });
    expect(sent!.step).toBeUndefined();
  });

  it("shows a long call whole, every argument by its path, never cut", async () => {
    const ledger = recordingLedger();
    const asked: string[] = [];
    const c = await connectWithUser(ledger, { action: "accept", content: { confirm: true } }, asked);
    const description = `invoice INV-104 ${"x".repeat(4500)} END-OF-DESCRIPTION`;
    ok(await c.call("issue_approval_receipt", { request_seq: 7, call: { ...call, arguments: { ...call.arguments, description } }, decision: "allow" }));
    expect(asked[0]).toContain(`\n  description = ${JSON.stringify(description)}\n`);
    expect(asked[0]).not.toMatch(/cut/);
  });
});

describe("where policy does not accept the client's own answer", () => {
  const autoAccept: ElicitResult = { action: "accept", content: { confirm: true } };

  it("approve_spend does not ask a client that would auto-accept, records the attempt and names only the channels policy allows", async () => {
    const ledger = recordingLedger(storedRequest({ channels: ["approver", "operator", "console"], channelsRule: "approvalChannels.spend.default" }));
    const asked: string[] = [];
    const c = await connectWithUser(ledger, autoAccept, asked, { dataDir: "/srv/cc" });
    const error = refused(await c.call("approve_spend", { request_seq: 7 }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toContain(
      "no person has answered spend request 7 yet, and policy does not accept an answer from this client for it " +
        "(wire_treasury_transfer, spend policy wire, rule approvalChannels.spend.default)",
    );
    expect(error.message).toContain('- approver: someone holding the approver role calls approve_spend {"request_seq": 7}');
    expect(error.message).toMatch(/- operator: the operator of this server runs chaos-core approvals approve-spend 7 --tenant gov-human-\S+ --data-dir \/srv\/cc\n/);
    expect(error.message).not.toMatch(/- client_elicitation/);
    expect(asked).toEqual([]);
    expect(ledger.calls.map((x) => x.method)).toEqual(["getSpendRequest", "collectSpendApproval"]);
    expect(ledger.requests("approveSpend")).toEqual([]);
    expect(ledger.requests("declineSpend")).toEqual([]);
  });

  it("issue_approval_receipt at high risk does not ask a client that would auto-accept, and names the approver", async () => {
    const ledger = recordingLedger(storedRequest(), { ...RECORDED_EVENT, risk: "high" });
    const asked: string[] = [];
    const c = await connectWithUser(ledger, autoAccept, asked);
    const error = refused(await c.call("issue_approval_receipt", { request_seq: 7, call, decision: "allow" }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toContain(
      "policy does not accept an answer from this client for it (a receipt for stripe.create_charge at risk high, rule approvalChannels.byRisk.high)",
    );
    expect(error.message).toContain('- approver: someone holding the approver role calls issue_approval_receipt {"request_seq": 7');
    expect(error.message).not.toMatch(/- client_elicitation|- operator/);
    expect(asked).toEqual([]);
    expect(ledger.requests("issueReceipt")).toEqual([]);
  });
});

describe("what the edge forwards for a gated call", () => {
  it("sends a call without a receipt to the ledger, to be recorded as a denial", async () => {
    const ledger = recordingLedger();
    const c = await connectWithUser(ledger);
    const out = ok<{ status: string; code: string; next_step: string }>(await c.call("authorize_tool_call", { call }));
    expect(out).toMatchObject({ status: "DENIED", code: "allowlist_is_not_authorization" });
    expect(out.next_step).toMatch(/evaluate_tool_approval/);
    const [sent] = ledger.requests("authorize");
    expect(sent!.receipt).toBeUndefined();
    expect(sent!.step).toBeUndefined();
  });

  it("hashes exactly the model arguments: the receipt travels beside them, never inside", async () => {
    const ledger = recordingLedger();
    const c = await connectWithUser(ledger);
    const args = { symbol: "AAPL", side: "BUY", quantity: 10, notional: 300 };
    const bare = ok<{ code: string; next_step: string; synthetic: boolean }>(await c.call("place_equity_order", args));
    expect(bare).toMatchObject({ code: "missing_receipt", synthetic: true });
    expect(bare.next_step).toContain(`request_authorization {"tool": "place_equity_order", "args": ${JSON.stringify(args)}}`);
    ok(await c.call("place_equity_order", { ...args, receipt: { kind: "authorization", nonce: "n" } }));
    const [first, second] = ledger.requests("executeReferenceTool");
    expect(first).toMatchObject({ tool: "place_equity_order", arguments: args });
    expect(first!.receipt).toBeUndefined();
    expect(second).toMatchObject({ tool: "place_equity_order", arguments: args, receipt: { kind: "authorization", nonce: "n" } });
    expect(second!.arguments).not.toHaveProperty("receipt");
  });
});

describe("over HTTP with API keys", () => {
  const keys = { agent: randomBytes(24).toString("base64url"), alice: randomBytes(24).toString("base64url") };
  const tenant = `gov-${randomBytes(3).toString("hex")}`;
  const ledger = recordingLedger();
  let edge: RunningHttpTransport;
  const clients: Client[] = [];

  beforeAll(async () => {
    edge = await startHttpTransport(
      { ...services.deps(), ledger: ledger.client },
      {
        port: 0,
        apiKeys: [
          { tenant, principal: "agent", sha256: hashApiKey(keys.agent) },
          { tenant, principal: "alice", sha256: hashApiKey(keys.alice), roles: ["approver"] },
        ],
      },
    );
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

  it("sends approved_via approver_role only for a key that holds the role", async () => {
    const agent = await as(keys.agent);
    expect(refused(await callTool(agent, "approve_spend", { request_seq: 7 })).code).toBe("approval_required");
    expect(ledger.requests("approveSpend")).toEqual([]);

    const alice = await as(keys.alice);
    const out = ok(await callTool(alice, "approve_spend", { request_seq: 7 }));
    expect(out).toMatchObject({ human: { answer: "confirmed", via: "approver_role" }, state: "LOCKED", receipt_pending: true });
    expect(out.receipt).toBeUndefined();
    expect(out.next_step).toMatch(/The requester, agent, receives it with their next approve_spend \{"request_seq": 7\}/);
    expect(ledger.requests("approveSpend")).toEqual([expect.objectContaining({ requestSeq: 7n, approvedVia: "approver_role" })]);
    expect(ledger.calls.find((x) => x.method === "approveSpend")!.call).toMatchObject({ tenant, principal: "alice" });

    ok(await callTool(alice, "issue_approval_receipt", { request_seq: 7, call, decision: "deny" }));
    expect(ledger.requests("issueReceipt").at(-1)).toMatchObject({ decision: "deny", approvedVia: "approver_role" });
  });
});

describe("on 2026-07-28: the client's user is asked through multi-round-trip results", () => {
  const key = randomBytes(24).toString("base64url");
  const tenant = `gov-mrtr-${randomBytes(3).toString("hex")}`;
  const headers = { authorization: `Bearer ${key}` };
  const keyring = parseMrtrKeyring(newMrtrKeyringFile(), "test");
  const edges: RunningHttpTransport[] = [];
  const clients: V2Client[] = [];

  afterAll(async () => {
    for (const c of clients) await c.close();
    for (const e of edges) await e.close();
  });

  /** The recording ledger with the single use the real one enforces (each jti once), and refusals recorded. */
  function mrtrLedger(request: Record<string, unknown> = storedRequest()): RecordingLedger {
    const seen = new Set<string>();
    // The same fixed answers as the 2025 tests, plus the two MRTR RPCs.
    return recordingLedger(request, RECORDED_EVENT, {
      consumeRequestState: async (req) => {
        const first = !seen.has(req.jti);
        seen.add(req.jti);
        return { consumed: first, code: first ? "consumed" : "already_consumed", entrySeq: 20n };
      },
      recordRequestStateRefusal: async () => ({ entrySeq: 21n }),
    });
  }

  async function edgeWith(ledger: RecordingLedger, options: Parameters<typeof modernClient>[1]): Promise<V2Client> {
    const edge = await startHttpTransport(
      { ...services.deps(), ledger: ledger.client, mrtrKeyring: keyring },
      { host: "127.0.0.1", port: 0, apiKeys: [{ tenant, principal: "agent", sha256: hashApiKey(key) }] },
    );
    edges.push(edge);
    const c = await modernClient(edge.url, { headers, ...options });
    clients.push(c);
    return c;
  }
  const callTool = async (c: V2Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as CallToolResult;

  it("approve_spend, auto-fulfilled: shows the stored request, consumes the state once, then sends approved_via elicitation from the flow's request", async () => {
    const ledger = mrtrLedger();
    const asked: string[] = [];
    const c = await edgeWith(ledger, { answer: { action: "accept", content: { confirm: true } }, asked });
    const out = ok<{ human: unknown; state: string; channel: string }>(await callTool(c, "approve_spend", { request_seq: 7, ttl_seconds: 120 }));
    expect(out).toMatchObject({ human: { answer: "confirmed", via: "elicitation" }, state: "LOCKED", channel: "client_elicitation" });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain(`\n  memo = ${JSON.stringify(STORED_WIRE.memo)}\n`);
    expect(ledger.requests("consumeRequestState")).toEqual([expect.objectContaining({ tool: "approve_spend" })]);
    expect(ledger.requests("approveSpend")).toEqual([expect.objectContaining({ requestSeq: 7n, approvedVia: "elicitation", ttlSeconds: 120 })]);
    // Both rounds carry the flow's ref, the one the state was consumed under; there is no session.
    const consumedUnder = ledger.calls.find((x) => x.method === "consumeRequestState")!.call;
    const approvedUnder = ledger.calls.find((x) => x.method === "approveSpend")!.call;
    expect(approvedUnder.sessionId).toBeUndefined();
    expect(approvedUnder.requestRef).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(approvedUnder.requestRef).toBe(consumedUnder.requestRef);
    expect(ledger.requests("consumeRequestState")[0]).toMatchObject({ flow: approvedUnder.requestRef });
  });

  it("approve_spend, manual: the first round approves nothing; a decline in the retry declines for good; a replay runs nothing", async () => {
    const ledger = mrtrLedger();
    const c = await edgeWith(ledger, { answer: { action: "decline" }, autoFulfill: false });
    const first = (await c.callTool({ name: "approve_spend", arguments: { request_seq: 7 } }, { allowInputRequired: true })) as unknown as WireResult;
    expect(first.resultType).toBe("input_required");
    expect(Object.keys(first.inputRequests!)).toEqual(["confirm"]);
    expect(String(first.inputRequests!["confirm"]!.params["message"])).toContain("Spend request at ledger entry 7");
    expect(ledger.requests("approveSpend")).toEqual([]);
    expect(ledger.requests("declineSpend")).toEqual([]);

    const retry = retryParams("approve_spend", { request_seq: 7 }, { inputResponses: { confirm: { action: "decline" } }, requestState: first.requestState });
    const out = ok<{ human: unknown; decline_seq: number }>((await c.callTool(retry, { allowInputRequired: true })) as CallToolResult);
    expect(out).toMatchObject({ human: { answer: "declined", via: "elicitation" }, decline_seq: 9 });
    expect(ledger.requests("declineSpend")).toHaveLength(1);

    const replay = refused((await c.callTool(retry, { allowInputRequired: true })) as CallToolResult);
    expect(replay.message).toMatch(/already used/);
    expect(ledger.requests("declineSpend")).toHaveLength(1);
    expect(ledger.requests("approveSpend")).toEqual([]);
  });

  it("issue_approval_receipt, auto-fulfilled: shows the call and the recorded request, then issues with approved_via elicitation", async () => {
    const ledger = mrtrLedger();
    const asked: string[] = [];
    const c = await edgeWith(ledger, { answer: { action: "accept", content: { confirm: true } }, asked });
    const out = ok<{ human: unknown; ledger_seq: number }>(await callTool(c, "issue_approval_receipt", { request_seq: 7, call, decision: "allow", ttl_seconds: 60 }));
    expect(out).toMatchObject({ human: { answer: "confirmed", via: "elicitation" }, ledger_seq: 10 });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("ALLOW one tool call");
    expect(asked[0]).toContain("\n  amount = 2500\n");
    expect(ledger.requests("issueReceipt")).toEqual([expect.objectContaining({ decision: "allow", approvedVia: "elicitation", requestSeq: 7n })]);
    expect(ledger.requests("consumeRequestState")).toEqual([expect.objectContaining({ tool: "issue_approval_receipt" })]);
  });

  it("issue_approval_receipt with other arguments in the retry: the state is refused and recorded, nothing is issued", async () => {
    const ledger = mrtrLedger();
    const c = await edgeWith(ledger, { answer: { action: "accept", content: { confirm: true } }, autoFulfill: false });
    const args = { request_seq: 7, call, decision: "allow" };
    const first = (await c.callTool({ name: "issue_approval_receipt", arguments: args }, { allowInputRequired: true })) as unknown as WireResult;
    expect(first.resultType).toBe("input_required");
    const other = { ...args, call: { ...call, arguments: { ...call.arguments, amount: 250_000 } } };
    const res = refused(
      (await c.callTool(
        retryParams("issue_approval_receipt", other, { inputResponses: { confirm: { action: "accept", content: { confirm: true } } }, requestState: first.requestState }),
        { allowInputRequired: true },
      )) as CallToolResult,
    );
    expect(res.code).toBe("failed_precondition");
    expect(res.message).toMatch(/belongs to another call \(other arguments\): nothing ran/);
    expect(ledger.requests("recordRequestStateRefusal")).toEqual([expect.objectContaining({ reason: "digest", tool: "issue_approval_receipt" })]);
    expect(ledger.requests("consumeRequestState")).toEqual([]);
    expect(ledger.requests("issueReceipt")).toEqual([]);
  });
});
