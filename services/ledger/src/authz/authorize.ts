import { assertTenantId, ChaosError } from "@chaos-core/kit";
import type { Keyring } from "../keys/keyring.js";
import { stepOf, type AuthorizationCode, type AuthorizationStep, type DenyCode } from "./codes.js";
import { inspectCall } from "./inspect-call.js";
import { parseReceipt, parseUtcTimestamp, verifyReceiptSignature, type Receipt, type ReceiptKind } from "./receipt.js";
import { policyInForce } from "./tool-policy.js";

/**
 * How far in the future `issued_at` may be and still count as issued. Replicas' clocks differ
 * by a little even under NTP; without some slack a receipt issued on one replica and presented
 * at once to another could be refused. Expiry gets no slack: that side fails closed.
 */
export const MAX_CLOCK_SKEW_MS = 30_000;

/** What the check chain needs. Everything but `tenant`, `kind` and `now` is untrusted input. */
export interface AuthorizeInput {
  /** The tenant's tool-approval policy as stored; validated here (`ambiguous_policy`). */
  readonly policy: unknown;
  /** The proposed call `{tool, resource, arguments}`. */
  readonly call: unknown;
  /** The receipt as presented; undefined or null when none was. */
  readonly receipt?: unknown;
  /**
   * What to say when `policy` is undefined or null; defaults to "no tool-approval policy is
   * configured". A caller whose policy comes from elsewhere (a finance tool's spend policy) names it.
   */
  readonly missingPolicy?: string;
  /** The verified caller's tenant (from the signed call context, never from the request). */
  readonly tenant: string;
  /** The receipt kind this path accepts. */
  readonly kind: ReceiptKind;
  readonly now: Date;
}

/** What the ledger entry of an authorization records. Null where the chain stopped before knowing it. */
export interface AuthorizationRecord {
  readonly tool: string | null;
  readonly resource: string | null;
  /** The hash of the presented call's host-bound ∪ model arguments. */
  readonly args_hash: string | null;
  readonly receipt_kid: string | null;
  /** Nonce and actor are recorded only from a receipt whose signature verified. */
  readonly receipt_nonce: string | null;
  readonly receipt_actor: string | null;
  /** The current policy's version. */
  readonly policy_version: string | null;
  readonly code: AuthorizationCode;
  readonly step: AuthorizationStep;
}

/** Codes decided before the replay check: final without the nonce store. */
export type PreReplayCode = Extract<
  DenyCode,
  | "ambiguous_policy"
  | "ambiguous_call"
  | "tool_not_allowlisted"
  | "resource_not_allowlisted"
  | "host_bound_override"
  | "allowlist_is_not_authorization"
  | "malformed_receipt"
  | "unknown_key"
  | "bad_signature"
>;

/** Codes decided after the replay check: they stand only if the nonce is unused. */
export type PostReplayCode = Exclude<AuthorizationCode, PreReplayCode | "replayed_receipt">;

/** A denial decided before the replay check. */
export interface FinalCheck {
  readonly stage: "final";
  readonly authorized: false;
  readonly code: PreReplayCode;
  readonly step: AuthorizationStep;
  readonly problem: string;
  readonly record: AuthorizationRecord;
}

/**
 * A verified receipt whose outcome depends on its nonce: if the nonce store already holds it, the
 * outcome is `replayed_receipt`; otherwise it is `code`, and the store records the nonce when
 * `burnsNonce` (AUTHORIZED and expired) in the same transaction as the ledger entry.
 */
export interface NeedsNonceCheck {
  readonly stage: "needs_nonce";
  readonly nonce: string;
  /** The receipt's expiry: after it the nonce row may be pruned, as the receipt is refused anyway. */
  readonly expiry: string;
  readonly code: PostReplayCode;
  readonly step: AuthorizationStep;
  readonly burnsNonce: boolean;
  readonly problem: string | undefined;
  readonly record: AuthorizationRecord;
}

/** The pure chain's answer. */
export type AuthorizationCheck = FinalCheck | NeedsNonceCheck;

/** The final decision once the nonce store has answered. */
export interface AuthorizationDecision {
  readonly authorized: boolean;
  readonly code: AuthorizationCode;
  readonly step: AuthorizationStep;
  readonly problem: string | undefined;
  /** True when the store must record the nonce as used (with the ledger entry). */
  readonly burnNonce: boolean;
  readonly record: AuthorizationRecord;
}

/**
 * Runs the ordered check chain from docs/ledger.md; the first failing check decides: policy
 * parse → call inspection → receipt present → schema → signature → [replay, by the store] →
 * not yet valid → expired → human deny → policy version → binding (tenant, then kind, tool,
 * resource) → changed arguments → risk → AUTHORIZED. Pure: no clock, no store, no I/O.
 */
export function checkAuthorization(input: AuthorizeInput, keyring: Keyring): AuthorizationCheck {
  assertTenantId(input.tenant);
  // An invalid clock compares false against every bound, which would pass both time checks.
  if (Number.isNaN(input.now.getTime())) throw new ChaosError("invalid_argument", "now: not a valid date");
  const call = input.call as { tool?: unknown; resource?: unknown } | null | undefined;
  let record: Omit<AuthorizationRecord, "code" | "step"> = {
    tool: clip(typeof call === "object" && call !== null ? call.tool : undefined),
    resource: clip(typeof call === "object" && call !== null ? call.resource : undefined),
    args_hash: null,
    receipt_kid: null,
    receipt_nonce: null,
    receipt_actor: null,
    policy_version: null,
  };
  const final = (code: PreReplayCode, problem: string): FinalCheck => {
    const step = stepOf(code);
    return { stage: "final", authorized: false, code, step, problem, record: { ...record, code, step } };
  };

  const parsedPolicy = policyInForce(input.policy, input.missingPolicy);
  if (!parsedPolicy.ok) return final("ambiguous_policy", parsedPolicy.problem);
  const policy = parsedPolicy.policy;
  record = { ...record, policy_version: policy.version };

  const inspected = inspectCall(input.call, policy);
  if (!inspected.ok) return final(inspected.code, inspected.problem);
  record = { ...record, args_hash: inspected.argsHash };

  if (input.receipt === undefined || input.receipt === null) {
    return final(
      "allowlist_is_not_authorization",
      `tool "${inspected.call.tool}" is allowlisted, but a call runs only with a signed receipt bound to it`,
    );
  }

  const parsed = parseReceipt(input.receipt);
  if (!parsed.ok) return final("malformed_receipt", `receipt: ${parsed.problem}`);
  const receipt = parsed.receipt;
  record = { ...record, receipt_kid: receipt.kid };

  const signature = verifyReceiptSignature(receipt, keyring);
  if (!signature.ok) return final(signature.code, signature.problem);
  record = { ...record, receipt_nonce: receipt.nonce, receipt_actor: receipt.actor };

  const later = laterChecks(receipt, input, policy.version, inspected.rule.risk, inspected.argsHash, inspected.call);
  const step = stepOf(later.code);
  return {
    stage: "needs_nonce",
    nonce: receipt.nonce,
    expiry: receipt.expiry,
    code: later.code,
    step,
    burnsNonce: later.code === "AUTHORIZED" || later.code === "expired_receipt",
    problem: later.problem,
    record: { ...record, code: later.code, step },
  };
}

/**
 * Settles a {@link NeedsNonceCheck} with the nonce store's answer. `nonceAlreadyUsed` wins over
 * every later check (replay comes first in the chain).
 */
export function settleNonce(check: NeedsNonceCheck, nonceAlreadyUsed: boolean): AuthorizationDecision {
  if (nonceAlreadyUsed) {
    const step = stepOf("replayed_receipt");
    return {
      authorized: false,
      code: "replayed_receipt",
      step,
      problem: "this receipt's nonce was already consumed",
      burnNonce: false,
      record: { ...check.record, code: "replayed_receipt", step },
    };
  }
  return {
    authorized: check.code === "AUTHORIZED",
    code: check.code,
    step: check.step,
    problem: check.problem,
    burnNonce: check.burnsNonce,
    record: check.record,
  };
}

function laterChecks(
  receipt: Receipt,
  input: AuthorizeInput,
  policyVersion: string,
  risk: string,
  argsHash: string,
  call: { tool: string; resource: string },
): { code: PostReplayCode; problem: string | undefined } {
  const now = input.now.getTime();
  // Both parse: the schema accepted them.
  const issuedAt = parseUtcTimestamp(receipt.issued_at)!;
  const expiry = parseUtcTimestamp(receipt.expiry)!;
  if (issuedAt - MAX_CLOCK_SKEW_MS > now) {
    return { code: "receipt_not_yet_valid", problem: `issued_at ${receipt.issued_at} is in the future` };
  }
  if (now >= expiry) return { code: "expired_receipt", problem: `the receipt expired at ${receipt.expiry}` };
  if (receipt.decision !== "allow") return { code: "human_denied", problem: `${receipt.actor} denied this call` };
  if (receipt.policy_version !== policyVersion) {
    return {
      code: "policy_version_mismatch",
      problem: `the receipt was issued under policy ${receipt.policy_version}; the current policy is ${policyVersion}`,
    };
  }
  if (receipt.tenant !== input.tenant) return { code: "tenant_mismatch", problem: "the receipt was issued in another tenant; a receipt is valid only in the tenant it was issued in" };
  for (const [field, expected] of [
    ["kind", input.kind],
    ["tool", call.tool],
    ["resource", call.resource],
  ] as const) {
    if (receipt[field] !== expected) {
      return { code: "binding_mismatch", problem: `the receipt's ${field} is "${receipt[field]}", the call's is "${expected}"` };
    }
  }
  if (receipt.args_hash !== argsHash) {
    return { code: "changed_arguments", problem: `the arguments hash to ${argsHash}; the receipt approved ${receipt.args_hash}` };
  }
  if (receipt.risk !== risk) {
    return { code: "risk_mismatch", problem: `the receipt carries risk ${receipt.risk}; the policy gives ${call.tool} risk ${risk}` };
  }
  return { code: "AUTHORIZED", problem: undefined };
}

/** A string from an untrusted call, bounded so a huge value cannot bloat the ledger entry. */
function clip(value: unknown): string | null {
  if (typeof value !== "string") return null;
  return value.length > 256 ? `${value.slice(0, 256)}…` : value;
}
