import type { CapabilityRisk } from "../capabilities/capability.js";
import type { AuditCall } from "./audit.js";

/**
 * A step policy sent to a human. It is bound to the exact call: capability, the SHA-256 of the
 * canonical validated input (`argsHash`) and the policy version that asked for approval, so an
 * approval given for it cannot be reused for a changed call or under a different policy.
 */
export interface PendingApproval {
  readonly approvalId: string;
  /** The step as it would run: its id, capability and validated input, for the approver to read. */
  readonly step: { readonly id: string; readonly capability: string; readonly input: unknown };
  readonly capability: string;
  readonly risk: CapabilityRisk;
  readonly argsHash: string;
  readonly policyVersion: number;
  readonly matchedRule: string;
  readonly reason: string;
  /** Who asked: the approver must be a different principal (no self-approval). */
  readonly call: AuditCall;
}

/** Where pending approvals are created. A `create` that rejects means none exists, and the step fails. */
export interface ApprovalSink {
  create(approval: PendingApproval): Promise<void>;
}

/** An approval sink that keeps pending approvals in memory (tests, single-process use). */
export interface InMemoryApprovalSink extends ApprovalSink {
  get(approvalId: string): PendingApproval | undefined;
  /** Every pending approval, oldest first. */
  pending(): readonly PendingApproval[];
}

export function createInMemoryApprovalSink(): InMemoryApprovalSink {
  const byId = new Map<string, PendingApproval>();
  return {
    create(approval) {
      byId.set(approval.approvalId, structuredClone(approval));
      return Promise.resolve();
    },
    get: (approvalId) => byId.get(approvalId),
    pending: () => [...byId.values()],
  };
}
