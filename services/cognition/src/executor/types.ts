import type { ErrorCode } from "@chaos-core/kit";
import type { CapabilityRisk } from "../capabilities/capability.js";
import type { ApprovalChannel, PendingApproval } from "./approvals.js";
import type { Evaluation, StepCheck } from "./evaluate.js";

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
  /** With REQUIRE_APPROVAL only: the `approvalChannels` rule that chose them. */
  readonly channelsRule?: string;
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
  readonly evaluation: Evaluation;
  /** Why a `failed` or `skipped` step did not succeed, with a stable code. */
  readonly error?: { readonly code: ErrorCode; readonly message: string };
  /** Only on `pending_approval`. */
  readonly approval?: PendingApproval;
}
