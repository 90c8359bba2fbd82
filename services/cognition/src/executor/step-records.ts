import { ChaosError } from "@chaos-core/kit";
import type { Capability } from "../capabilities/capability.js";
import { channelsOf, type StoredApproval } from "./approvals.js";
import { auditCall, type StepDecisionEvent, type StepOutcomeEvent, type StepReadEvent } from "./audit.js";
import { failed } from "./evaluate.js";
import type { ExecutorDeps } from "./executor-deps.js";
import { notRun } from "./step-results.js";
import type { ExecutableStep, PolicyVerdict, StepResult } from "./step-types.js";

// A step's decision and outcome in the audit sink: recorded before anything acts on them, and a
// result that could not be recorded is never returned as a success.

/** Finishes a step: records its outcome (with the stored approval it created, if any) and returns it. */
export type Finish = (result: StepResult, hash?: string, created?: StoredApproval) => Promise<StepResult>;

/** Records a step's outcome; a result that cannot be recorded is not returned as a success. */
export function finisher(step: { readonly id: string; readonly capability: string }, deps: ExecutorDeps, approvalId?: string): Finish {
  const call = auditCall(deps.call);
  const outcome = (result: StepResult, hash?: string, created?: StoredApproval): StepOutcomeEvent => ({
    type: "step.outcome",
    call,
    stepId: step.id,
    capability: step.capability,
    status: result.status as StepOutcomeEvent["status"],
    ran: result.ran,
    succeeded: result.evaluation.succeeded,
    ...(hash !== undefined ? { argsHash: hash } : {}),
    ...(result.resultHash !== undefined ? { resultHash: result.resultHash } : {}),
    ...(result.approval ? { approvalId: result.approval.approvalId } : approvalId !== undefined ? { approvalId } : {}),
    ...(result.error ? { errorCode: result.error.code } : {}),
    ...(created ? { risk: created.risk, approvalExpiresAt: created.expiresAt, approvalChannels: [...channelsOf(created)] } : {}),
  });
  return async (result, hash, created) => {
    try {
      await deps.audit.record(outcome(result, hash, created));
      return result;
    } catch (err) {
      return unrecorded(result, err, "the step's outcome could not be recorded", "the outcome");
    }
  };
}

/** A result whose record failed: never a success, and its output is not returned. */
function unrecorded(result: StepResult, err: unknown, problem: string, what: string): StepResult {
  const e = ChaosError.from(err);
  const { output: _dropped, ...rest } = result;
  return {
    ...rest,
    status: result.status === "executed" ? "failed" : result.status,
    evaluation: failed(...result.evaluation.problems, `audit: ${problem}`),
    error: result.error ?? { code: "unavailable", message: `the audit log could not record ${what} (${e.message})` },
  };
}

/**
 * Finishes an allowed step of a capability with no side effect: its decision and its outcome go
 * into one `step.read` entry, and the result is returned only once that entry is durable. If the
 * entry cannot be written the result is withheld (fail closed): the step is `failed`
 * (`unavailable`) without its output, so what the read found never reaches the caller or a later
 * step of the plan.
 */
export function readFinisher(step: ExecutableStep, capability: Capability, verdict: PolicyVerdict, hash: string, deps: ExecutorDeps): Finish {
  const call = auditCall(deps.call);
  return async (result) => {
    const event: StepReadEvent = {
      type: "step.read",
      call,
      stepId: step.id,
      capability: capability.name,
      risk: capability.risk,
      argsHash: hash,
      verdict,
      status: result.status === "executed" ? "executed" : "failed",
      ran: true,
      succeeded: result.evaluation.succeeded,
      ...(result.error ? { errorCode: result.error.code } : {}),
    };
    try {
      await deps.audit.record(event);
      return result;
    } catch (err) {
      return unrecorded(result, err, "the read-only step's decision and outcome could not be recorded, so its result is withheld", "the read-only step");
    }
  };
}

/**
 * Records policy's decision before anything acts on it. On failure returns the failed result to
 * give back as is (fail closed: the sink just failed, so no outcome record is attempted either).
 */
export async function recordDecision(step: ExecutableStep, event: StepDecisionEvent, deps: ExecutorDeps): Promise<StepResult | undefined> {
  try {
    await deps.audit.record(event);
    return undefined;
  } catch (err) {
    const e = ChaosError.from(err);
    return notRun(step, "failed", failed("audit: the policy decision could not be recorded, so nothing ran"), {
      verdict: event.verdict,
      error: { code: "unavailable", message: `the audit log could not record the decision (${e.message})` },
    });
  }
}
