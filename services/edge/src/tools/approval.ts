import type { z } from "zod";
import type { StepResult } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
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
 * The next step, in plain words, when a run stopped at a step that waits for approval: what
 * the agent calls, and who decides. Undefined when nothing waits.
 */
export function nextStepForPending(results: readonly StepOutput[], canElicit: boolean): string | undefined {
  const pending = results.find((r) => r.status === "pending_approval" && r.approval);
  if (!pending?.approval) return undefined;
  const id = pending.approval.approval_id;
  const stopped = `Step ${pending.step_id} (${pending.capability}) did not run: policy requires a person to approve it (approval ${id}).`;
  const after = "Steps after it did not run either. You cannot approve it yourself, and changing its arguments needs a new approval.";
  return canElicit
    ? `${stopped} Call ${executeCall(id)}: your user will be shown the request and asked to approve it; it runs only if they do. ${after}`
    : `${stopped} This client cannot ask its user (it did not declare elicitation), so a person holding the approver role in this tenant must first call ${approveCall(id)} from their own session; then call ${executeCall(id)} to run it. ${after}`;
}

/**
 * What the person is asked. Everything in it comes from cognition (the registry, policy and the
 * pending approval), never from the agent's arguments: the agent could describe a harmless call
 * while the approval is for another one. The executor re-checks the arguments hash and policy
 * version before it runs anything, so the approval cannot be used for a changed call.
 */
export function approvalQuestion(approvalId: string, pending: StepResult | undefined, cognitionSays: string): string {
  const lines = ["An AI agent asks to run a step that policy holds for a person's approval.", `Approval id: ${approvalId}`];
  if (pending?.capability) lines.push(`Capability: ${pending.capability}${pending.approval ? ` (risk ${pending.approval.risk})` : ""}`);
  if (pending?.approval) {
    const a = pending.approval;
    lines.push(
      `Why approval is needed: policy rule ${a.matchedRule || "(none)"}: ${a.reason} (policy version ${a.policyVersion})`,
      `Arguments (SHA-256 of the canonical input): ${a.argsHash}`,
    );
  } else if (pending?.verdict) {
    const v = pending.verdict;
    lines.push(`Policy: rule ${v.matchedRule || "(none)"}: ${v.reason} (policy version ${v.policyVersion})`);
  }
  if (cognitionSays) lines.push(`Chaos Core: ${cognitionSays}`);
  lines.push(
    "Chaos Core cannot show the step's exact input here yet; the step runs only with the arguments that were held for approval. " +
      "Approve only if you know which call this is.",
  );
  return lines.join("\n");
}
