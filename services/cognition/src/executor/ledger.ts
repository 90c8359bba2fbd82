import type { JsonObject } from "@bufbuild/protobuf";
import { ChaosError, type CallContext, type ServiceClient } from "@chaos-core/kit";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { ResolveApprovalInput, StoredApproval } from "./approvals.js";
import type { AuditEvent, AuditSink } from "./audit.js";
import type { ApprovalChannel, AuditCall, PendingApproval } from "./step-types.js";

/** The typed ledger client, whatever transport is under it. */
export type LedgerClient = ServiceClient<typeof LedgerService>;

// The entry's context label is the call's: its session, or request:<ref> (docs/ledger.md).
function contextOf(call: AuditCall): CallContext {
  return {
    tenant: call.tenant,
    principal: call.principal,
    ...(call.sessionId !== undefined ? { sessionId: call.sessionId } : {}),
    ...(call.requestRef !== undefined ? { requestRef: call.requestRef } : {}),
  };
}

/** An event as a Struct: plain JSON, without the `call` the entry already carries. */
function eventStruct(event: AuditEvent): JsonObject {
  const { call: _call, ...rest } = event;
  return JSON.parse(JSON.stringify(rest)) as JsonObject;
}

/**
 * The audit sink on the ledger service: every executor decision and outcome becomes an entry of
 * the caller's tenant chain, with its session and principal. `record` resolves only once the
 * entry is durable; a ledger that cannot be written rejects, and the executor fails closed.
 */
export function createLedgerAuditSink(ledger: LedgerClient): AuditSink {
  return {
    async record(event) {
      const { entry } = await ledger.append({ event: eventStruct(event) }, { ctx: contextOf(event.call) });
      return entry?.seq;
    },
  };
}

/**
 * Receipts for approved steps. A human's approval becomes an Ed25519-signed receipt bound to
 * the capability (tool), the tenant (resource), the step's validated input (argument hash), the
 * policy version and the risk; the step runs only after the ledger authorizes that receipt,
 * which burns its nonce — so an approval runs its step exactly once, across every replica and
 * restart, and both the issue and the use are in the audit ledger.
 */
export interface StepReceipts {
  /** Signs the receipt for an approving answer; rejects when the ledger refuses (it records why). */
  issue(approval: PendingApproval, input: ResolveApprovalInput): Promise<Record<string, unknown>>;
  /** Presents the receipt for the step about to run, under the current policy version. */
  authorize(approval: StoredApproval, receipt: Record<string, unknown>, policyVersion: number, call: CallContext): Promise<{ authorized: boolean; code: string }>;
}

/** The ledger's `approved_via` for each channel (ledger.proto `IssueReceiptRequest`). */
const APPROVED_VIA: Record<ApprovalChannel, string> = {
  client_elicitation: "elicitation",
  approver: "approver_role",
  operator: "operator",
  console: "console",
};

/** The receipt's call: the capability on the tenant with the step's validated input. */
function stepCall(approval: PendingApproval) {
  const input = approval.step.input;
  // Capability inputs are objects; anything else is wrapped so it still hashes exactly.
  const args = input !== null && typeof input === "object" && !Array.isArray(input) ? input : { input };
  return { tool: approval.capability, resource: approval.call.tenant, arguments: JSON.parse(JSON.stringify(args)) as JsonObject };
}

/** {@link StepReceipts} on the ledger service. */
export function createLedgerStepReceipts(ledger: LedgerClient): StepReceipts {
  return {
    async issue(approval, input) {
      const res = await ledger.issueReceipt(
        {
          call: stepCall(approval),
          decision: input.approve ? "allow" : "deny",
          approvedVia: APPROVED_VIA[input.channel],
          step: { policyVersion: String(approval.policyVersion), risk: approval.risk, requester: approval.call.principal },
          reason: `approval ${approval.approvalId}`,
        },
        { ctx: input.by },
      );
      if (!res.receipt) throw new ChaosError("internal", "the ledger issued no receipt");
      return res.receipt;
    },
    async authorize(approval, receipt, policyVersion, call) {
      const res = await ledger.authorize(
        {
          call: stepCall(approval),
          receipt: receipt as JsonObject,
          step: { policyVersion: String(policyVersion), risk: approval.risk, requester: approval.call.principal },
        },
        { ctx: call },
      );
      return { authorized: res.authorized, code: res.code };
    },
  };
}
