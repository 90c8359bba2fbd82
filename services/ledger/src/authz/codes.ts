/**
 * The authorization check chain's outcomes, in check order: the first failing check decides.
 * Codes are stable (clients branch on them, `chp_version` lists them); a new check gets a new
 * code, an existing code never changes meaning.
 */
export const AUTHORIZATION_CODES = [
  { code: "ambiguous_policy", step: "policy", meaning: "the tool-approval policy is missing, malformed or not concrete (wildcards, no exact version, a host-bound field without a host value)" },
  { code: "ambiguous_call", step: "inspection", meaning: "the call is not one concrete call: empty or wildcard tool or resource, missing or non-JSON arguments, an unknown field" },
  { code: "tool_not_allowlisted", step: "inspection", meaning: "the tool is not in the policy" },
  { code: "resource_not_allowlisted", step: "inspection", meaning: "the resource is not one the policy lists for this tool" },
  { code: "host_bound_override", step: "inspection", meaning: "the model set a host-bound argument to a value other than the host's" },
  { code: "allowlist_is_not_authorization", step: "receipt", meaning: "the call is allowlisted but no receipt was presented; an allowlist is not an authorization" },
  { code: "malformed_receipt", step: "schema", meaning: "the receipt does not match the receipt schema (missing, extra or malformed fields)" },
  { code: "unknown_key", step: "signature", meaning: "the receipt's kid is not in the keyring (never known, or rotated out)" },
  { code: "bad_signature", step: "signature", meaning: "the receipt's signature does not match its fields (tampered or forged)" },
  { code: "replayed_receipt", step: "replay", meaning: "the receipt's nonce was already consumed" },
  { code: "receipt_not_yet_valid", step: "not_before", meaning: "the receipt was issued in the future, beyond the allowed clock skew" },
  { code: "expired_receipt", step: "expiry", meaning: "the receipt has expired; its nonce is consumed so a clock set back cannot revive it" },
  { code: "human_denied", step: "decision", meaning: "the human's decision on this receipt is deny" },
  { code: "policy_version_mismatch", step: "policy_version", meaning: "the receipt was issued under another policy version than the current one" },
  { code: "tenant_mismatch", step: "binding", meaning: "the receipt belongs to another tenant than the verified caller" },
  { code: "binding_mismatch", step: "binding", meaning: "the receipt is for another kind, tool or resource" },
  { code: "changed_arguments", step: "arguments", meaning: "the call's arguments (host-bound included) differ from those approved" },
  { code: "risk_mismatch", step: "risk", meaning: "the receipt's risk differs from the risk the policy gives the tool" },
  { code: "AUTHORIZED", step: "authorized", meaning: "every check passed; the receipt's nonce is consumed" },
] as const;

/** Every outcome of the check chain: a denial code or `AUTHORIZED`. */
export type AuthorizationCode = (typeof AUTHORIZATION_CODES)[number]["code"];

/** A denial code of the check chain. */
export type DenyCode = Exclude<AuthorizationCode, "AUTHORIZED">;

/** The name of a check in the chain, as recorded in the ledger entry. */
export type AuthorizationStep = (typeof AUTHORIZATION_CODES)[number]["step"];

const STEP_OF = new Map<AuthorizationCode, AuthorizationStep>(AUTHORIZATION_CODES.map((c) => [c.code, c.step]));

/** The check that produces `code`. */
export function stepOf(code: AuthorizationCode): AuthorizationStep {
  return STEP_OF.get(code)!;
}

/**
 * Why a receipt was not issued. Inspection codes come first (a call that would be denied gets
 * no receipt, allow or deny), then the rules about who may decide and for how long.
 */
export const ISSUE_REFUSAL_CODES = [
  { code: "ambiguous_policy", meaning: "the tool-approval policy is missing, malformed or not concrete" },
  { code: "ambiguous_call", meaning: "the call is not one concrete call" },
  { code: "tool_not_allowlisted", meaning: "the tool is not in the policy" },
  { code: "resource_not_allowlisted", meaning: "the resource is not one the policy lists for this tool" },
  { code: "host_bound_override", meaning: "the model set a host-bound argument to a value other than the host's" },
  { code: "ambiguous_actor", meaning: "the deciding actor or the requester is empty or a wildcard" },
  { code: "not_an_approver", meaning: "the actor does not hold the approver role" },
  { code: "self_approval", meaning: "the approver is the principal that requested the call" },
  { code: "invalid_ttl", meaning: "ttl_seconds is not a whole number within the allowed range" },
] as const;

/**
 * Why a human's answer to a recorded request (IssueReceipt with `request_seq`, ApproveSpend)
 * was refused, besides the issue codes above. Each refusal is recorded in the ledger and reaches
 * the caller as `<code>: <problem>`.
 */
export const ANSWER_REFUSAL_CODES = [
  {
    code: "channel_not_allowed",
    meaning:
      "the answer came through a channel the policy service does not allow for this spend or tool receipt (approvalChannels; by default never the requesting client's own form for a spend or at high risk)",
  },
  { code: "self_approval", meaning: "the approver is the principal that made the request" },
  { code: "wrong_session", meaning: "an elicitation answer came from another session than the request's" },
  { code: "already_answered", meaning: "the request was answered before; a request is answered once" },
  { code: "not_awaiting_approval", meaning: "the entry is not a request waiting for a human (HITL_REQUIRED or RECEIPT_REQUIRED)" },
  { code: "not_operator", meaning: "approved_via operator came from another principal than the local admin endpoint's (operator)" },
  { code: "request_expired", meaning: "the spend request is older than 24 hours; it can no longer be answered or collected: ask again" },
  { code: "arguments_mismatch", meaning: "the spend request's stored arguments do not hash to the args_hash its ledger entry recorded; nothing can be approved on them" },
] as const;

/**
 * Why a requester's collection of a spend approval (CollectSpendApproval, or a finance call or
 * request_authorization picking it up) was refused. Recorded as `spend.collect_refused`, then
 * returned as `<code>: <problem>`.
 */
export const COLLECT_REFUSAL_CODES = [
  { code: "approval_pending", meaning: "no person has answered the request yet" },
  { code: "declined", meaning: "a person declined the request; it never runs" },
  { code: "approval_blocked", meaning: "the approval re-ran the gate and a hard rule failed; nothing may run" },
  { code: "not_requester", meaning: "only the principal that made the request collects its approval" },
  { code: "already_collected", meaning: "the approval was collected before; an approval is collected once" },
  { code: "request_expired", meaning: "the request is older than 24 hours: ask again" },
  { code: "policy_version_mismatch", meaning: "the spend policy changed version since the approval: ask again" },
  { code: "arguments_mismatch", meaning: "the stored arguments do not hash to the args_hash the request entry recorded" },
] as const;

/** A reason a collection was refused. */
export type CollectRefusalCode = (typeof COLLECT_REFUSAL_CODES)[number]["code"];

/**
 * Why a spend evaluation (EvaluateSpendGate, RequestAuthorization, or the re-evaluation of an
 * ApproveSpend) was refused before the CHP gate decided. Recorded in the ledger, then returned
 * as `policy_denied` with the message `<code>: <problem>`.
 */
export const SPEND_REFUSAL_CODES = [
  { code: "agent_policy_looser", meaning: "the agent's policy is looser than the operator's on some field; an agent may only tighten" },
  { code: "confidence_required", meaning: "the operator's spend policy requires a confidence and the action has none; the gate did not run" },
] as const;

/**
 * Why a sealed MCP `requestState` (multi round-trip, docs/protocol.md §7) was refused, recorded
 * as `mrtr.state_refused {reason}`. `by` says who decides it: the edge opens and checks the
 * state and records its refusals (RecordRequestStateRefusal); the ledger refuses a state used
 * before, or one past its expiry (ConsumeRequestState).
 */
export const REQUEST_STATE_REFUSAL_REASONS = [
  { reason: "malformed", by: "edge", meaning: "not a sealed state (cc1.<kid>.<base64url>), too long or too short, or a payload without its fields" },
  { reason: "unknown_kid", by: "edge", meaning: "sealed with a kid the edge's keyring does not hold (never was, or rotated out)" },
  { reason: "tag", by: "edge", meaning: "the AES-GCM tag does not verify: changed, truncated, or sealed with another key" },
  { reason: "version", by: "edge", meaning: "a payload version the edge does not read" },
  { reason: "tenant", by: "edge", meaning: "sealed for another tenant than the caller's" },
  { reason: "principal", by: "edge", meaning: "sealed for another principal than the caller" },
  { reason: "expired", by: "edge, ledger", meaning: "past its expiry (CHAOS_CORE_MRTR_TTL_SECONDS after it was sealed)" },
  { reason: "method", by: "edge", meaning: "sealed for another MCP method" },
  { reason: "name", by: "edge", meaning: "sealed for another tool, prompt or resource" },
  { reason: "digest", by: "edge", meaning: "sealed for the same tool with other arguments" },
  { reason: "already_consumed", by: "ledger", meaning: "consumed before: a state is used once, on any replica" },
] as const;

/** A reason a requestState was refused. */
export type RequestStateRefusalReason = (typeof REQUEST_STATE_REFUSAL_REASONS)[number]["reason"];

/** A reason a receipt was not issued. */
export type IssueRefusalCode = (typeof ISSUE_REFUSAL_CODES)[number]["code"];

/** The short reason codes of the finance reference tools (CHP denial table). */
export const FINANCE_REASONS = ["policy_deny", "expired", "replay", "args_changed", "missing_receipt", "ambiguous_policy"] as const;
export type FinanceReason = (typeof FINANCE_REASONS)[number];

/**
 * Detailed code → finance short code. The CHP table's lines: `missing_receipt` is "no receipt,
 * or its verification failed"; `args_changed` is "tool, scope or argument hash no longer match
 * the receipt"; `ambiguous_policy` is "unknown tool, scope not in the policy, or incomplete
 * policy"; `expired` covers the whole validity window; `policy_deny` is a decision against the
 * call (the human's, or a policy or risk that moved since the approval).
 */
const FINANCE_REASON_OF: Readonly<Record<DenyCode, FinanceReason>> = {
  ambiguous_policy: "ambiguous_policy",
  ambiguous_call: "ambiguous_policy",
  tool_not_allowlisted: "ambiguous_policy",
  resource_not_allowlisted: "ambiguous_policy",
  host_bound_override: "ambiguous_policy",
  allowlist_is_not_authorization: "missing_receipt",
  malformed_receipt: "missing_receipt",
  unknown_key: "missing_receipt",
  bad_signature: "missing_receipt",
  replayed_receipt: "replay",
  receipt_not_yet_valid: "expired",
  expired_receipt: "expired",
  human_denied: "policy_deny",
  policy_version_mismatch: "policy_deny",
  tenant_mismatch: "args_changed",
  binding_mismatch: "args_changed",
  changed_arguments: "args_changed",
  risk_mismatch: "policy_deny",
};

/** The finance reference tools' short reason for a detailed denial code. */
export function financeReason(code: DenyCode): FinanceReason {
  return FINANCE_REASON_OF[code];
}

/**
 * The detail code of a finance call whose receipt authorized it but which would take the day's
 * committed total past the spend policy's daily cap (checked again at execution, under the
 * tenant's ledger lock). The receipt's nonce stays unused.
 */
export const DAILY_CAP_EXCEEDED = "daily_cap_exceeded";

/**
 * The detail codes of a finance call made without a receipt for a call that has a stored spend
 * request: a person has not answered yet (`approval_pending`), declined it
 * (`approval_declined`), or its approval was already collected by another call
 * (`already_collected`: the approval works once).
 */
export const APPROVAL_PENDING = "approval_pending";
export const APPROVAL_DECLINED = "approval_declined";
export const ALREADY_COLLECTED = "already_collected";

/** Every `detail_code` a finance reference tool answers. */
export type FinanceDetailCode =
  | AuthorizationCode
  | typeof DAILY_CAP_EXCEEDED
  | typeof APPROVAL_PENDING
  | typeof APPROVAL_DECLINED
  | typeof ALREADY_COLLECTED;

/**
 * Every `detail_code` of the finance reference tools with the short `code` it is answered
 * under: the seed's six codes stay exactly as its table defines them, and the detail says what
 * happened. docs/ledger.md carries this table; a test keeps the two equal.
 */
export const FINANCE_DETAIL_CODES: ReadonlyArray<{ readonly detail_code: FinanceDetailCode; readonly code: FinanceReason | "EXECUTED" }> = [
  ...AUTHORIZATION_CODES.map(({ code }) => ({ detail_code: code, code: code === "AUTHORIZED" ? ("EXECUTED" as const) : financeReason(code) })),
  { detail_code: DAILY_CAP_EXCEEDED, code: "policy_deny" },
  { detail_code: APPROVAL_PENDING, code: "missing_receipt" },
  { detail_code: APPROVAL_DECLINED, code: "policy_deny" },
  { detail_code: ALREADY_COLLECTED, code: "replay" },
];

const EXTRA_FINANCE_REASON: Readonly<Record<string, FinanceReason>> = {
  [DAILY_CAP_EXCEEDED]: "policy_deny",
  [APPROVAL_PENDING]: "missing_receipt",
  [APPROVAL_DECLINED]: "policy_deny",
  [ALREADY_COLLECTED]: "replay",
};

/** The short code of any finance detail code (a check-chain denial or one of the ledger's own). */
export function financeCode(detail: string): FinanceReason {
  return EXTRA_FINANCE_REASON[detail] ?? financeReason(detail as DenyCode);
}
