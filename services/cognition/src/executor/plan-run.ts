import { ChaosError } from "@chaos-core/kit";
import { findReferences } from "../plans/step-reference.js";
import { internalRefusal } from "./capability-guards.js";
import type { ExecutorDeps } from "./executor-deps.js";
import { skipped, skippedAfter } from "./step-results.js";
import { executeStep } from "./step-run.js";
import type { ExecutableStep, PlanContinuation, StepResult } from "./step-types.js";

// Steps in order, each output feeding the references of the steps after it; at a pending approval
// the rest of the plan is kept with the approval.

/**
 * Where the steps of one {@link executeSteps} call come from: what a pending approval keeps so
 * that its plan goes on after the approved step ({@link PlanContinuation}).
 */
export interface PlanOrigin {
  /** The stored plan's id (`chaoscore_plan`). */
  readonly planId?: string;
  /** The objective the steps were planned for; absent for explicit steps. */
  readonly objective?: string;
  /** ISO 8601: when the plan stops being runnable (a stored plan's own expiry). */
  readonly expiresAt: string;
  /** Capabilities of the same plan that executed before these steps, in order. */
  readonly executed?: readonly string[];
}

/** The steps after `index` with what they need of the run so far, for a pending approval to keep. */
function continuationAfter(
  steps: readonly ExecutableStep[],
  index: number,
  outputs: ReadonlyMap<string, unknown>,
  executed: readonly string[],
  origin: PlanOrigin,
): PlanContinuation {
  const rest = steps.slice(index + 1);
  // Only the outputs a later step refers to are kept: an approval is stored, outputs can be large.
  const wanted = new Set(rest.flatMap((s) => findReferences(s.input).map((f) => f.reference.$step)));
  return {
    ...(origin.planId !== undefined ? { planId: origin.planId } : {}),
    ...(origin.objective !== undefined ? { objective: origin.objective } : {}),
    expiresAt: origin.expiresAt,
    rest: rest.map((s) => ({ id: s.id, capability: s.capability, input: s.input, ...(s.checks ? { checks: s.checks } : {}) })),
    outputs: Object.fromEntries([...outputs].filter(([id]) => wanted.has(id))),
    executed: [...executed],
  };
}

/**
 * Runs steps in order; a step's references (`{"$step": id, "path": pointer}`) resolve against the
 * outputs of steps that executed before it in this call, or in `earlier` (step id → output, for a
 * re-plan continuing a run). Stops at the first `pending_approval` (the loop resumes only after a human
 * approved; with an `origin`, the approval keeps the steps after it, which `executeApprovedPlan` (approved-run.ts)
 * runs once the approved step ran); after a `denied` or `failed` step the rest are `skipped`, for the brain to re-plan.
 * Skipped steps are not audited: no decision was made and nothing ran. Step ids must be unique,
 * and no step may name an internal capability (`invalid_argument` before anything runs).
 */
export async function executeSteps(
  steps: readonly ExecutableStep[],
  deps: ExecutorDeps,
  earlier: ReadonlyMap<string, unknown> = new Map(),
  origin?: PlanOrigin,
): Promise<StepResult[]> {
  const seen = new Set<string>();
  for (const step of steps) {
    if (seen.has(step.id)) throw new ChaosError("invalid_argument", `step id "${step.id}" appears twice in the plan`);
    seen.add(step.id);
    if (deps.registry.get(step.capability)?.internal === true) throw internalRefusal(step.id, step.capability);
  }
  const results: StepResult[] = [];
  const outputs = new Map(earlier);
  const executed = [...(origin?.executed ?? [])];
  let stoppedBy: StepResult | undefined;
  for (const [index, step] of steps.entries()) {
    if (stoppedBy) {
      const { code, why } = skippedAfter(stoppedBy);
      results.push(skipped(step, code, why));
      continue;
    }
    const result = await executeStep(step, deps, {
      outputs,
      ...(origin ? { continuation: () => continuationAfter(steps, index, outputs, executed, origin) } : {}),
    });
    results.push(result);
    if (result.status === "executed") {
      outputs.set(step.id, result.output);
      executed.push(result.capability);
    } else stoppedBy = result;
  }
  return results;
}
