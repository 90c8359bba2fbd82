import { ChaosError } from "@chaos-core/kit";
import {
  approvalNotFound,
  channelsOf,
  resolvedByOf,
  resolverRefusal,
  wrongState,
  type ApprovalStore,
  type ResolveApprovalInput,
  type StoredApproval,
} from "./approvals.js";
import { auditCall, type ApprovalRefusedEvent, type ApprovalResolutionEvent, type AuditSink } from "./audit.js";
import type { StepReceipts } from "./ledger.js";

// A person's answer to a pending approval: checked, recorded, signed by the ledger, then stored.

/** What {@link resolveApproval} needs. */
export interface ResolveApprovalDeps {
  readonly approvals: ApprovalStore;
  readonly audit: AuditSink;
  readonly receipts?: StepReceipts;
}

/** Records an answer's event (resolving with its ledger seq, when there is a ledger); an audit log that cannot hold it fails the call (`unavailable`). */
async function recordAnswer(deps: ResolveApprovalDeps, event: ApprovalResolutionEvent | ApprovalRefusedEvent, what: string): Promise<bigint | undefined> {
  try {
    return await deps.audit.record(event);
  } catch (err) {
    throw new ChaosError("unavailable", `the audit log could not record ${what} (${ChaosError.from(err).message})`);
  }
}

/** An answered approval as {@link resolveApproval} stored it, with the ledger entry that records the answer. */
export interface ResolvedApproval extends StoredApproval {
  /** The `approval.resolution` entry's seq; absent when the audit sink is not the ledger. */
  readonly ledgerSeq?: bigint;
}

/**
 * Records a human's answer to a pending approval, once. The resolver is the verified caller
 * (`input.by`), and the channel must be one policy accepts for this approval, then meet its own
 * rule ({@link resolverRefusal}): a refusal is recorded as `approval.refused` and thrown as
 * `permission_denied` whose message starts with its code (`channel_not_allowed`,
 * `wrong_session`, `not_requester`, `not_operator`, `self_approval`). The answer is audited before the store applies
 * it (an audit failure refuses the answer); the store's transition is atomic, so a second answer
 * is `failed_precondition`. Another tenant's or an unknown approval is `not_found`.
 */
export async function resolveApproval(approvalId: string, input: ResolveApprovalInput, deps: ResolveApprovalDeps): Promise<ResolvedApproval> {
  const tenant = input.by.tenant;
  const found = await deps.approvals.get(tenant, approvalId);
  if (!found) throw approvalNotFound(approvalId);
  // What every record of an answer says: which approval, through which channel, by whom.
  const answer = {
    call: auditCall(input.by),
    approvalId,
    capability: found.capability,
    argsHash: found.argsHash,
    channel: input.channel,
    principal: input.by.principal,
  };
  const refusal = resolverRefusal(found, input);
  if (refusal) {
    // Recorded before it is returned, like every denial: an agent trying to answer for a person
    // leaves a trace.
    await recordAnswer(deps, { type: "approval.refused", ...answer, code: refusal.code, allowed: channelsOf(found) }, "the refused answer");
    throw new ChaosError("permission_denied", refusal.message);
  }
  if (found.status !== "pending") {
    throw wrongState(approvalId, found.status, "resolve");
  }
  const ledgerSeq = await recordAnswer(
    deps,
    { type: "approval.resolution", ...answer, approved: input.approve, resolvedBy: resolvedByOf(input.channel, input.by) },
    "the answer, so it was not applied",
  );
  // An approving answer gets its signed receipt before it is stored: an approval without one
  // could never run once a ledger is wired.
  const receipt = input.approve && deps.receipts ? await deps.receipts.issue(found, input) : undefined;
  const stored = await deps.approvals.resolve(tenant, approvalId, receipt ? { ...input, receipt } : input);
  return ledgerSeq !== undefined ? { ...stored, ledgerSeq } : stored;
}
