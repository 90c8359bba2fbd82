import { randomUUID } from "node:crypto";
import { ATTR, ChaosError, withSpan } from "@chaos-core/kit";
import { mayRecordInOneEntry, type CapabilityFacts } from "../capabilities/capability.js";
import { resolveReferences } from "../plans/step-reference.js";
import { LEGACY_CHANNELS, type StoredApproval } from "./approvals.js";
import { askPolicy } from "./ask-policy.js";
import { auditCall, type StepDecisionEvent } from "./audit.js";
import { driftRefusal, internalRefusal } from "./capability-guards.js";
import { canonicalJsonAndHash } from "./canonical-json.js";
import { describeIssues, failed } from "./evaluate.js";
import type { ExecutorDeps } from "./executor-deps.js";
import { checksSchema, runHandler } from "./run-handler.js";
import { finisher, readFinisher, recordDecision } from "./step-records.js";
import { failure, notRun } from "./step-results.js";
import type { ExecutableStep, PendingApproval, PlanContinuation, PolicyVerdict, StepResult } from "./step-types.js";

// One step through its stages: capability, references, schema, policy, audit, then the handler or
// a pending approval. The only path from a step to a handler besides an approved run.

/** How a step is run. */
export interface ExecuteStepOptions {
  /**
   * The cognitive core's own bookkeeping (the brain's episode and procedure writes): the only
   * way an internal capability runs, and a REQUIRE_APPROVAL is recorded and the write skipped
   * (outcome `denied`, error `approval_required`), never turned into a pending approval, because
   * bookkeeping never waits for a person. Set by the brain only; nothing on the wire sets it.
   */
  readonly bookkeeping?: boolean;
  /**
   * Outputs of the steps that executed earlier in the same run, by step id: what step references
   * (`{"$step": id, "path": pointer}`, plans/step-reference.ts) in the input resolve against.
   * Without it a reference fails the step with `invalid_argument`.
   */
  readonly outputs?: ReadonlyMap<string, unknown>;
  /**
   * The rest of the plan this step belongs to, built only when the step stops for approval: the
   * pending approval keeps it, so the plan goes on once the approved step ran.
   */
  readonly continuation?: () => PlanContinuation;
}

/** One step through its stages, in order; each audit record must succeed before the next action. */
async function runStep(step: ExecutableStep, deps: ExecutorDeps, options: ExecuteStepOptions): Promise<StepResult> {
  const call = auditCall(deps.call);
  const finish = finisher(step, deps);

  const capability = deps.registry.get(step.capability);
  if (!capability) {
    // The caller's tenant registry could not be read: the name may be one of its own upstream tools.
    const unresolved = deps.registry.unresolved(step.capability);
    if (unresolved) return finish(failure(step, unresolved, `capability: "${step.capability}" could not be resolved`));
    const known = deps.registry.offered().map((c) => c.name).join(", ");
    return finish(
      failure(
        step,
        new ChaosError("not_found", `no capability is registered as "${step.capability}"; registered: ${known}`),
        `capability: "${step.capability}" is not registered`,
      ),
    );
  }
  if (capability.internal === true && options.bookkeeping !== true) {
    return finish(failure(step, internalRefusal(step.id, capability.name), `capability: "${capability.name}" is internal`));
  }
  const drifted = driftRefusal(capability.name, deps);
  if (drifted) return finish(failure(step, drifted, `capability: ${drifted.message}`));

  // References are resolved first: schema, hash, policy and any approval all see the real value.
  let resolved: unknown;
  try {
    resolved = resolveReferences(step.input, options.outputs ?? new Map());
  } catch (err) {
    const e = ChaosError.from(err);
    return finish(notRun(step, "failed", failed(e.message), { error: { code: e.code, message: e.message } }));
  }

  const parsedInput = capability.inputSchema.safeParse(resolved);
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
  let argumentsJson: string;
  let facts: CapabilityFacts;
  try {
    // Serialised once: the hash the approval binds and the arguments policy's rules read (args).
    ({ text: argumentsJson, hash } = canonicalJsonAndHash(input));
    facts = capability.facts?.(input) ?? {};
  } catch (err) {
    return finish(failure(step, err, "input: could not be prepared for the policy decision"));
  }

  let verdict: PolicyVerdict;
  try {
    verdict = await askPolicy(capability, facts, argumentsJson, deps);
  } catch (err) {
    return finish(failure(step, err, "policy: no decision could be obtained, so nothing ran"), hash);
  }

  // A step with no side effect that policy allowed records its decision and its outcome in one
  // entry, after the handler and before the result is returned (docs/ledger.md, "One entry for a
  // read-only step"): it has no effect that the decision would have to precede, and what it
  // read leaves only with its result, which waits for the entry.
  if (verdict.decision === "ALLOW" && mayRecordInOneEntry(capability)) {
    return runHandler(step, capability, input, parsedChecks.data, verdict, hash, deps, readFinisher(step, capability, verdict, hash, deps));
  }

  const decisionEvent: StepDecisionEvent = {
    type: "step.decision",
    call,
    stepId: step.id,
    capability: capability.name,
    risk: capability.risk,
    argsHash: hash,
    verdict,
  };
  const unrecorded = await recordDecision(step, decisionEvent, deps);
  if (unrecorded) return unrecorded;

  if (verdict.decision === "DENY") {
    return finish(notRun(step, "denied", failed(`policy: ${verdict.reason}`), { verdict }), hash);
  }

  if (verdict.decision === "REQUIRE_APPROVAL" && options.bookkeeping === true) {
    return finish(
      notRun(step, "denied", failed(`policy: ${verdict.reason}`, "bookkeeping never waits for a person: the write was skipped"), {
        verdict,
        error: {
          code: "approval_required",
          message: `policy requires a person's approval for ${capability.name} (${verdict.matchedRule}); bookkeeping never waits for one, so nothing was written`,
        },
      }),
      hash,
    );
  }

  if (verdict.decision === "REQUIRE_APPROVAL") {
    const approval: PendingApproval = {
      approvalId: randomUUID(),
      step: { id: step.id, capability: capability.name, input, ...(parsedChecks.data.length > 0 ? { checks: parsedChecks.data } : {}) },
      capability: capability.name,
      risk: capability.risk,
      argsHash: hash,
      policyVersion: verdict.policyVersion,
      matchedRule: verdict.matchedRule,
      reason: verdict.reason,
      channels: verdict.approvalChannels ?? LEGACY_CHANNELS,
      ...(verdict.channelsRule ? { channelsRule: verdict.channelsRule } : {}),
      call,
      ...(options.continuation ? { continuation: options.continuation() } : {}),
    };
    let created: StoredApproval;
    try {
      created = await deps.approvals.create(approval);
    } catch (err) {
      return finish(failure(step, err, "approval: the pending approval could not be created, so nothing ran", { verdict }), hash);
    }
    return finish(notRun(step, "pending_approval", failed(`policy: ${verdict.reason}`), { verdict, approval }), hash, created);
  }

  return runHandler(step, capability, input, parsedChecks.data, verdict, hash, deps, finish);
}

/**
 * Runs one plan step: the only path from a step to a capability handler. In order: the
 * capability must be registered (never guessed) and, unless this is bookkeeping, not internal
 * (`invalid_argument`); step references in the input are resolved against `options.outputs`
 * (plans/step-reference.ts; a dangling one fails the step, naming the field); the resolved input
 * must pass its schema (nothing runs otherwise); policy decides
 * (for a capability that implies others, the strictest of its decisions and theirs), and its
 * decision is recorded in the audit sink before anything acts on it (a failed record fails the
 * step closed); DENY never runs; REQUIRE_APPROVAL creates a pending approval and stops (for
 * bookkeeping: the step is `denied` with `approval_required`, no approval is created); ALLOW
 * runs the handler under the step deadline and evaluates the result deterministically. The
 * outcome is recorded too. An allowed step of a capability with no side effect
 * (`hasNoSideEffect`: read-only, not destructive, closed world) records decision and outcome in
 * one `step.read` entry instead, after the handler and before the result is returned; if that
 * entry cannot be written the result is withheld (`failed`, `unavailable`). Nothing in the input
 * (such as `confirmed: true`) can stand in for an approval. Never throws: every failure is a
 * result.
 */
export async function executeStep(step: ExecutableStep, deps: ExecutorDeps, options: ExecuteStepOptions = {}): Promise<StepResult> {
  return withSpan(
    "chaoscore.cognition.step",
    { [ATTR.capability]: step.capability, [ATTR.tenant]: deps.call.tenant },
    async (span) => {
      const result = await runStep(step, deps, options);
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
