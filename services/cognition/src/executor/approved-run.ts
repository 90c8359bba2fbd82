import { ATTR, ChaosError, sameAsker, withSpan } from "@chaos-core/kit";
import type { CapabilityFacts } from "../capabilities/capability.js";
import { approvalNotFound, channelsOf, LEGACY_CHANNELS, type StoredApproval } from "./approvals.js";
import { askPolicy } from "./ask-policy.js";
import { auditCall } from "./audit.js";
import { driftRefusal } from "./capability-guards.js";
import { canonicalJsonAndHash } from "./canonical-json.js";
import { failed } from "./evaluate.js";
import type { ExecutorDeps } from "./executor-deps.js";
import { executeSteps } from "./plan-run.js";
import { checksSchema, runHandler } from "./run-handler.js";
import { finisher, recordDecision } from "./step-records.js";
import { failure, notRun, refused, skipped, skippedAfter } from "./step-results.js";
import type { ExecutableStep, PlanContinuation, PolicyVerdict, StepResult } from "./step-types.js";

// Running the step of an approved approval, at most once, and then the rest of the plan it stopped.

/** The caller's tenant's approval; unknown, expired, or another tenant's: one answer, `not_found`. */
async function loadApproval(approvalId: string, deps: ExecutorDeps): Promise<StoredApproval> {
  const approval = await deps.approvals.get(deps.call.tenant, approvalId);
  if (!approval) throw approvalNotFound(approvalId);
  return approval;
}

async function runApproved(approval: StoredApproval, deps: ExecutorDeps): Promise<StepResult> {
  const tenant = deps.call.tenant;
  const approvalId = approval.approvalId;
  const step: ExecutableStep = {
    id: approval.step.id,
    capability: approval.step.capability,
    input: approval.step.input,
    ...(approval.step.checks ? { checks: approval.step.checks } : {}),
  };
  const finish = finisher(step, deps, approvalId);

  // The approval is the requester's: another principal of the tenant cannot spend it.
  if (deps.call.principal !== approval.call.principal) {
    return finish(
      refused(step, "failed", "permission_denied", `not_requester: approval ${approvalId} was requested by ${approval.call.principal}; only that principal may run its step`),
      approval.argsHash,
    );
  }
  if (approval.status !== "approved") {
    if (approval.status === "rejected") {
      return finish(refused(step, "denied", "permission_denied", `approval ${approvalId} was rejected by ${approval.resolution?.resolvedBy ?? "its approver"}; the step never runs`), approval.argsHash);
    }
    const message =
      approval.status === "pending"
        ? `approval ${approvalId} has not been answered yet`
        : `approval ${approvalId} was already used; an approval runs its step once`;
    return finish(refused(step, "failed", approval.status === "pending" ? "approval_required" : "failed_precondition", message), approval.argsHash);
  }
  // An elicitation answer is the asker's client's: only whoever asked may use it (kit sameAsker).
  const asker = approval.resolution?.channel === "client_elicitation" ? sameAsker(approval.call, deps.call) : { same: true as const };
  if (!asker.same) {
    const message =
      asker.code === "wrong_session"
        ? `approval ${approvalId} was given by elicitation in another session; only that session may run it`
        : `not_requester: approval ${approvalId} was given by elicitation to a request without a session; only ${approval.call.principal}'s own request may run it`;
    return finish(refused(step, "failed", "permission_denied", message), approval.argsHash);
  }

  const capability = deps.registry.get(approval.capability);
  if (!capability || capability.name !== step.capability) {
    const unresolved = capability ? undefined : deps.registry.unresolved(approval.capability);
    if (unresolved) return finish(refused(step, "failed", unresolved.code, unresolved.message), approval.argsHash);
    return finish(refused(step, "failed", "failed_precondition", `capability "${approval.capability}" is no longer registered`), approval.argsHash);
  }
  // What was approved is the capability as pinned; a definition that changed since is not run.
  const drifted = driftRefusal(capability.name, deps);
  if (drifted) return finish(refused(step, "failed", "contract_drift", drifted.message), approval.argsHash);
  // The stored input is re-validated and re-hashed: the approval covers exactly this call.
  const parsedInput = capability.inputSchema.safeParse(step.input);
  const parsedChecks = checksSchema.safeParse(step.checks ?? []);
  if (!parsedInput.success || !parsedChecks.success) {
    return finish(refused(step, "failed", "failed_precondition", `the approved input no longer matches ${capability.name}'s schema`), approval.argsHash);
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
    return finish(failure(step, err, "input: could not be prepared for the policy decision"), approval.argsHash);
  }
  if (hash !== approval.argsHash) {
    return finish(refused(step, "failed", "failed_precondition", `the call's arguments hash ${hash} differs from the approved ${approval.argsHash}`), hash);
  }

  // Policy is asked again: an approval never outlives the policy it was given under.
  let verdict: PolicyVerdict;
  try {
    verdict = await askPolicy(capability, facts, argumentsJson, deps);
  } catch (err) {
    return finish(failure(step, err, "policy: no decision could be obtained, so nothing ran"), hash);
  }
  const unrecorded = await recordDecision(
    step,
    { type: "step.decision", call: auditCall(deps.call), stepId: step.id, capability: capability.name, risk: capability.risk, argsHash: hash, verdict, approvalId },
    deps,
  );
  if (unrecorded) return unrecorded;
  if (verdict.decision === "DENY") {
    return finish(notRun(step, "denied", failed(`policy: ${verdict.reason}`), { verdict }), hash);
  }
  if (verdict.policyVersion !== approval.policyVersion) {
    return finish(
      refused(
        step,
        "failed",
        "failed_precondition",
        `the policy changed since the approval (approved under policy version ${approval.policyVersion}, now version ${verdict.policyVersion}); ask for a new approval`,
        { verdict },
      ),
      hash,
    );
  }

  // The answer's channel must still be one policy accepts. The policy version is unchanged, so
  // this differs from the stored list only when the capability's registered risk changed.
  const answeredVia = approval.resolution?.channel;
  const accepted = verdict.decision === "REQUIRE_APPROVAL" ? (verdict.approvalChannels ?? LEGACY_CHANNELS) : channelsOf(approval);
  if (answeredVia === undefined || !accepted.includes(answeredVia)) {
    return finish(
      refused(
        step,
        "denied",
        "permission_denied",
        `channel_not_allowed: approval ${approvalId} was answered through ${answeredVia ?? "no channel"}, which policy no longer accepts for ${capability.name} (it accepts ${accepted.join(", ")}); ask for a new approval`,
        { verdict },
      ),
      hash,
    );
  }

  // With a ledger, the receipt is the authority: its nonce burns once, in the ledger's own
  // transaction, whatever replica or restart comes between approval and run.
  if (deps.receipts) {
    const receipt = approval.resolution?.receipt;
    if (!receipt) {
      return finish(refused(step, "failed", "failed_precondition", `approval ${approvalId} carries no ledger receipt; ask for a new approval`, { verdict }), hash);
    }
    let authorized: { authorized: boolean; code: string };
    try {
      authorized = await deps.receipts.authorize(approval, receipt, verdict.policyVersion, deps.call);
    } catch (err) {
      return finish(failure(step, err, "ledger: the approval's receipt could not be checked, so nothing ran", { verdict }), hash);
    }
    if (!authorized.authorized) {
      return finish(
        refused(step, authorized.code === "replayed_receipt" ? "failed" : "denied", authorized.code === "replayed_receipt" ? "failed_precondition" : "permission_denied", `the ledger refused the approval's receipt: ${authorized.code}`, { verdict }),
        hash,
      );
    }
  }

  // Consumed before the handler starts: of concurrent resumes, exactly one gets past here. (A
  // resume keeps decision-then-outcome even for a read-only capability: using up the approval and
  // its receipt's nonce are effects, and the decision above was recorded before them.)
  try {
    await deps.approvals.consume(tenant, approvalId);
  } catch (err) {
    const e = ChaosError.from(err);
    return finish(refused(step, "failed", e.code, e.message, { verdict }), hash);
  }
  return runHandler(step, capability, input, parsedChecks.data, verdict, hash, deps, finish);
}

/**
 * Runs the step of an approved approval, at most once. In order: the approval must exist in the
 * caller's tenant (else `not_found`, thrown), be run by the principal that requested it
 * (`not_requester`), be `approved` (a rejected one is `denied` and never runs; a pending or used
 * one is refused), and, when given by client elicitation, be resumed by whoever asked
 * (kit's `sameAsker`: the requesting session, or the requester's own request without one); the stored input is validated again and its `argsHash` recomputed and compared;
 * policy is asked again, its decision recorded, and it must neither DENY nor have changed
 * version since the approval (`failed_precondition` naming both), and the channel that answered
 * must be one the fresh verdict accepts (`channel_not_allowed`); then the approval is
 * consumed atomically BEFORE the handler runs (concurrent resumes: one runs, the rest are
 * refused), and the handler runs under the step deadline and is evaluated, as in
 * `executeStep` (step-run.ts). Every refusal and outcome is audited.
 */
export async function executeApproved(approvalId: string, deps: ExecutorDeps): Promise<StepResult> {
  return runApprovedStep(await loadApproval(approvalId, deps), deps);
}

function runApprovedStep(approval: StoredApproval, deps: ExecutorDeps): Promise<StepResult> {
  return withSpan("chaoscore.cognition.step", { [ATTR.tenant]: deps.call.tenant }, async (span) => {
    const result = await runApproved(approval, deps);
    span.setAttributes({
      [ATTR.capability]: result.capability,
      [ATTR.outcome]: result.status,
      ...(result.verdict ? { [ATTR.decision]: result.verdict.decision, [ATTR.policyVersion]: result.verdict.policyVersion } : {}),
      ...(result.error ? { [ATTR.errorType]: result.error.code } : {}),
    });
    return result;
  });
}

/** What {@link executeApprovedPlan} did. */
export interface ApprovedPlanRun {
  /** The approved step's result first, then one per step of the rest of its plan. */
  readonly results: StepResult[];
  /**
   * Set when the plan ran through with this call (every step of it executed): its objective and
   * the capabilities it ran, in order — a procedure for that objective.
   */
  readonly completed?: { readonly objective: string; readonly capabilities: readonly string[] };
}

/** The call that plans an expired plan's remaining steps again, in words an agent can follow. */
function planAgain(next: PlanContinuation): string {
  return next.objective !== undefined
    ? `plan them again with chaoscore_plan ${JSON.stringify({ objective: next.objective })} (it plans the whole objective; the steps that ran are in this answer)`
    : `send them again with chaoscore_execute {"steps": [...]} (the steps ${next.rest.map((s) => s.id).join(", ")} as you gave them)`;
}

/**
 * Runs an approved step ({@link executeApproved}) and then the rest of the plan it stopped, when
 * the approval keeps one: each remaining step through policy again, stopping at the next one that
 * needs approval (whose approval keeps the rest in turn) or after one that is denied or fails. A
 * step that did not run leaves the plan where it was (the approval may still be pending); one
 * that ran and failed skips the rest. Once the plan expired (`expiresAt`), the approved step still
 * runs, and the rest is answered `skipped` with `failed_precondition`, each naming the steps that
 * did not run and the call that would plan them again. Nothing is dropped silently.
 */
export async function executeApprovedPlan(approvalId: string, deps: ExecutorDeps): Promise<ApprovedPlanRun> {
  const approval = await loadApproval(approvalId, deps);
  const result = await runApprovedStep(approval, deps);
  const next = approval.continuation;
  if (!next || !result.ran) return { results: [result] };
  if (result.status !== "executed") {
    const { code, why } = skippedAfter(result);
    return { results: [result, ...next.rest.map((s) => skipped(s, code, why))] };
  }
  if (next.rest.length > 0 && Date.parse(next.expiresAt) <= Date.now()) {
    const names = next.rest.map((s) => `${s.id} (${s.capability})`).join(", ");
    const why =
      `plan_expired: the plan${next.planId ? ` ${next.planId}` : ""} expired at ${next.expiresAt}, so the steps after ${result.stepId} did not run: ${names}; ` +
      planAgain(next);
    return { results: [result, ...next.rest.map((s) => skipped(s, "failed_precondition", why))] };
  }
  const earlier = new Map(Object.entries(next.outputs));
  earlier.set(result.stepId, result.output);
  const executed = [...next.executed, result.capability];
  let rest: StepResult[];
  try {
    rest = await executeSteps(next.rest, deps, earlier, {
      ...(next.planId !== undefined ? { planId: next.planId } : {}),
      ...(next.objective !== undefined ? { objective: next.objective } : {}),
      expiresAt: next.expiresAt,
      executed,
    });
  } catch (err) {
    // The steps were checked when the plan first ran; should they be refused now, say so for each.
    const e = ChaosError.from(err);
    rest = next.rest.map((s) => skipped(s, e.code, e.message));
  }
  const results = [result, ...rest];
  const { objective } = next;
  if (objective === undefined || !rest.every((r) => r.status === "executed")) return { results };
  return { results, completed: { objective, capabilities: [...executed, ...rest.map((r) => r.capability)] } };
}
