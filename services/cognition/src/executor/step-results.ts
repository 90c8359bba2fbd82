import { ChaosError, type ErrorCode } from "@chaos-core/kit";
import { failed, type Evaluation } from "./evaluate.js";
import type { ExecutableStep, StepResult } from "./step-types.js";

// The results of steps that did not run: refused, failed before the handler, or skipped.

/** A step result that never reached a handler. */
export function notRun(
  step: ExecutableStep,
  status: "failed" | "denied" | "pending_approval",
  evaluation: Evaluation,
  extra: Partial<StepResult> = {},
): StepResult {
  return { stepId: step.id, capability: step.capability, status, ran: false, evaluation, ...extra };
}

export function failure(step: ExecutableStep, err: unknown, problem: string, extra: Partial<StepResult> = {}): StepResult {
  const e = ChaosError.from(err);
  return notRun(step, "failed", failed(problem), { error: { code: e.code, message: e.message }, ...extra });
}

/** A resume refused before any handler ran, recorded like any outcome. */
export function refused(step: ExecutableStep, status: "failed" | "denied", code: ErrorCode, message: string, extra: Partial<StepResult> = {}): StepResult {
  return notRun(step, status, failed(`approval: ${message}`), { error: { code, message }, ...extra });
}

/** The result of a step that was not attempted because of `why`. */
export function skipped(step: { readonly id: string; readonly capability: string }, code: ErrorCode, why: string): StepResult {
  return {
    stepId: step.id,
    capability: step.capability,
    status: "skipped",
    ran: false,
    evaluation: failed(`skipped: ${why}`),
    error: { code, message: `not run: ${why}` },
  };
}

/** Why the steps after a step that did not execute were skipped. */
export function skippedAfter(stoppedBy: StepResult): { code: ErrorCode; why: string } {
  return stoppedBy.status === "pending_approval"
    ? { code: "approval_required", why: `step ${stoppedBy.stepId} waits for a human approval` }
    : { code: "failed_precondition", why: `step ${stoppedBy.stepId} was ${stoppedBy.status}` };
}
