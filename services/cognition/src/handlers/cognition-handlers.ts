import type { MessageInitShape } from "@bufbuild/protobuf";
import { ChaosError, type HandlerContext, type Logger, type ServiceClient, type ServiceImpl } from "@chaos-core/kit";
import {
  ApprovalChannel,
  type AchieveResponseSchema,
  type CognitionService,
  type ExecuteRequest,
  type ExecuteResponseSchema,
  type ExecuteStreamResponseSchema,
} from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import type { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { runCognitiveCore, type BrainDeps, type CognitiveTrace } from "../brain/brain.js";
import { reason } from "../brain/intent.js";
import { recallProcedure, recordProcedure } from "../brain/memory-records.js";
import { plan } from "../brain/planner.js";
import { objectiveSignature } from "../brain/signature.js";
import type { CapabilityRegistry } from "../capabilities/registry.js";
import type { TenantUpstreams } from "../capabilities/tenant-upstreams.js";
import { approvalNotFound, OPERATOR_PRINCIPAL, type ApprovalStore } from "../executor/approvals.js";
import type { AuditSink } from "../executor/audit.js";
import type { StepReceipts } from "../executor/ledger.js";
import type { RuleArgsGuard } from "../executor/rule-args-guard.js";
import { resolveApproval } from "../executor/approval-resolution.js";
import { executeApprovedPlan } from "../executor/approved-run.js";
import { executeSteps, type PlanOrigin } from "../executor/plan-run.js";
import type { StepProgress } from "../executor/executor-deps.js";
import type { ApprovalChannel as DomainApprovalChannel, ExecutableStep } from "../executor/step-types.js";
import { DEFAULT_PLAN_TTL_SECONDS, MAX_PLAN_STEPS, planScopeOf, type PlanStore } from "../plans/plan-store.js";
import { describeProvider } from "../providers/ai-provider.js";
import type { AIProvider } from "../providers/ai-provider.js";
import {
  approvalSummaryToProto,
  approvalToProto,
  capabilityToProto,
  intentFromProto,
  intentToProto,
  planToProto,
  stepFromProto,
  stepResultToProto,
  traceToProto,
} from "./proto.js";
import { eventsWhile } from "./event-queue.js";
import { upstreamStatuses, type UpstreamsView } from "./upstream-status.js";

/** What the cognition handlers need; every piece is built by the caller (main or the standalone composer). */
export interface CognitionDeps {
  readonly registry: CapabilityRegistry;
  readonly provider: AIProvider;
  readonly policy: ServiceClient<typeof PolicyService>;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly plans: PlanStore;
  readonly audit: AuditSink;
  /** Pending approvals and their answers (Redis when replicas share them, in-process otherwise). */
  readonly approvals: ApprovalStore;
  /** Ledger receipts for approved steps; set whenever a ledger is wired (main, standalone). */
  readonly receipts?: StepReceipts;
  /** Rules' conditions checked against the pins served (`createRuleArgsGuard`); set by the default deps. */
  readonly ruleArgs?: RuleArgsGuard;
  readonly logger: Logger;
  /** Per-step handler deadline; the executor's default (30 s) when unset. */
  readonly stepTimeoutMs?: number;
  /** The upstreams this replica fronts, for ListUpstreams; none when unset. */
  readonly upstreams?: UpstreamsView;
  /** Each tenant's own registry upstreams (docs/federation.md §12), merged into its callers' view; none when unset. */
  readonly tenantUpstreams?: Pick<TenantUpstreams, "forCall" | "breakers">;
}

/** What ListUpstreams reads: the operator's upstreams and the tenants' own connections' breakers (scoped by tenant). */
function upstreamsView(deps: CognitionDeps): UpstreamsView | undefined {
  const own = deps.tenantUpstreams;
  if (!own) return deps.upstreams;
  const base = deps.upstreams;
  return { breakers: () => [...(base?.breakers() ?? []), ...own.breakers()], transports: base?.transports ?? new Map() };
}

/**
 * The registry as this call's caller sees it (docs/federation.md §6): the upstream tools it is
 * offered, its tenant's own registry upstreams among them.
 */
async function callerRegistry(deps: CognitionDeps, ctx: HandlerContext): Promise<CapabilityRegistry> {
  const own = deps.tenantUpstreams ? await deps.tenantUpstreams.forCall(ctx.call) : undefined;
  return deps.registry.forCaller(ctx.call, own);
}

/** How many pending approvals ListApprovals returns when the request names no limit. */
const DEFAULT_LIST_APPROVALS = 100;

type AchieveEvent = MessageInitShape<typeof AchieveResponseSchema>;
type ExecuteStreamEvent = MessageInitShape<typeof ExecuteStreamResponseSchema>;
type ExecuteResponseInit = MessageInitShape<typeof ExecuteResponseSchema>;

const CHANNELS: Partial<Record<ApprovalChannel, DomainApprovalChannel>> = {
  [ApprovalChannel.ELICITATION]: "client_elicitation",
  [ApprovalChannel.APPROVER]: "approver",
  [ApprovalChannel.OPERATOR]: "operator",
  [ApprovalChannel.CONSOLE]: "console",
};

/**
 * Whether a GetApproval caller reads as a reviewer: a person who may answer approvals (APPROVER,
 * CONSOLE: the edge vouches for the role, as on ResolveApproval) or the operator (OPERATOR, as
 * the principal operator only). Anyone else reads only the approvals it requested.
 */
function isReviewer(channel: ApprovalChannel, ctx: HandlerContext): boolean {
  if (channel === ApprovalChannel.APPROVER || channel === ApprovalChannel.CONSOLE) return true;
  return channel === ApprovalChannel.OPERATOR && ctx.call.principal === OPERATOR_PRINCIPAL;
}

/** Why a plan id finds nothing: expired, never made, or another scope's or tenant's — one answer, so ids reveal nothing. */
function planNotFound(id: string, ctx: HandlerContext): ChaosError {
  return new ChaosError(
    "not_found",
    ctx.call.sessionId
      ? `no plan ${id} in this session (plans expire, and belong to the session that made them)`
      : `no plan ${id} for ${ctx.call.principal} (plans expire, and belong to the principal that made them)`,
  );
}

/** The executor's deps for one call: the verified caller and its cancellation. */
async function brainDeps(deps: CognitionDeps, ctx: HandlerContext, signal: AbortSignal = ctx.signal, onProgress?: (p: StepProgress) => void): Promise<BrainDeps> {
  return {
    // The caller's view: an upstream tool it is not offered does not exist for it (docs/federation.md §6).
    registry: await callerRegistry(deps, ctx),
    provider: deps.provider,
    policy: deps.policy,
    memory: deps.memory,
    audit: deps.audit,
    approvals: deps.approvals,
    ...(deps.receipts ? { receipts: deps.receipts } : {}),
    ...(deps.ruleArgs ? { ruleArgs: deps.ruleArgs } : {}),
    call: ctx.call,
    signal,
    ...(deps.stepTimeoutMs !== undefined ? { stepTimeoutMs: deps.stepTimeoutMs } : {}),
    ...(onProgress ? { onProgress } : {}),
  };
}

function cancelled(signal: AbortSignal): ChaosError {
  return signal.reason instanceof ChaosError ? signal.reason : new ChaosError("cancelled", "the call was cancelled");
}

/** Execute's work, shared by Execute and ExecuteStream (whose caller hears the steps' progress). */
async function executeRequest(deps: CognitionDeps, req: ExecuteRequest, ctx: HandlerContext, signal: AbortSignal, onProgress?: (p: StepProgress) => void): Promise<ExecuteResponseInit> {
  let steps: readonly ExecutableStep[];
  let origin: PlanOrigin;
  switch (req.target.case) {
    case "planId": {
      const id = req.target.value;
      const stored = await deps.plans.get(ctx.call.tenant, planScopeOf(ctx.call), id);
      if (!stored) throw planNotFound(id, ctx);
      steps = stored.steps;
      origin = { planId: id, objective: stored.objective, expiresAt: stored.expiresAt };
      break;
    }
    case "steps": {
      const list = req.target.value.steps;
      if (list.length === 0) throw new ChaosError("invalid_argument", "steps must name at least one step");
      if (list.length > MAX_PLAN_STEPS) {
        throw new ChaosError("invalid_argument", `at most ${MAX_PLAN_STEPS} steps may run in one call (got ${list.length})`);
      }
      steps = list.map(stepFromProto);
      // Explicit steps live as long as a stored plan would: an approval among them keeps the rest that long.
      origin = { expiresAt: new Date(Date.now() + DEFAULT_PLAN_TTL_SECONDS * 1000).toISOString() };
      break;
    }
    case "approvalId": {
      // The approved step at most once (the executor checks the approval, policy and the
      // arguments again), then the rest of its plan, each step through policy again.
      const run = await brainDeps(deps, ctx, signal, onProgress);
      const ran = await executeApprovedPlan(req.target.value, run);
      if (ran.completed) await recordProcedure(objectiveSignature(ran.completed.objective), ran.completed.capabilities, new Date(), run);
      return { results: ran.results.map(stepResultToProto) };
    }
    default:
      throw new ChaosError("invalid_argument", "set plan_id (a plan from Plan in this session, or by this principal without one), steps, or approval_id");
  }
  const run = await brainDeps(deps, ctx, signal, onProgress);
  const results = await executeSteps(steps, run, new Map(), origin);
  // A stored plan that ran through is a procedure for its objective, as an Achieve run's is:
  // the next Plan of the same objective starts from it. Written as bookkeeping (policy first,
  // in the ledger); a write policy refuses is simply not made.
  if (origin.objective !== undefined && results.length > 0 && results.every((r) => r.status === "executed")) {
    await recordProcedure(objectiveSignature(origin.objective), results.map((r) => r.capability), new Date(), run);
  }
  return { results: results.map(stepResultToProto) };
}

/**
 * The gRPC surface of the cognition service. Handlers map proto ⇄ domain only: the tenant,
 * principal and session are the verified call context's, never a request field; every step runs
 * through the executor (policy first); domain `ChaosError`s pass through for kit to map.
 */
export function createCognitionHandlers(deps: CognitionDeps): ServiceImpl<typeof CognitionService> {
  return {
    async reason(req, ctx) {
      const intent = await reason(req.objective, req.context === "" ? undefined : req.context, {
        provider: deps.provider,
        registry: await callerRegistry(deps, ctx),
        signal: ctx.signal,
      });
      return { intent: intentToProto(intent) };
    },

    async plan(req, ctx) {
      // The session's when the call has one (2025-11-25), else the principal's (docs/protocol.md §5).
      const scope = planScopeOf(ctx.call);
      const intent = req.intent ? intentFromProto(req.intent) : undefined;
      // A sequence that succeeded before for this objective (its signature) is offered first, as
      // for Achieve; the plan says so (source: procedure).
      let procedure: string[] | undefined;
      const run = await brainDeps(deps, ctx);
      if (req.objective.trim() !== "") {
        try {
          procedure = await recallProcedure(objectiveSignature(req.objective), run);
        } catch (err) {
          // Planning reads memory only for this hint: without it the plan is made from the objective.
          deps.logger.warn({ err }, "procedural memory could not be read; planning without it");
        }
      }
      const made = await plan(
        req.objective,
        intent,
        { provider: deps.provider, registry: run.registry, signal: ctx.signal },
        procedure ? { procedure } : {},
      );
      const stored = await deps.plans.put({
        tenant: ctx.call.tenant,
        scope,
        objective: req.objective.trim(),
        steps: made.steps,
        provider: made.provider,
        model: made.model,
      });
      return planToProto(made, stored);
    },

    execute: (req, ctx) => executeRequest(deps, req, ctx, ctx.signal),

    async *executeStream(req, ctx) {
      const execute = req.execute;
      if (!execute) throw new ChaosError("invalid_argument", "execute is required: what to run, as for Execute");
      yield* eventsWhile<ExecuteStreamEvent, ExecuteResponseInit>(
        ctx.signal,
        (push, signal) =>
          executeRequest(deps, execute, ctx, signal, (p) => push({ event: { case: "progress", value: { stepId: p.stepId, capability: p.capability, message: p.message } } })),
        (result) => ({ event: { case: "result", value: result } }),
        "the ExecuteStream stream was closed before the steps finished",
      );
    },

    async *achieve(req, ctx) {
      // Stage events are queued as the loop reports them and yielded as the stream drains; the
      // loop is cancelled with the call, or when the consumer stops reading early.
      const stop = new AbortController();
      const signal = AbortSignal.any([ctx.signal, stop.signal]);
      const queue: AchieveEvent[] = [];
      let wake: (() => void) | undefined;
      let outcome: { trace: CognitiveTrace } | { error: unknown } | undefined;
      const notify = () => {
        const w = wake;
        wake = undefined;
        w?.();
      };
      void brainDeps(deps, ctx, signal).then((run) => runCognitiveCore(
        {
          objective: req.objective,
          ...(req.maxReplans !== undefined ? { maxReplans: req.maxReplans } : {}),
          onStage: (stage, detail) => {
            queue.push({ event: { case: "stage", value: { stage, detail } } });
            notify();
          },
        },
        run,
      )).then(
        (trace) => {
          outcome = { trace };
          notify();
        },
        (error: unknown) => {
          outcome = { error };
          notify();
        },
      );
      const onAbort = () => notify();
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      try {
        for (;;) {
          const next = queue.shift();
          if (next) {
            yield next;
            continue;
          }
          if (ctx.signal.aborted) throw cancelled(ctx.signal);
          if (outcome) break;
          await new Promise<void>((resolve) => (wake = resolve));
        }
        if ("error" in outcome) throw outcome.error;
        yield { event: { case: "trace", value: traceToProto(outcome.trace) } };
      } finally {
        ctx.signal.removeEventListener("abort", onAbort);
        if (!outcome) stop.abort(new ChaosError("cancelled", "the Achieve stream was closed before the run finished"));
      }
    },

    async resolveApproval(req, ctx) {
      const channel = CHANNELS[req.channel];
      if (!channel) throw new ChaosError("invalid_argument", "channel must be ELICITATION, APPROVER, OPERATOR or CONSOLE");
      if (req.approvalId === "") throw new ChaosError("invalid_argument", "approval_id is required");
      // The resolver is the verified caller; the edge vouches for the approver role, cognition
      // enforces the channels policy accepts and each channel's rule (session, operator, no self-approval).
      const resolved = await resolveApproval(req.approvalId, { approve: req.approve, channel, by: ctx.call }, deps);
      return {
        status: resolved.status,
        resolvedBy: resolved.resolution?.resolvedBy ?? "",
        channel: resolved.resolution?.channel ?? channel,
        ledgerSeq: resolved.ledgerSeq ?? 0n,
      };
    },

    async getApproval(req, ctx) {
      if (req.approvalId === "") throw new ChaosError("invalid_argument", "approval_id is required");
      // Tenant-bound like every approval call: another tenant's id is simply not found. The
      // requester reads its own approval; another principal only as a reviewer (docs/protocol.md §5).
      const approval = await deps.approvals.get(ctx.call.tenant, req.approvalId);
      if (!approval || (!isReviewer(req.channel, ctx) && approval.call.principal !== ctx.call.principal)) {
        throw approvalNotFound(req.approvalId);
      }
      return approvalToProto(approval);
    },

    async listApprovals(req, ctx) {
      // The caller's tenant only; 0 means the default page.
      const limit = req.limit === 0 ? DEFAULT_LIST_APPROVALS : req.limit;
      const pending = await deps.approvals.listPending(ctx.call.tenant, limit);
      return { approvals: pending.map(approvalSummaryToProto) };
    },

    async listCapabilities(req, ctx) {
      // The caller's view (its tenant's own registry upstreams among it), or every upstream tool
      // of the operator's with its grants for the edge's catalog, which lists each session what its
      // tenant and principal are offered (docs/federation.md §6).
      const registry = req.everyUpstreamTool ? deps.registry : await callerRegistry(deps, ctx);
      // A quarantined upstream tool is listed too, naming why (Capability.upstream.quarantined).
      const served = registry.list();
      const quarantined = registry.upstreamTools().filter((c) => !served.includes(c));
      // Every upstream tool also means the caller's tenant's own, each with its grant (that tenant
      // only): how the edge lists a tenant's registry upstreams in its sessions (§12).
      const own = req.everyUpstreamTool && deps.tenantUpstreams ? (await deps.tenantUpstreams.forCall(ctx.call)).capabilities.filter((c) => deps.registry.get(c.name) === undefined) : [];
      return { capabilities: [...served, ...quarantined, ...own].map(capabilityToProto) };
    },

    async listUpstreams(req, ctx) {
      const registry = req.everyUpstream ? deps.registry : await callerRegistry(deps, ctx);
      const view = upstreamsView(deps);
      if (!view) return { upstreams: [] };
      return upstreamStatuses(registry, view, req.everyUpstream ? undefined : ctx.call.tenant);
    },

    describeProvider() {
      // Field by field through describeProvider: a key can never slip into the answer.
      const d = describeProvider(deps.provider);
      return Promise.resolve({ id: d.id, displayName: d.displayName, model: d.model ?? "", configured: d.configured });
    },
  };
}
