import type { ErrorCode } from "@chaos-core/kit";
import type { CapabilityRisk } from "../capabilities/capability.js";
import type { Evaluation, StepCheck } from "./evaluate.js";

// The executor's vocabulary, below everything else in executor/: what a step is, what policy said
// of it, how it ended, the approval it may wait for and who it ran for. The approval stores, the
// audit sink and the runs all speak it, so it imports none of them.

/**
 * A step as the executor receives it: which capability to call with which (still untrusted)
 * input, and what to check afterwards. A stored plan's `PlanStep` is one of these.
 */
export interface ExecutableStep {
  /** Unique within a plan. */
  readonly id: string;
  /** A registered capability name; an unknown name fails the step, it is never guessed. */
  readonly capability: string;
  /** Untrusted until the capability's input schema accepted it. */
  readonly input: unknown;
  /** Deterministic checks on the output, beyond its schema. */
  readonly checks?: readonly StepCheck[];
}

/**
 * How a step ended: `executed` (ran and its evaluation succeeded), `denied` (policy said no,
 * nothing ran), `pending_approval` (waits for a human, nothing ran), `failed` (anything else,
 * including a handler that returned output its schema rejects), `skipped` (not attempted).
 */
export type StepStatus = "executed" | "denied" | "pending_approval" | "failed" | "skipped";

/** Policy's answer for a step, as the policy service gave it. */
export interface PolicyVerdict {
  readonly decision: "ALLOW" | "DENY" | "REQUIRE_APPROVAL";
  readonly matchedRule: string;
  readonly reason: string;
  readonly policyVersion: number;
  /** With REQUIRE_APPROVAL only: the channels that may give the approval, in policy's order. */
  readonly approvalChannels?: readonly ApprovalChannel[];
  /** With REQUIRE_APPROVAL only: the `approvalChannels` entry (or `rules[i].channels`) that chose them. */
  readonly channelsRule?: string;
  /** When a policy rule decided (`matchedRule` `rules[i]`): its condition. */
  readonly condition?: string;
  /** Why a condition errored (the deciding rule's, which then applied failing closed, or an allow rule's that was not applied). */
  readonly conditionError?: string;
  /** When a condition was evaluated: the time it saw (ISO 8601), as policy recorded it. */
  readonly evaluatedAt?: string;
  /**
   * For a capability that implies others (`memory.episode` implies `memory.remember`): policy's
   * own decision for each implied capability, at its registered risk. The verdict above is the
   * strictest of all of them (DENY over REQUIRE_APPROVAL over ALLOW).
   */
  readonly implied?: readonly ImpliedDecision[];
  /**
   * Set when an implied capability's decision is the one that holds: its name. `matchedRule` then
   * reads `<name>: <rule>` (`memory.remember: deniedCapabilities`).
   */
  readonly decidedBy?: string;
}

/** Policy's decision for a capability another one implies. */
export interface ImpliedDecision {
  readonly capability: string;
  readonly risk: CapabilityRisk;
  readonly verdict: PolicyVerdict;
}

/** What happened to one step. */
export interface StepResult {
  readonly stepId: string;
  readonly capability: string;
  readonly status: StepStatus;
  /** Absent when policy was never asked (unknown capability, invalid input, skipped). */
  readonly verdict?: PolicyVerdict;
  /**
   * Whether the handler was started. A `failed` step with `ran: true` may have had side effects:
   * re-planning must not assume it did nothing.
   */
  readonly ran: boolean;
  /** The output as its schema parsed it; only on `executed`. */
  readonly output?: unknown;
  /** On an executed upstream step: the SHA-256 of its canonical output, recorded with the outcome. */
  readonly resultHash?: string;
  readonly evaluation: Evaluation;
  /** Why a `failed` or `skipped` step did not succeed, with a stable code. */
  readonly error?: { readonly code: ErrorCode; readonly message: string };
  /** Only on `pending_approval`. */
  readonly approval?: PendingApproval;
}

/** Who a recorded step was for; the ledger keeps one chain per tenant. */
export interface AuditCall {
  readonly tenant: string;
  readonly principal: string;
  readonly sessionId?: string;
  /** The edge's handle of a call without a session (kit `CallContext.requestRef`). */
  readonly requestRef?: string;
}

/**
 * How an answer was given (docs/approvals.md §1): `client_elicitation` (the client of the
 * requesting session, or of the requester's own request without one, answered a form; its own host can answer it, so it proves nothing about a
 * person), `approver` (a principal the edge vouches holds the approver role), `operator` (the
 * standalone admin endpoint, as `OPERATOR_PRINCIPAL` in approvals.ts), `console` (the approval page).
 */
export type ApprovalChannel = "client_elicitation" | "approver" | "operator" | "console";

/**
 * A step policy sent to a human. It is bound to the exact call: capability, the SHA-256 of the
 * canonical validated input (`argsHash`) and the policy version that asked for approval, so an
 * approval given for it cannot be reused for a changed call or under a different policy.
 */
export interface PendingApproval {
  readonly approvalId: string;
  /** The step as it would run: its id, capability, validated input and declared checks. */
  readonly step: StoredStep;
  readonly capability: string;
  readonly risk: CapabilityRisk;
  readonly argsHash: string;
  readonly policyVersion: number;
  readonly matchedRule: string;
  readonly reason: string;
  /**
   * The channels policy accepts for this approval, in `APPROVAL_CHANNELS` order (approvals.ts); an answer
   * through another is refused. Absent on approvals stored before channels existed: those
   * accept `LEGACY_CHANNELS` (see `channelsOf`).
   */
  readonly channels?: readonly ApprovalChannel[];
  /** The `approvalChannels` rule that chose them (`approvalChannels.byRisk.high`). */
  readonly channelsRule?: string;
  /** Who asked: the approver must be a different principal (no self-approval). */
  readonly call: AuditCall;
  /**
   * The rest of the plan the step stopped (docs/approvals.md §4.1): once the approved step ran,
   * these steps run after it, each through policy again. Absent for a step run on its own.
   */
  readonly continuation?: PlanContinuation;
}

/** A step as an approval keeps it: the approved one (validated input), or one after it (as the plan gave it). */
export interface StoredStep {
  readonly id: string;
  readonly capability: string;
  readonly input: unknown;
  readonly checks?: readonly StepCheck[];
}

/**
 * What follows an approved step in its plan: the steps after it, the earlier outputs they refer
 * to, and until when the plan may still run. An approval outlives its plan (a day against an
 * hour by default): past `expiresAt` the approved step still runs, and the rest is named, not run.
 */
export interface PlanContinuation {
  /** The stored plan the steps came from (`chaoscore_plan`); absent for explicit steps and `achieve`. */
  readonly planId?: string;
  /** The objective the plan was made for: what planning it again starts from. Absent for explicit steps. */
  readonly objective?: string;
  /** ISO 8601: after this the plan's remaining steps no longer run. */
  readonly expiresAt: string;
  /** The steps after the approved one, in order. */
  readonly rest: readonly StoredStep[];
  /** Outputs of steps that executed before the approved one, by step id: only those `rest` refers to. */
  readonly outputs: Readonly<Record<string, unknown>>;
  /** The capabilities that executed before the approved one, in order (a completed plan's procedure). */
  readonly executed: readonly string[];
}
