import type { z } from "zod";
import type { GetApprovalResponse } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { channelLines, stepApprovalChannels, type ChannelPlace } from "../approvals/channels.js";
import { renderText } from "../approvals/render-text.js";
import { stepApprovalView } from "../approvals/view.js";
import type { stepResultOutput } from "./cognition-shapes.js";
import type { ToolContext } from "../definitions/tool.js";

type StepOutput = z.output<typeof stepResultOutput>;

/** What this call offers for approving (docs/approvals.md §4): this client's form, the operator in standalone, the console. */
export function channelPlace(ctx: ToolContext): ChannelPlace {
  return {
    tenant: ctx.call.tenant,
    canElicit: ctx.client.formElicitation,
    ...(ctx.deps.operator ? { operator: ctx.deps.operator } : {}),
    consoleUrl: (path) => ctx.consoleUrl(path),
    urlElicitation: ctx.client.urlElicitation,
  };
}

/**
 * How a pending approval gets answered and its step run, in plain words: every channel policy
 * accepts for it that exists here, one per line, with the exact call or command.
 */
export function howToRunApproved(approvalId: string, channels: readonly string[], place: ChannelPlace): string {
  return channelLines(approvalId, stepApprovalChannels(approvalId, channels, place), channels);
}

/** What the agent cannot do about a pending approval. */
export const APPROVAL_LIMITS = "You cannot approve it yourself, and changing its arguments needs a new approval.";

/**
 * The next step, in plain words, when a run stopped at a step that waits for approval: who can
 * approve it here and how, and what the agent calls then. Undefined when nothing waits.
 */
export function nextStepForPending(results: readonly StepOutput[]): string | undefined {
  const pending = results.find((r) => r.status === "pending_approval" && r.approval);
  if (!pending?.approval) return undefined;
  const id = pending.approval.approval_id;
  const stopped = `Step ${pending.step_id} (${pending.capability}) did not run: policy requires a person to approve it (approval ${id}).`;
  return `${stopped} ${channelLines(id, pending.approval.channels, pending.approval.policy_channels)}\nSteps after it did not run either. ${APPROVAL_LIMITS}`;
}

/** How cognition's executor words the steps an expired plan left unrun (the error message after `not run: `). */
const PLAN_EXPIRED = "not run: plan_expired: ";

/**
 * The next step after an approval's run, when something in it needs saying beyond a pending
 * approval: a step that ran and failed (its handler started, so unlike a step that did not run it
 * may have had side effects; when it is the approved step, the approval is used up), or a plan
 * that expired before the steps after the approved one could run (which ones, and the call that
 * plans them again). Undefined otherwise.
 */
export function nextStepAfterApprovedRun(approvalId: string, results: readonly StepOutput[]): string | undefined {
  const failed = results.find((r) => r.ran && r.status === "failed");
  if (failed) {
    const why = failed.error?.message || failed.evaluation.problems.join("; ") || "no reason was given";
    if (failed !== results[0]) {
      return (
        `Approval ${approvalId} was used: its step ran, then step ${failed.step_id} (${failed.capability}) of the same plan ran and failed: ${why}. ` +
        "It may have had side effects; check before trying again. The steps after it did not run."
      );
    }
    return (
      `Approval ${approvalId} was used: step ${failed.step_id} (${failed.capability}) ran and failed: ${why}. ` +
      "It may have had side effects; check before trying again. The approval is used up, so running the step again " +
      "needs a new approval."
    );
  }
  const expired = results.map((r) => (r.status === "skipped" ? r.error?.message : undefined)).find((m) => m?.startsWith(PLAN_EXPIRED));
  return expired === undefined ? undefined : `Approval ${approvalId} was used and its step ran, but ${expired.slice(PLAN_EXPIRED.length)}.`;
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
