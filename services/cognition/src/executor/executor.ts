import { randomUUID } from "node:crypto";
import { z } from "zod";
import { ATTR, ChaosError, withSpan, type CallContext, type ServiceClient } from "@chaos-core/kit";
import type { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { Decision, Risk, type PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { Capability, CapabilityFacts, CapabilityRisk } from "../capabilities/capability.js";
import type { CapabilityRegistry } from "../capabilities/registry.js";
import type { AIProvider } from "../providers/ai-provider.js";
import type { ApprovalSink, PendingApproval } from "./approvals.js";
import { auditCall, type AuditEvent, type AuditSink, type StepOutcomeEvent } from "./audit.js";
import { argsHash as hashArgs } from "./canonical-json.js";
import { describeIssues, evaluateOutput, failed, stepCheckSchema, type Evaluation } from "./evaluate.js";
import type { ExecutableStep, PolicyVerdict, StepResult } from "./types.js";

/** How long a handler may run when the deps name no deadline. */
export const DEFAULT_STEP_TIMEOUT_MS = 30_000;

/** Everything the executor needs for one caller's steps. */
export interface ExecutorDeps {
  readonly registry: CapabilityRegistry;
  readonly policy: ServiceClient<typeof PolicyService>;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly provider: AIProvider;
  readonly audit: AuditSink;
  readonly approvals: ApprovalSink;
  /** Who the steps run for (tenant, principal, session), from the verified call context. */
  readonly call: CallContext;
  /** The caller's cancellation; aborting it fails the running step with `cancelled`. */
  readonly signal?: AbortSignal;
  /** Per-step deadline for the handler, in milliseconds. */
  readonly stepTimeoutMs?: number;
}

const RISK: Record<CapabilityRisk, Risk> = {
  low: Risk.LOW,
  medium: Risk.MEDIUM,
  high: Risk.HIGH,
  critical: Risk.CRITICAL,
};

const VERDICT: Partial<Record<Decision, PolicyVerdict["decision"]>> = {
  [Decision.ALLOW]: "ALLOW",
  [Decision.DENY]: "DENY",
  [Decision.REQUIRE_APPROVAL]: "REQUIRE_APPROVAL",
};

const checksSchema = z.array(stepCheckSchema).max(32);

/** A step result that never reached a handler. */
function notRun(
  step: ExecutableStep,
  status: "failed" | "denied" | "pending_approval",
  evaluation: Evaluation,
  extra: Partial<StepResult> = {},
): StepResult {
  return { stepId: step.id, capability: step.capability, status, ran: false, evaluation, ...extra };
}

function failure(step: ExecutableStep, err: unknown, problem: string, extra: Partial<StepResult> = {}): StepResult {
  const e = ChaosError.from(err);
  return notRun(step, "failed", failed(problem), { error: { code: e.code, message: e.message }, ...extra });
}

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

async function askPolicy(
  capability: Capability,
  facts: CapabilityFacts,
  deps: ExecutorDeps,
): Promise<PolicyVerdict> {
  const res = await deps.policy.evaluate(
    {
      capability: capability.name,
      risk: RISK[capability.risk],
      facts: { httpHost: facts.httpHost ?? "", attributes: { ...facts.attributes } },
    },
    { ctx: deps.call, ...(deps.signal ? { signal: deps.signal } : {}) },
  );
  const decision = VERDICT[res.decision];
  // An answer this build cannot read is not permission: fail closed.
  if (!decision) throw new ChaosError("internal", `policy answered an unknown decision (${res.decision})`);
  return { decision, matchedRule: res.matchedRule, reason: res.reason, policyVersion: Number(res.policyVersion) };
}

/** One step through its stages, in order; each audit record must succeed before the next action. */
async function runStep(step: ExecutableStep, deps: ExecutorDeps): Promise<StepResult> {
  const call = auditCall(deps.call);
  const outcome = (result: StepResult, hash?: string): StepOutcomeEvent => ({
    type: "step.outcome",
    call,
    stepId: step.id,
    capability: step.capability,
    status: result.status as StepOutcomeEvent["status"],
    ran: result.ran,
    succeeded: result.evaluation.succeeded,
    ...(hash !== undefined ? { argsHash: hash } : {}),
    ...(result.approval ? { approvalId: result.approval.approvalId } : {}),
    ...(result.error ? { errorCode: result.error.code } : {}),
  });
  // Records the outcome; a result that cannot be recorded is not returned as a success.
  const finish = async (result: StepResult, hash?: string): Promise<StepResult> => {
    try {
      await deps.audit.record(outcome(result, hash));
      return result;
    } catch (err) {
      const e = ChaosError.from(err);
      const { output: _dropped, ...rest } = result;
      return {
        ...rest,
        status: result.status === "executed" ? "failed" : result.status,
        evaluation: failed(...result.evaluation.problems, "audit: the step's outcome could not be recorded"),
        error: result.error ?? { code: "unavailable", message: `the audit log could not record the outcome (${e.message})` },
      };
    }
  };

  const capability = deps.registry.get(step.capability);
  if (!capability) {
    const known = deps.registry.list().map((c) => c.name).join(", ");
    return finish(
      failure(
        step,
        new ChaosError("not_found", `no capability is registered as "${step.capability}"; registered: ${known}`),
        `capability: "${step.capability}" is not registered`,
      ),
    );
  }

  const parsedInput = capability.inputSchema.safeParse(step.input);
  const parsedChecks = checksSchema.safeParse(step.checks ?? []);
  if (!parsedInput.success || !parsedChecks.success) {
    const problems = [
      ...(parsedInput.success ? [] : describeIssues("input", parsedInput.error)),
      ...(parsedChecks.success ? [] : describeIssues("checks", parsedChecks.error)),
    ];
    return finish(
      notRun(step, "failed", failed(...problems), {
        error: { code: "invalid_argument", message: `the step does not match ${capability.name}'s schema: ${problems.join("; ")}` },
      }),
    );
  }
  const input: unknown = parsedInput.data;

  let hash: string;
  let facts: CapabilityFacts;
  try {
    hash = hashArgs(input);
    facts = capability.facts?.(input) ?? {};
  } catch (err) {
    return finish(failure(step, err, "input: could not be prepared for the policy decision"));
  }

  let verdict: PolicyVerdict;
  try {
    verdict = await askPolicy(capability, facts, deps);
  } catch (err) {
    return finish(failure(step, err, "policy: no decision could be obtained, so nothing ran"), hash);
  }

  const decisionEvent: AuditEvent = {
    type: "step.decision",
    call,
    stepId: step.id,
    capability: capability.name,
    risk: capability.risk,
    argsHash: hash,
    verdict,
  };
  try {
    await deps.audit.record(decisionEvent);
  } catch (err) {
    // Fail closed: nothing acts on a decision the audit log does not hold. The sink just
    // failed, so no outcome record is attempted either; the caller sees why.
    const e = ChaosError.from(err);
    return notRun(step, "failed", failed("audit: the policy decision could not be recorded, so nothing ran"), {
      verdict,
      error: { code: "unavailable", message: `the audit log could not record the decision (${e.message})` },
    });
  }

  if (verdict.decision === "DENY") {
    return finish(notRun(step, "denied", failed(`policy: ${verdict.reason}`), { verdict }), hash);
  }

  if (verdict.decision === "REQUIRE_APPROVAL") {
    const approval: PendingApproval = {
      approvalId: randomUUID(),
      step: { id: step.id, capability: capability.name, input },
      capability: capability.name,
      risk: capability.risk,
      argsHash: hash,
      policyVersion: verdict.policyVersion,
      matchedRule: verdict.matchedRule,
      reason: verdict.reason,
      call,
    };
    try {
      await deps.approvals.create(approval);
    } catch (err) {
      return finish(failure(step, err, "approval: the pending approval could not be created, so nothing ran", { verdict }), hash);
    }
    return finish(notRun(step, "pending_approval", failed(`policy: ${verdict.reason}`), { verdict, approval }), hash);
  }

  const timeoutMs = deps.stepTimeoutMs ?? DEFAULT_STEP_TIMEOUT_MS;
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

  const evaluated = evaluateOutput(capability.outputSchema, output, parsedChecks.data);
  return finish(
    evaluated.evaluation.succeeded
      ? { stepId: step.id, capability: capability.name, status: "executed", verdict, ran: true, output: evaluated.output, evaluation: evaluated.evaluation }
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

/**
 * Runs one plan step: the only path from a step to a capability handler. In order: the
 * capability must be registered (never guessed); the input must pass its schema (nothing runs
 * otherwise); policy decides, and its decision is recorded in the audit sink before anything
 * acts on it (a failed record fails the step closed); DENY never runs; REQUIRE_APPROVAL creates
 * a pending approval and stops; ALLOW runs the handler under the step deadline and evaluates
 * the result deterministically. The outcome is recorded too. Nothing in the input (such as
 * `confirmed: true`) can stand in for an approval. Never throws: every failure is a result.
 */
export async function executeStep(step: ExecutableStep, deps: ExecutorDeps): Promise<StepResult> {
  return withSpan(
    "chaoscore.cognition.step",
    { [ATTR.capability]: step.capability, [ATTR.tenant]: deps.call.tenant },
    async (span) => {
      const result = await runStep(step, deps);
      span.setAttributes({
        [ATTR.outcome]: result.status,
        ...(result.verdict
          ? { [ATTR.decision]: result.verdict.decision, [ATTR.policyVersion]: result.verdict.policyVersion }
          : {}),
        ...(result.error ? { [ATTR.errorType]: result.error.code } : {}),
      });
      return result;
    },
  );
}

/**
 * Runs steps in order. Stops at the first `pending_approval` (the loop resumes only after a human
 * approved); after a `denied` or `failed` step the rest are `skipped`, for the brain to re-plan.
 * Skipped steps are not audited: no decision was made and nothing ran. Step ids must be unique.
 */
export async function executeSteps(steps: readonly ExecutableStep[], deps: ExecutorDeps): Promise<StepResult[]> {
  const seen = new Set<string>();
  for (const step of steps) {
    if (seen.has(step.id)) throw new ChaosError("invalid_argument", `step id "${step.id}" appears twice in the plan`);
    seen.add(step.id);
  }
  const results: StepResult[] = [];
  let stoppedBy: StepResult | undefined;
  for (const step of steps) {
    if (stoppedBy) {
      const why =
        stoppedBy.status === "pending_approval"
          ? `step ${stoppedBy.stepId} waits for a human approval`
          : `step ${stoppedBy.stepId} was ${stoppedBy.status}`;
      results.push({
        stepId: step.id,
        capability: step.capability,
        status: "skipped",
        ran: false,
        evaluation: failed(`skipped: ${why}`),
        error: { code: stoppedBy.status === "pending_approval" ? "approval_required" : "failed_precondition", message: `not run: ${why}` },
      });
      continue;
    }
    const result = await executeStep(step, deps);
    results.push(result);
    if (result.status !== "executed") stoppedBy = result;
  }
  return results;
}
