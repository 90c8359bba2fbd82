import { describe, expect, it } from "vitest";
import type { LedgerEntry } from "../log/entry.js";
import { notifies, spendRequestSeqOf, webhookEventOf, type SpendRequestFacts } from "./events.js";

const TS = "2026-03-01T12:00:00.000Z";

function entry(seq: number, event: Record<string, unknown>, principal = "agent@acme", session = "mcp-session-4f1c"): LedgerEntry {
  return { seq, ts: TS, tenant: "acme", session, principal, event, content_hash: "h", prev_sig: "p", sig: "s" };
}

const APPROVAL_ID = "6f1c2a9e-3b7d-4c1a-9e2f-0a1b2c3d4e5f";

/** Cognition's pending outcome, as its audit sink appends it. */
const pendingStep = {
  type: "step.outcome",
  stepId: "s1",
  capability: "http.request",
  status: "pending_approval",
  ran: false,
  succeeded: false,
  argsHash: "a".repeat(64),
  approvalId: APPROVAL_ID,
  risk: "high",
  approvalExpiresAt: "2026-03-02T12:00:00.000Z",
  approvalChannels: ["approver", "operator", "console"],
};

const request: SpendRequestFacts = {
  requestSeq: 12,
  policy: "wire",
  tool: "wire_treasury_transfer",
  argsHash: "b".repeat(64),
  requestedBy: "agent@acme",
  createdAt: new Date(TS),
  channels: ["approver", "operator", "console"],
};

describe("webhookEventOf: a step", () => {
  it("a pending approval: every field the ledger recorded, and the console link", () => {
    expect(webhookEventOf(entry(5, pendingStep), { publicUrl: "https://chaos.example.com" })).toEqual({
      type: "approval.pending",
      timestamp: TS,
      data: {
        tenant: "acme",
        kind: "step",
        approval_id: APPROVAL_ID,
        ledger_seq: 5,
        capability: "http.request",
        risk: "high",
        requested_by: "agent@acme",
        expires_at: "2026-03-02T12:00:00.000Z",
        channels: ["approver", "operator", "console"],
        console_url: `https://chaos.example.com/approvals/step/${APPROVAL_ID}`,
        args_hash: "a".repeat(64),
      },
    });
  });

  it("has no console link without a public URL", () => {
    expect(webhookEventOf(entry(5, pendingStep))?.data).not.toHaveProperty("console_url");
  });

  it("an answer: the outcome, the channel and the resolver's principal — never resolvedBy, which names the MCP session", () => {
    const resolution = {
      type: "approval.resolution",
      approvalId: APPROVAL_ID,
      capability: "http.request",
      argsHash: "a".repeat(64),
      approved: false,
      channel: "client_elicitation",
      principal: "agent@acme",
      resolvedBy: "human via elicitation in session mcp-session-4f1c",
    };
    const event = webhookEventOf(entry(9, resolution, "agent@acme"), { publicUrl: "https://chaos.example.com" });
    expect(event).toEqual({
      type: "approval.resolved",
      timestamp: TS,
      data: {
        tenant: "acme",
        kind: "step",
        approval_id: APPROVAL_ID,
        ledger_seq: 9,
        capability: "http.request",
        console_url: `https://chaos.example.com/approvals/step/${APPROVAL_ID}`,
        args_hash: "a".repeat(64),
        outcome: "rejected",
        channel: "client_elicitation",
        resolved_by: "agent@acme",
      },
    });
    expect(JSON.stringify(event)).not.toContain("mcp-session-4f1c");
    expect(webhookEventOf(entry(9, { ...resolution, approved: true, channel: "console", principal: "alice" }, "alice"))?.data).toMatchObject({
      outcome: "approved",
      channel: "console",
      resolved_by: "alice",
    });
  });

  it("nothing for the other outcomes and decisions", () => {
    for (const status of ["executed", "failed", "denied"]) expect(webhookEventOf(entry(5, { ...pendingStep, status }))).toBeUndefined();
    expect(webhookEventOf(entry(5, { type: "step.decision", capability: "http.request" }))).toBeUndefined();
    expect(webhookEventOf(entry(5, { type: "approval.refused", approvalId: APPROVAL_ID }))).toBeUndefined();
    // A pending outcome without an approval id names nothing a person could answer.
    const { approvalId: _none, ...withoutId } = pendingStep;
    expect(webhookEventOf(entry(5, withoutId))).toBeUndefined();
  });
});

describe("webhookEventOf: a spend or a finance call", () => {
  const heldWire = {
    type: "reference.requested",
    tool: "wire_treasury_transfer",
    scope: "treasury",
    args_hash: "b".repeat(64),
    policy: "wire",
    policy_version: "wire-1",
    action: { action: "WIRE", asset: "EUR", notional: 1200 },
    status: "HITL_REQUIRED",
    state: "HITL_REQUIRED",
    approval_channels: ["approver", "operator", "console"],
    channels_rule: "approvalChannels.spend.default",
  };

  it("a held request: its tool, policy, expiry from the stored request, channels, and the console link; never the action", () => {
    const event = webhookEventOf(entry(12, heldWire), { publicUrl: "https://chaos.example.com/cc", request: { ...request, createdAt: new Date("2026-03-01T11:59:59.990Z") } });
    expect(event).toEqual({
      type: "approval.pending",
      timestamp: TS,
      data: {
        tenant: "acme",
        kind: "spend",
        request_seq: 12,
        ledger_seq: 12,
        tool: "wire_treasury_transfer",
        spend_policy: "wire",
        requested_by: "agent@acme",
        expires_at: "2026-03-02T11:59:59.990Z",
        channels: ["approver", "operator", "console"],
        console_url: "https://chaos.example.com/cc/approvals/spend/12",
        args_hash: "b".repeat(64),
      },
    });
    expect(JSON.stringify(event)).not.toMatch(/WIRE|1200|treasury"/);
  });

  it("a held plain spend has no tool; a spend that locked or was blocked is no approval", () => {
    const spend = { type: "spend_gate.evaluated", policy: "equity", state: "HITL_REQUIRED", args_hash: "c".repeat(64), approval_channels: ["approver"] };
    expect(webhookEventOf(entry(3, spend))?.data).toMatchObject({ kind: "spend", request_seq: 3, spend_policy: "equity", channels: ["approver"], expires_at: "2026-03-02T12:00:00.000Z" });
    expect(webhookEventOf(entry(3, spend))?.data).not.toHaveProperty("tool");
    expect(webhookEventOf(entry(3, { ...spend, state: "LOCKED" }))).toBeUndefined();
    expect(webhookEventOf(entry(3, { ...heldWire, status: "AUTHORIZED", state: "LOCKED" }))).toBeUndefined();
  });

  it("an approval, a gate that blocks on re-evaluation and a decline, with the request's facts", () => {
    const approved = {
      type: "spend.approved",
      request_seq: 12,
      approver: "console:alice",
      approved_via: "console",
      channel: "console",
      requester: "agent@acme",
      policy: "wire",
      state: "LOCKED",
      action: { action: "WIRE", asset: "EUR", notional: 1200 },
      receipt_nonce: "nonce-0123456789",
    };
    const event = webhookEventOf(entry(14, approved, "alice"), { request });
    expect(event).toEqual({
      type: "approval.resolved",
      timestamp: TS,
      data: {
        tenant: "acme",
        kind: "spend",
        request_seq: 12,
        ledger_seq: 14,
        tool: "wire_treasury_transfer",
        spend_policy: "wire",
        requested_by: "agent@acme",
        expires_at: "2026-03-02T12:00:00.000Z",
        channels: ["approver", "operator", "console"],
        args_hash: "b".repeat(64),
        outcome: "approved",
        channel: "console",
        resolved_by: "console:alice",
      },
    });
    expect(JSON.stringify(event)).not.toMatch(/nonce-0123456789|WIRE/);
    expect(webhookEventOf(entry(14, { ...approved, state: "BLOCKED" }), { request })?.data).toMatchObject({ outcome: "blocked" });
    const declined = { type: "spend.declined", request_seq: 12, declined_by: "operator", channel: "operator", reason: "unknown beneficiary" };
    expect(webhookEventOf(entry(15, declined, "operator"), { request })?.data).toMatchObject({ outcome: "rejected", channel: "operator", resolved_by: "operator", tool: "wire_treasury_transfer" });
    expect(JSON.stringify(webhookEventOf(entry(15, declined), { request }))).not.toContain("unknown beneficiary");
  });

  it("an answer whose request could not be read still names it, with what the answer records", () => {
    const declined = { type: "spend.declined", request_seq: 12, declined_by: "operator", channel: "operator" };
    expect(webhookEventOf(entry(15, declined))?.data).toEqual({ tenant: "acme", kind: "spend", request_seq: 12, ledger_seq: 15, outcome: "rejected", channel: "operator", resolved_by: "operator" });
  });

  it("refusals, collections and the rest are no event", () => {
    for (const type of ["spend.approval_refused", "spend.decline_refused", "spend.collected", "spend.collect_refused", "reference.executed", "receipt.issued"]) {
      expect(notifies({ type, request_seq: 12 }), type).toBe(false);
      expect(webhookEventOf(entry(16, { type, request_seq: 12 }), { request }), type).toBeUndefined();
    }
  });
});

describe("spendRequestSeqOf", () => {
  it("names the request an entry asks for or answers", () => {
    expect(spendRequestSeqOf(entry(4, { type: "spend_gate.evaluated", state: "HITL_REQUIRED" }))).toBe(4);
    expect(spendRequestSeqOf(entry(8, { type: "spend.approved", request_seq: 4 }))).toBe(4);
    expect(spendRequestSeqOf(entry(8, { type: "spend.declined", request_seq: 4 }))).toBe(4);
    expect(spendRequestSeqOf(entry(8, { type: "spend.declined", request_seq: "4" }))).toBeUndefined();
    expect(spendRequestSeqOf(entry(8, pendingStep))).toBeUndefined();
  });
});
