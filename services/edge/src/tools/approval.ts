import type { z } from "zod";
import type { GetApprovalResponse } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { renderText } from "../approvals/render-text.js";
import { stepApprovalView } from "../approvals/view.js";
import type { stepResultOutput } from "./cognition-shapes.js";

type StepOutput = z.output<typeof stepResultOutput>;

/** How to call `chaoscore_execute` for an approval, as an agent would type it. */
export function executeCall(approvalId: string): string {
  return `chaoscore_execute {"approval_id": "${approvalId}"}`;
}

/** How a person with the approver role answers an approval. */
export function approveCall(approvalId: string): string {
  return `chaoscore_approve {"approval_id": "${approvalId}", "approve": true}`;
}

/**
 * How a pending approval gets answered and its step run, in plain words: the agent's call, and
 * who decides (the user through elicitation, or an approver when the client cannot elicit).
 */
export function howToRunApproved(approvalId: string, canElicit: boolean): string {
  return canElicit
    ? `Call ${executeCall(approvalId)}: your user will be shown the request and asked to approve it; it runs only if they do.`
    : `This client cannot ask its user (it did not declare elicitation), so a person holding the approver role in this tenant must first call ${approveCall(approvalId)} from their own session; then call ${executeCall(approvalId)} to run it.`;
}

/** What the agent cannot do about a pending approval. */
export const APPROVAL_LIMITS = "You cannot approve it yourself, and changing its arguments needs a new approval.";

/**
 * The next step, in plain words, when a run stopped at a step that waits for approval: what
 * the agent calls, and who decides. Undefined when nothing waits.
 */
export function nextStepForPending(results: readonly StepOutput[], canElicit: boolean): string | undefined {
  const pending = results.find((r) => r.status === "pending_approval" && r.approval);
  if (!pending?.approval) return undefined;
  const id = pending.approval.approval_id;
  const stopped = `Step ${pending.step_id} (${pending.capability}) did not run: policy requires a person to approve it (approval ${id}).`;
  return `${stopped} ${howToRunApproved(id, canElicit)} Steps after it did not run either. ${APPROVAL_LIMITS}`;
}

/**
 * The next step when an approval's step ran and failed: its handler started, so unlike a step
 * that did not run it may have had side effects, and the approval is used up. Undefined when no
 * step ran and failed.
 */
export function nextStepAfterFailedRun(approvalId: string, results: readonly StepOutput[]): string | undefined {
  const failed = results.find((r) => r.ran && r.status === "failed");
  if (!failed) return undefined;
  const why = failed.error?.message || failed.evaluation.problems.join("; ") || "no reason was given";
  return (
    `Approval ${approvalId} was used: step ${failed.step_id} (${failed.capability}) ran and failed: ${why}. ` +
    "It may have had side effects; check before trying again. The approval is used up, so running the step again " +
    "needs a new approval."
  );
}

/**
 * What the person is asked. Everything in it comes from cognition's stored approval (the exact
 * validated input the step would run with, every argument of it, its hash, the policy decision),
 * never from the agent's arguments: the agent could describe a harmless call while the approval
 * is for another one. The executor re-checks the arguments hash and policy version before it
 * runs anything. Nothing is cut: a question too long for a form is not asked as one (`fitsForm`).
 */
export function approvalQuestion(a: GetApprovalResponse): string {
  return [
    "An AI agent asks to run a step that policy holds for a person's approval.",
    renderText(stepApprovalView(a)),
    "It runs once, only with this input, and only if policy has not changed since.",
  ].join("\n");
}
