import { randomUUID } from "node:crypto";
import { z } from "zod";
import { ATTR, ChaosError, sameAsker, withSpan, type CallContext, type ErrorCode, type ServiceClient } from "@chaos-core/kit";
import type { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { ApprovalChannel as PolicyChannel, Decision, Risk, type PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { hasNoSideEffect, type Capability, type CapabilityFacts, type CapabilityRisk } from "../capabilities/capability.js";
import type { CapabilityRegistry } from "../capabilities/registry.js";
import type { AIProvider } from "../providers/ai-provider.js";
import {
  approvalNotFound,
  channelsOf,
  LEGACY_CHANNELS,
  resolvedByOf,
  resolverRefusal,
  wrongState,
  type ApprovalStore,
  type ResolveApprovalInput,
  type StoredApproval,
} from "./approvals.js";
import {
  auditCall,
  type ApprovalRefusedEvent,
  type ApprovalResolutionEvent,
  type AuditSink,
  type StepDecisionEvent,
  type StepOutcomeEvent,
  type StepReadEvent,
} from "./audit.js";
import { argsHash as hashArgs } from "./canonical-json.js";
import type { StepReceipts } from "./ledger.js";
import { findReferences, resolveReferences } from "../plans/step-reference.js";
import { describeIssues, evaluateOutput, failed, stepCheckSchema, type Evaluation, type StepCheck } from "./evaluate.js";
import type {
  ApprovalChannel,
  ExecutableStep,
  ImpliedDecision,
  PendingApproval,
  PlanContinuation,
  PolicyVerdict,
  StepResult,
} from "./step-types.js";

/** How long a handler may run when the deps name no deadline. */
export const DEFAULT_STEP_TIMEOUT_MS = 30_000;

/** Everything the executor needs for one caller's steps. */
export interface ExecutorDeps {
  readonly registry: CapabilityRegistry;
  readonly policy: ServiceClient<typeof PolicyService>;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly provider: AIProvider;
  readonly audit: AuditSink;
  readonly approvals: ApprovalStore;
  /**
   * Receipts from the ledger: when set, an approved step runs only after the ledger authorizes
   * the receipt issued for its approval (burning its nonce). Unset only where no ledger runs.
   */
  readonly receipts?: StepReceipts;
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

const CHANNEL: Partial<Record<PolicyChannel, ApprovalChannel>> = {
  [PolicyChannel.CLIENT_ELICITATION]: "client_elicitation",
  [PolicyChannel.APPROVER]: "approver",
  [PolicyChannel.OPERATOR]: "operator",
  [PolicyChannel.CONSOLE]: "console",
};

/**
 * Policy's channels for a REQUIRE_APPROVAL, as names. A channel this build cannot read is
 * dropped (it could not be answered through anyway); a list that ends up empty (a policy service
 * older than channels) takes {@link LEGACY_CHANNELS}: never the client's own answer by default.
 */
function channelsFrom(channels: readonly PolicyChannel[]): readonly ApprovalChannel[] {
  const named = [...new Set(channels.map((c) => CHANNEL[c]).filter((c): c is ApprovalChannel => c !== undefined))];
  return named.length > 0 ? named : LEGACY_CHANNELS;
}

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

/** Policy's decision for one capability name at one risk. */
async function evaluate(name: string, risk: CapabilityRisk, facts: CapabilityFacts, deps: ExecutorDeps): Promise<PolicyVerdict> {
  const res = await deps.policy.evaluate(
    {
      capability: name,
      risk: RISK[risk],
      facts: { httpHost: facts.httpHost ?? "", attributes: { ...facts.attributes } },
    },
    { ctx: deps.call, ...(deps.signal ? { signal: deps.signal } : {}) },
  );
  const decision = VERDICT[res.decision];
  // An answer this build cannot read is not permission: fail closed.
  if (!decision) throw new ChaosError("internal", `policy answered an unknown decision (${res.decision})`);
  const verdict = { decision, matchedRule: res.matchedRule, reason: res.reason, policyVersion: Number(res.policyVersion) };
  if (decision !== "REQUIRE_APPROVAL") return verdict;
  return { ...verdict, approvalChannels: channelsFrom(res.approvalChannels), channelsRule: res.channelsRule };
}

const STRICTNESS: Record<PolicyVerdict["decision"], number> = { ALLOW: 0, REQUIRE_APPROVAL: 1, DENY: 2 };

/**
 * The strictest of a capability's own verdict and its implied ones (the capability's own wins a
 * tie). Verdicts under different policy versions fail closed: they were not one decision. When
 * several require approval, only channels every one of them accepts count.
 */
function strictest(capability: Capability, own: PolicyVerdict, implied: readonly ImpliedDecision[]): PolicyVerdict {
  for (const i of implied) {
    if (i.verdict.policyVersion !== own.policyVersion) {
      throw new ChaosError(
        "conflict",
        `policy changed while ${capability.name} was being decided (version ${own.policyVersion} for it, ` +
          `${i.verdict.policyVersion} for ${i.capability}, which it implies); nothing ran, retry`,
      );
    }
  }
  const top = implied.reduce<ImpliedDecision | undefined>(
    (best, i) => (STRICTNESS[i.verdict.decision] > STRICTNESS[(best?.verdict ?? own).decision] ? i : best),
    undefined,
  );
  const held = top?.verdict ?? own;
  const base: PolicyVerdict = {
    decision: held.decision,
    matchedRule: top ? `${top.capability}: ${held.matchedRule}` : held.matchedRule,
    reason: held.reason,
    policyVersion: own.policyVersion,
    implied,
    ...(top ? { decidedBy: top.capability } : {}),
  };
  if (held.decision !== "REQUIRE_APPROVAL") return base;
  const asking = [own, ...implied.map((i) => i.verdict)].filter((v) => v.decision === "REQUIRE_APPROVAL");
  const channels = (held.approvalChannels ?? LEGACY_CHANNELS).filter((c) =>
    asking.every((v) => (v.approvalChannels ?? LEGACY_CHANNELS).includes(c)),
  );
  if (channels.length === 0) {
    throw new ChaosError(
      "failed_precondition",
      `policy's approval channels for ${capability.name} and what it implies (${implied.map((i) => i.capability).join(", ")}) ` +
        "have none in common, so no approval could satisfy them all; nothing ran",
    );
  }
  return { ...base, approvalChannels: channels, ...(held.channelsRule ? { channelsRule: held.channelsRule } : {}) };
}

/**
 * Policy's verdict for a call: the capability's own decision, and for one that implies others,
 * the strictest of its own and theirs, each implied capability evaluated at its registered risk
 * with the same facts (docs/approvals.md §7).
 */
function askPolicy(capability: Capability, facts: CapabilityFacts, deps: ExecutorDeps): Promise<PolicyVerdict> {
  // The loop's policy stage: its own span, whichever step (plan, explicit, bookkeeping) asks.
  return withSpan("chaoscore.cognition.policy", { [ATTR.capability]: capability.name }, async (span) => {
    const verdict = await decideStrictest(capability, facts, deps);
    span.setAttributes({ [ATTR.decision]: verdict.decision, [ATTR.policyVersion]: verdict.policyVersion });
    return verdict;
  });
}

async function decideStrictest(capability: Capability, facts: CapabilityFacts, deps: ExecutorDeps): Promise<PolicyVerdict> {
  const own = await evaluate(capability.name, capability.risk, facts, deps);
  if (!capability.implies || capability.implies.length === 0) return own;
  const implied: ImpliedDecision[] = [];
  for (const name of capability.implies) {
    const target = deps.registry.get(name);
    // The registry refuses this at build time; a registry built some other way still fails closed.
    if (!target) throw new ChaosError("failed_precondition", `${capability.name} implies "${name}", which is not registered; nothing ran`);
    // Its policy is asked at its registered risk: a definition that drifted from its contract is not one to trust for that.
    const drifted = driftRefusal(name, deps);
    if (drifted) throw drifted;
    implied.push({ capability: name, risk: target.risk, verdict: await evaluate(name, target.risk, facts, deps) });
  }
  return strictest(capability, own, implied);
}

/** Finishes a step: records its outcome (with the stored approval it created, if any) and returns it. */
type Finish = (result: StepResult, hash?: string, created?: StoredApproval) => Promise<StepResult>;

/** Records a step's outcome; a result that cannot be recorded is not returned as a success. */
function finisher(step: { readonly id: string; readonly capability: string }, deps: ExecutorDeps, approvalId?: string): Finish {
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
function readFinisher(step: ExecutableStep, capability: Capability, verdict: PolicyVerdict, hash: string, deps: ExecutorDeps): Finish {
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
async function recordDecision(step: ExecutableStep, event: StepDecisionEvent, deps: ExecutorDeps): Promise<StepResult | undefined> {
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

/** Runs the handler under the step deadline and the caller's cancellation, then evaluates its output. */
async function runHandler(
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

  const evaluated = evaluateOutput(capability.outputSchema, output, checks);
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

/** The refusal of an internal capability named by a plan or an explicit step. */
function internalRefusal(stepId: string, capability: string): ChaosError {
  return new ChaosError(
    "invalid_argument",
    `step ${stepId}: "${capability}" is an internal capability (the cognitive core's own bookkeeping); plans and explicit steps cannot call it`,
  );
}

/**
 * The run-time rug-pull guard's refusal (docs/contracts.md §7): a capability whose definition no
 * longer matches the contract the lock pins is not run (`contract_drift`, naming the sections).
 */
function driftRefusal(name: string, deps: ExecutorDeps): ChaosError | undefined {
  const drifted = deps.registry.drift(name);
  return drifted === undefined ? undefined : new ChaosError("contract_drift", `${drifted}: this capability no longer matches its pinned contract and is not run`);
}

/** One step through its stages, in order; each audit record must succeed before the next action. */
async function runStep(step: ExecutableStep, deps: ExecutorDeps, options: ExecuteStepOptions): Promise<StepResult> {
  const call = auditCall(deps.call);
  const finish = finisher(step, deps);

  const capability = deps.registry.get(step.capability);
  if (!capability) {
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

  // A step with no side effect that policy allowed records its decision and its outcome in one
  // entry, after the handler and before the result is returned (docs/ledger.md, "One entry for a
  // read-only step"): it has no effect that the decision would have to precede, and what it
  // read leaves only with its result, which waits for the entry.
  if (verdict.decision === "ALLOW" && hasNoSideEffect(capability.annotations)) {
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

/** The result of a step that was not attempted because of `why`. */
function skipped(step: { readonly id: string; readonly capability: string }, code: ErrorCode, why: string): StepResult {
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
function skippedAfter(stoppedBy: StepResult): { code: ErrorCode; why: string } {
  return stoppedBy.status === "pending_approval"
    ? { code: "approval_required", why: `step ${stoppedBy.stepId} waits for a human approval` }
    : { code: "failed_precondition", why: `step ${stoppedBy.stepId} was ${stoppedBy.status}` };
}

/**
 * Runs steps in order; a step's references (`{"$step": id, "path": pointer}`) resolve against the
 * outputs of steps that executed before it in this call, or in `earlier` (step id → output, for a
 * re-plan continuing a run). Stops at the first `pending_approval` (the loop resumes only after a human
 * approved; with an `origin`, the approval keeps the steps after it, which {@link executeApprovedPlan}
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

/** A resume refused before any handler ran, recorded like any outcome. */
function refused(step: ExecutableStep, status: "failed" | "denied", code: ErrorCode, message: string, extra: Partial<StepResult> = {}): StepResult {
  return notRun(step, status, failed(`approval: ${message}`), { error: { code, message }, ...extra });
}

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
  let facts: CapabilityFacts;
  try {
    hash = hashArgs(input);
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
    verdict = await askPolicy(capability, facts, deps);
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
 * {@link executeStep}. Every refusal and outcome is audited.
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

/** What {@link resolveApproval} needs. */
export interface ResolveApprovalDeps {
  readonly approvals: ApprovalStore;
  readonly audit: AuditSink;
  readonly receipts?: StepReceipts;
}

/** Records an answer's event (resolving with its ledger seq, when there is a ledger); an audit log that cannot hold it fails the call (`unavailable`). */
async function recordAnswer(deps: ResolveApprovalDeps, event: ApprovalResolutionEvent | ApprovalRefusedEvent, what: string): Promise<bigint | undefined> {
  try {
    return await deps.audit.record(event);
  } catch (err) {
    throw new ChaosError("unavailable", `the audit log could not record ${what} (${ChaosError.from(err).message})`);
  }
}

/** An answered approval as {@link resolveApproval} stored it, with the ledger entry that records the answer. */
export interface ResolvedApproval extends StoredApproval {
  /** The `approval.resolution` entry's seq; absent when the audit sink is not the ledger. */
  readonly ledgerSeq?: bigint;
}

/**
 * Records a human's answer to a pending approval, once. The resolver is the verified caller
 * (`input.by`), and the channel must be one policy accepts for this approval, then meet its own
 * rule ({@link resolverRefusal}): a refusal is recorded as `approval.refused` and thrown as
 * `permission_denied` whose message starts with its code (`channel_not_allowed`,
 * `wrong_session`, `not_requester`, `not_operator`, `self_approval`). The answer is audited before the store applies
 * it (an audit failure refuses the answer); the store's transition is atomic, so a second answer
 * is `failed_precondition`. Another tenant's or an unknown approval is `not_found`.
 */
export async function resolveApproval(approvalId: string, input: ResolveApprovalInput, deps: ResolveApprovalDeps): Promise<ResolvedApproval> {
  const tenant = input.by.tenant;
  const found = await deps.approvals.get(tenant, approvalId);
  if (!found) throw approvalNotFound(approvalId);
  // What every record of an answer says: which approval, through which channel, by whom.
  const answer = {
    call: auditCall(input.by),
    approvalId,
    capability: found.capability,
    argsHash: found.argsHash,
    channel: input.channel,
    principal: input.by.principal,
  };
  const refusal = resolverRefusal(found, input);
  if (refusal) {
    // Recorded before it is returned, like every denial: an agent trying to answer for a person
    // leaves a trace.
    await recordAnswer(deps, { type: "approval.refused", ...answer, code: refusal.code, allowed: channelsOf(found) }, "the refused answer");
    throw new ChaosError("permission_denied", refusal.message);
  }
  if (found.status !== "pending") {
    throw wrongState(approvalId, found.status, "resolve");
  }
  const ledgerSeq = await recordAnswer(
    deps,
    { type: "approval.resolution", ...answer, approved: input.approve, resolvedBy: resolvedByOf(input.channel, input.by) },
    "the answer, so it was not applied",
  );
  // An approving answer gets its signed receipt before it is stored: an approval without one
  // could never run once a ledger is wired.
  const receipt = input.approve && deps.receipts ? await deps.receipts.issue(found, input) : undefined;
  const stored = await deps.approvals.resolve(tenant, approvalId, receipt ? { ...input, receipt } : input);
  return ledgerSeq !== undefined ? { ...stored, ledgerSeq } : stored;
}
