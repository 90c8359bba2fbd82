import { chpFloat, isChpFloat } from "@chaos-core/kit";
import type { ChannelDecision } from "../adapters/approval-channels.js";
import type { Receipt } from "../authz/receipt.js";
import type { GateResult, SpendAction } from "../domain/spend-gate.js";
import type { SpendPolicyConfig } from "../domain/spend-policies.js";
import type { LedgerEntry } from "../log/entry.js";
import { toPlainJson } from "./plain-json.js";
import { CHANNEL_OF_VIA } from "./spend-requests.js";

// A spend gate decision as its ledger entry records it and a reply shows it: one shape for the
// spend gate, a person's approval and the finance tools' requests.

/** The gate's action as hashed and recorded: gate numbers are CHP floats. */
export function recordedAction(a: SpendAction): Record<string, unknown> {
  const n = (v: unknown) => (isChpFloat(v) ? v : chpFloat(Number(v)));
  return { action: a.action, asset: a.asset, notional: n(a.notional), confidence: a.confidence == null ? null : n(a.confidence) };
}

/** A gate decision as its entry records it; `message` is domain `decisionInWords`, what the answer says. */
export function gateFields(g: GateResult, message: string | undefined): Record<string, unknown> {
  return {
    state: g.state,
    reason: g.reason,
    failed_rules: [...g.failed_rules],
    claims: g.claims.map((c) => ({ ...c })),
    committed_delta: chpFloat(g.committed_delta),
    content_hash: g.content_hash,
    reason_code: g.state === "BLOCKED" ? "policy_deny" : null,
    ...(message !== undefined ? { message } : {}),
  };
}

/**
 * What a request entry records about who may answer it: the channels policy allowed when it was
 * made and the rule that chose them (an answer is checked again when it is given).
 */
export function requestedChannels(d: ChannelDecision): Record<string, unknown> {
  return { approval_channels: [...d.channels], channels_rule: d.matchedRule, channels_policy_version: d.policyVersion };
}

/** What the gate answered, for a reply. */
export interface GateReply {
  readonly state: string;
  readonly contentHash: string;
  readonly result: Record<string, unknown>;
  readonly entry: LedgerEntry;
  readonly receipt?: Receipt;
  /** HITL_REQUIRED: the channels policy allows for the request, as stored with it. */
  readonly channels?: readonly string[];
}

/** A gate decision as a reply shows it; `message` (domain `decisionInWords`) names the caps that decided it. */
export function gateReply(entry: LedgerEntry, gate: GateResult, committed: number, policy: SpendPolicyConfig, message: string | undefined, receipt?: Receipt): GateReply {
  return {
    state: gate.state,
    contentHash: gate.content_hash,
    result: {
      state: gate.state,
      allowed: gate.allowed,
      requires_human: gate.requires_human,
      reason: gate.reason,
      claims: gate.claims.map((c) => ({ ...c })),
      failed_rules: [...gate.failed_rules],
      committed_today: committed,
      committed_delta: gate.committed_delta,
      content_hash: gate.content_hash,
      provenance: toPlainJson(gate.provenance),
      policy: { ...policy },
      ledger_seq: entry.seq,
      ...(message !== undefined ? { message } : {}),
    },
    entry,
    ...(receipt ? { receipt } : {}),
  };
}

/** The gate result an approval recorded, as a reply shows it. */
export function approvalResult(approval: Record<string, unknown>, approvalSeq: number, policy: SpendPolicyConfig): Record<string, unknown> {
  return {
    state: approval.state,
    reason: approval.reason,
    claims: approval.claims,
    failed_rules: approval.failed_rules,
    committed_today: approval.committed_today,
    committed_delta: approval.committed_delta,
    content_hash: approval.content_hash,
    policy: { ...policy },
    approved_by: approval.approver,
    channel: approval.channel ?? CHANNEL_OF_VIA[approval.approved_via === "elicitation" ? "elicitation" : "approver_role"],
    ledger_seq: approvalSeq,
  };
}
