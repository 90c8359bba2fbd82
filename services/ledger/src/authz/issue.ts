import { assertTenantId, ChaosError } from "@chaos-core/kit";
import type { Keyring } from "../keys/keyring.js";
import type { IssueRefusalCode } from "./codes.js";
import { ambiguityProblem } from "@chaos-core/kit";
import { inspectCall, type InspectionCode } from "./inspect-call.js";
import { newNonce, RECEIPT_SCHEMA_VERSION, signReceipt, type Receipt, type ReceiptDecision, type ReceiptKind, type Risk } from "./receipt.js";
import { policyInForce } from "./tool-policy.js";

/** A receipt lives at least a second and at most an hour: long enough to use, short enough to expire. */
export const MIN_RECEIPT_TTL_SECONDS = 1;
export const MAX_RECEIPT_TTL_SECONDS = 3600;

/** The only role that may decide on another principal's call. */
export const APPROVER_ROLE = "approver";

/**
 * How the decision reached us: `approver` (a verified principal holding the approver role, never
 * the requester), `console` (the same, signed in to the approval page; the actor reads
 * `console:<principal>`) or `human_elicitation` (the person at the requesting client, asked by
 * the edge through MCP elicitation; that person is the requester's user, so no role is needed).
 */
export type ActorKind = "approver" | "console" | "human_elicitation";

/** The verified principal that decided. Roles come from the operator's credentials, never from a request. */
export interface DecidingActor {
  readonly principal: string;
  readonly roles: readonly string[];
}

export interface IssueReceiptInput {
  /** The call decided on, `{tool, resource, arguments}` as the agent proposed it. */
  readonly call: unknown;
  /** The tenant's tool-approval policy as stored. */
  readonly policy: unknown;
  readonly decision: ReceiptDecision;
  readonly actor: DecidingActor;
  /** The principal that asked for the call. */
  readonly requester: string;
  readonly actorKind: ActorKind;
  readonly ttlSeconds: number;
  readonly now: Date;
  /** The verified tenant of the call. */
  readonly tenant: string;
  /** Defaults to `chaoscore.tool_approval_receipt`; the finance reference tools use `authorization`. */
  readonly kind?: ReceiptKind;
}

/** What the ledger records for a decision. */
export interface DecisionLog {
  readonly actor: string;
  readonly decision: ReceiptDecision;
  readonly args_hash: string;
  readonly nonce: string;
}

export type IssueResult =
  | { readonly issued: true; readonly receipt: Receipt; readonly decisionLog: DecisionLog }
  | { readonly issued: false; readonly code: IssueRefusalCode; readonly problem: string };

/**
 * Signs a receipt for a human's decision on one exact call. Refused, with a stable code:
 * a ttl outside 1..3600 s (`invalid_ttl`), an empty or wildcard actor or requester
 * (`ambiguous_actor`), a call or policy that inspection denies (its code; no receipt, allow or
 * deny, is signed for a call that has no concrete binding), an approver without the approver
 * role (`not_an_approver`), and an approver deciding their own request (`self_approval`).
 */
export function issueReceipt(input: IssueReceiptInput, keyring: Keyring): IssueResult {
  assertTenantId(input.tenant);
  if (Number.isNaN(input.now.getTime())) throw new ChaosError("invalid_argument", "now: not a valid date");
  const refuse = (code: IssueRefusalCode, problem: string): IssueResult => ({ issued: false, code, problem });

  const ttl = input.ttlSeconds;
  if (!Number.isInteger(ttl) || ttl < MIN_RECEIPT_TTL_SECONDS || ttl > MAX_RECEIPT_TTL_SECONDS) {
    return refuse("invalid_ttl", `ttl_seconds must be a whole number from ${MIN_RECEIPT_TTL_SECONDS} to ${MAX_RECEIPT_TTL_SECONDS}, got ${ttl}`);
  }
  const actorProblem = ambiguityProblem(input.actor.principal);
  if (actorProblem) return refuse("ambiguous_actor", `actor ${actorProblem}`);
  const requesterProblem = ambiguityProblem(input.requester);
  if (requesterProblem) return refuse("ambiguous_actor", `requester ${requesterProblem}`);

  const parsed = policyInForce(input.policy);
  if (!parsed.ok) return refuse("ambiguous_policy", parsed.problem);
  const inspected = inspectCall(input.call, parsed.policy);
  if (!inspected.ok) return refuse(inspected.code, inspected.problem);

  let actor: string;
  if (input.actorKind === "approver" || input.actorKind === "console") {
    if (!input.actor.roles.includes(APPROVER_ROLE)) {
      return refuse("not_an_approver", `${input.actor.principal} does not hold the ${APPROVER_ROLE} role`);
    }
    if (input.actor.principal === input.requester) {
      return refuse("self_approval", `${input.actor.principal} requested this call and cannot decide on it`);
    }
    actor = input.actorKind === "console" ? `console:${input.actor.principal}` : input.actor.principal;
  } else {
    // Marked in the receipt, so an audit reader can tell the client's human from an approver.
    actor = `elicitation:${input.actor.principal}`;
  }

  const now = input.now.getTime();
  const receipt = signReceipt(
    {
      kind: input.kind ?? "chaoscore.tool_approval_receipt",
      schema_version: RECEIPT_SCHEMA_VERSION,
      tenant: input.tenant,
      actor,
      tool: inspected.call.tool,
      resource: inspected.call.resource,
      args_hash: inspected.argsHash,
      policy_version: parsed.policy.version,
      risk: inspected.rule.risk,
      issued_at: new Date(now).toISOString(),
      expiry: new Date(now + ttl * 1000).toISOString(),
      decision: input.decision,
      nonce: newNonce(),
    },
    keyring,
  );
  return {
    issued: true,
    receipt,
    decisionLog: { actor, decision: receipt.decision, args_hash: receipt.args_hash, nonce: receipt.nonce },
  };
}

/** The answer of {@link evaluateToolApproval}. */
export type ToolApprovalEvaluation =
  | {
      readonly status: "RECEIPT_REQUIRED";
      readonly deny_code: "allowlist_is_not_authorization";
      readonly args_hash: string;
      readonly policy_version: string;
      readonly risk: Risk;
    }
  | {
      readonly status: "DENIED";
      readonly deny_code: InspectionCode;
      readonly problem: string;
      readonly policy_version: string | null;
    };

/**
 * Pre-screens a call: a call that passes the allowlist still needs a receipt
 * (`RECEIPT_REQUIRED`, `allowlist_is_not_authorization`, with the args hash a receipt must
 * bind); anything inspection refuses is `DENIED` with its code.
 */
export function evaluateToolApproval(call: unknown, policy: unknown): ToolApprovalEvaluation {
  const parsed = policyInForce(policy);
  if (!parsed.ok) return { status: "DENIED", deny_code: "ambiguous_policy", problem: parsed.problem, policy_version: null };
  const inspected = inspectCall(call, parsed.policy);
  if (!inspected.ok) {
    return { status: "DENIED", deny_code: inspected.code, problem: inspected.problem, policy_version: parsed.policy.version };
  }
  return {
    status: "RECEIPT_REQUIRED",
    deny_code: "allowlist_is_not_authorization",
    args_hash: inspected.argsHash,
    policy_version: parsed.policy.version,
    risk: inspected.rule.risk,
  };
}
