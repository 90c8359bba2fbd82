import type { CallContext } from "@chaos-core/kit";
import type { CapabilityRisk } from "../capabilities/capability.js";
import type { ApprovalChannel, AuditCall, PolicyVerdict, StepStatus } from "./step-types.js";

/**
 * Policy's decision for one step, recorded before the executor acts on it: the handler, the
 * pending approval or the denial happen only after this record was written.
 */
export interface StepDecisionEvent {
  readonly type: "step.decision";
  readonly call: AuditCall;
  readonly stepId: string;
  readonly capability: string;
  readonly risk: CapabilityRisk;
  readonly argsHash: string;
  readonly verdict: PolicyVerdict;
  /** Set when the step resumes an approved approval (policy is asked again then). */
  readonly approvalId?: string;
}

/**
 * A human's or an approver's answer to a pending approval, recorded before the store applies it
 * (a resolve that then loses a race to another answer is refused to its caller). `call` is the
 * resolver's context.
 */
export interface ApprovalResolutionEvent {
  readonly type: "approval.resolution";
  readonly call: AuditCall;
  readonly approvalId: string;
  readonly capability: string;
  readonly argsHash: string;
  readonly approved: boolean;
  /** The canonical channel name (`client_elicitation`, not the old `elicitation`). */
  readonly channel: ApprovalChannel;
  /** The resolver's principal (also the entry's own). */
  readonly principal: string;
  readonly resolvedBy: string;
}

/**
 * An answer refused before anything was applied (docs/approvals.md §1.2): the channel is not one
 * policy accepts for this approval (`channel_not_allowed`), or the channel's own rule failed
 * (`wrong_session`, `not_operator`, `self_approval`). Recorded before the refusal is returned;
 * `call` is the would-be resolver's context.
 */
export interface ApprovalRefusedEvent {
  readonly type: "approval.refused";
  readonly call: AuditCall;
  readonly approvalId: string;
  readonly capability: string;
  readonly argsHash: string;
  readonly channel: ApprovalChannel;
  readonly principal: string;
  readonly code: string;
  /** The channels the approval accepts. */
  readonly allowed: readonly ApprovalChannel[];
}

/**
 * How a step ended. Carries no input, output or error message (those may hold data a tenant
 * would not want in an audit log), only codes and hashes.
 */
export interface StepOutcomeEvent {
  readonly type: "step.outcome";
  readonly call: AuditCall;
  readonly stepId: string;
  readonly capability: string;
  readonly status: Exclude<StepStatus, "skipped">;
  /** Whether the capability's handler was started. */
  readonly ran: boolean;
  readonly succeeded: boolean;
  readonly argsHash?: string;
  /** An executed upstream step's: the SHA-256 of its canonical output (docs/federation.md §5). */
  readonly resultHash?: string;
  readonly approvalId?: string;
  readonly errorCode?: string;
  /**
   * On the outcome that created a pending approval only (status `pending_approval`), so the
   * ledger can notify a person without asking cognition: the step's risk, when the approval
   * expires and the channels that may answer it (docs/approvals.md §6).
   */
  readonly risk?: CapabilityRisk;
  readonly approvalExpiresAt?: string;
  readonly approvalChannels?: readonly ApprovalChannel[];
}

/**
 * A step of a capability with no side effect (`hasNoSideEffect`) that policy allowed: its decision
 * and its outcome in one entry, recorded after the handler and before the result is returned
 * (docs/ledger.md, "One entry for a read-only step"). The fields are those of the decision
 * (`risk`, `argsHash`, `verdict`) and of the outcome (`status`, `ran`, `succeeded`, `errorCode`),
 * under the same names, so a reader of either finds them here. `ran` is always true: policy
 * allowed the step and the handler was started.
 */
export interface StepReadEvent {
  readonly type: "step.read";
  readonly call: AuditCall;
  readonly stepId: string;
  readonly capability: string;
  readonly risk: CapabilityRisk;
  readonly argsHash: string;
  readonly verdict: PolicyVerdict;
  readonly status: "executed" | "failed";
  readonly ran: true;
  readonly succeeded: boolean;
  readonly errorCode?: string;
}

export type AuditEvent = StepDecisionEvent | StepOutcomeEvent | StepReadEvent | ApprovalResolutionEvent | ApprovalRefusedEvent;

/**
 * Where every decision and outcome goes (the ledger issue wires it to the ledger service). A
 * `record` that rejects means the event was not durably kept, and the executor fails closed.
 */
export interface AuditSink {
  /**
   * Keeps `event`; resolves with the seq of the ledger entry that holds it when the sink is the
   * ledger (what the console's result page shows), undefined for a sink without one.
   */
  record(event: AuditEvent): Promise<bigint | undefined>;
}

/** An audit sink that keeps events in memory, for tests and for a process without a ledger. */
export interface InMemoryAuditSink extends AuditSink {
  /** The recorded events, oldest first. */
  events(): readonly AuditEvent[];
}

export function createInMemoryAuditSink(): InMemoryAuditSink {
  const events: AuditEvent[] = [];
  return {
    record(event) {
      events.push(structuredClone(event));
      return Promise.resolve(undefined);
    },
    events: () => [...events],
  };
}

/** The audit part of a call context: the session or the request ref only when there is one. */
export function auditCall(call: CallContext): AuditCall {
  return {
    tenant: call.tenant,
    principal: call.principal,
    ...(call.sessionId !== undefined ? { sessionId: call.sessionId } : {}),
    ...(call.requestRef !== undefined ? { requestRef: call.requestRef } : {}),
  };
}
