import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import type { Capability } from "../capabilities/capability.js";
import { argsHash as hashArgs } from "./canonical-json.js";
import { evaluateOutput, failed, stepCheckSchema, type StepCheck } from "./evaluate.js";
import { DEFAULT_STEP_TIMEOUT_MS, type ExecutorDeps } from "./executor-deps.js";
import type { Finish } from "./step-records.js";
import type { ExecutableStep, PolicyVerdict, StepResult } from "./step-types.js";

// Running a capability's handler under the step deadline and the caller's cancellation, then
// evaluating what it returned: the last stage of a step, whether it runs now or once approved.

export const checksSchema = z.array(stepCheckSchema).max(32);

/**
 * Runs a handler with the step's deadline and the caller's cancellation. A handler that ignores
 * its signal still loses at the deadline: the step fails then, and whatever the handler returns
 * later is discarded.
 */
async function runWithDeadline<T>(
  run: (signal: AbortSignal) => Promise<T>,
  timeoutMs: number,
  parent: AbortSignal | undefined,
): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let onParentAbort: (() => void) | undefined;
  const stop = new Promise<never>((_, reject) => {
    // Reject before aborting, so the deadline wins the race over the handler's own abort error.
    const end = (err: ChaosError) => {
      reject(err);
      controller.abort(err);
    };
    timer = setTimeout(() => end(new ChaosError("deadline_exceeded", `the step did not finish within ${timeoutMs} ms`)), timeoutMs);
    onParentAbort = () => end(new ChaosError("cancelled", "the step was cancelled by the caller"));
    if (parent?.aborted) onParentAbort();
    else parent?.addEventListener("abort", onParentAbort, { once: true });
  });
  try {
    return await Promise.race([stop, Promise.resolve().then(() => run(controller.signal))]);
  } finally {
    clearTimeout(timer);
    if (onParentAbort) parent?.removeEventListener("abort", onParentAbort);
  }
}

/** Runs the handler under the step deadline and the caller's cancellation, then evaluates its output. */
export async function runHandler(
  step: ExecutableStep,
  capability: Capability,
  input: unknown,
  checks: readonly StepCheck[],
  verdict: PolicyVerdict,
  hash: string,
  deps: ExecutorDeps,
  finish: Finish,
): Promise<StepResult> {
  const timeoutMs = deps.stepTimeoutMs ?? DEFAULT_STEP_TIMEOUT_MS;
  const onProgress = deps.onProgress;
  const progress = onProgress ? (message: string) => onProgress({ stepId: step.id, capability: capability.name, message }) : undefined;
  let output: unknown;
  try {
    output = await runWithDeadline(
      (signal) =>
        capability.handler(input, {
          call: deps.call,
          signal,
          provider: deps.provider,
          memory: deps.memory,
          policy: deps.policy,
          ...(progress ? { progress } : {}),
        }),
      timeoutMs,
      deps.signal,
    );
  } catch (err) {
    const e = ChaosError.from(err);
    return finish(
      {
        stepId: step.id,
        capability: capability.name,
        status: "failed",
        verdict,
        ran: true,
        evaluation: failed(`handler: ${e.code}: ${e.message}`),
        error: { code: e.code, message: e.message },
      },
      hash,
    );
  }

  const evaluated = evaluateOutput(capability.outputSchema, output, checks);
  // An upstream's answer is what it did: its hash goes into the ledger with the arguments' hash.
  const resultHash = evaluated.evaluation.succeeded && capability.upstream ? hashArgs(evaluated.output) : undefined;
  return finish(
    evaluated.evaluation.succeeded
      ? {
          stepId: step.id,
          capability: capability.name,
          status: "executed",
          verdict,
          ran: true,
          output: evaluated.output,
          ...(resultHash !== undefined ? { resultHash } : {}),
          evaluation: evaluated.evaluation,
        }
      : {
          stepId: step.id,
          capability: capability.name,
          status: "failed",
          verdict,
          ran: true,
          evaluation: evaluated.evaluation,
          error: { code: "failed_precondition", message: `the step's result did not pass evaluation: ${evaluated.evaluation.problems.join("; ")}` },
        },
    hash,
  );
}
