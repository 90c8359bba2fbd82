/**
 * Proto ⇄ domain mapping for the cognition service, and nothing else: no decision is taken here.
 * Struct fields are plain JSON objects in the generated code; outputs travel as a Value.
 */
import { fromJson, type JsonObject as ProtoJsonObject, type JsonValue as ProtoJsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { ChaosError, contextLabel, RISKS, type UpstreamGrant } from "@chaos-core/kit";
import type {
  ApprovalSummarySchema,
  CapabilitySchema,
  GetApprovalResponseSchema,
  IntentSchema,
  PlanResponseSchema,
  PlanStep as ProtoPlanStep,
  PlanStepSchema,
  StepResultSchema,
  TraceSchema,
  Intent as ProtoIntent,
} from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { z } from "zod";
import type { CognitiveTrace } from "../brain/brain.js";
import type { Intent } from "../brain/intent.js";
import type { Plan } from "../brain/planner.js";
import type { Capability, CapabilityRisk } from "../capabilities/capability.js";
import { channelsOf, type StoredApproval } from "../executor/approvals.js";
import type { ExecutableStep, StepResult } from "../executor/step-types.js";
import type { PlanStep, StoredPlan } from "../plans/plan.js";


/** Any value a handler returned, as JSON (what survives `JSON.stringify`), in a Value; undefined stays unset. */
export function outputToValue(output: unknown): Value | undefined {
  if (output === undefined) return undefined;
  const json = JSON.stringify(output);
  if (json === undefined) return undefined;
  return fromJson(ValueSchema, JSON.parse(json) as ProtoJsonValue);
}

export function intentToProto(intent: Intent): MessageInitShape<typeof IntentSchema> {
  return {
    goal: intent.goal,
    constraints: [...intent.constraints],
    successCriteria: [...intent.successCriteria],
    ambiguities: [...intent.ambiguities],
    risk: intent.risk,
    candidateCapabilities: [...intent.candidateCapabilities],
    provider: intent.provider,
    model: intent.model,
  };
}

/**
 * A caller's intent (from an earlier Reason) as the planner takes it. It is only guidance: the
 * planner grounds steps in registered capabilities whatever the intent names.
 */
export function intentFromProto(intent: ProtoIntent): Intent {
  const risk = intent.risk === "" ? "low" : intent.risk;
  if (!(RISKS as readonly string[]).includes(risk)) {
    throw new ChaosError("invalid_argument", `intent.risk must be one of ${RISKS.join(", ")}, got "${intent.risk}"`);
  }
  return {
    goal: intent.goal,
    constraints: [...intent.constraints],
    successCriteria: [...intent.successCriteria],
    ambiguities: [...intent.ambiguities],
    risk: risk as CapabilityRisk,
    candidateCapabilities: [...intent.candidateCapabilities],
    provider: intent.provider,
    model: intent.model,
  };
}

export function planStepToProto(step: PlanStep): MessageInitShape<typeof PlanStepSchema> {
  return { id: step.id, capability: step.capability, input: step.input, rationale: step.rationale };
}

/** An explicit step from the wire; the executor validates its input against the capability. */
export function stepFromProto(step: ProtoPlanStep): ExecutableStep {
  return { id: step.id, capability: step.capability, input: step.input ?? {} };
}

/** A plan as a response; `stored` adds the id and expiry of a stored plan. */
export function planToProto(plan: Plan, stored?: StoredPlan): MessageInitShape<typeof PlanResponseSchema> {
  return {
    steps: plan.steps.map(planStepToProto),
    source: plan.source,
    provider: plan.provider,
    model: plan.model,
    notes: [...plan.notes],
    ...(stored ? { planId: stored.id, expiresAt: timestampFromDate(new Date(stored.expiresAt)) } : {}),
  };
}

export function stepResultToProto(result: StepResult): MessageInitShape<typeof StepResultSchema> {
  const output = result.status === "executed" ? outputToValue(result.output) : undefined;
  return {
    stepId: result.stepId,
    capability: result.capability,
    status: result.status,
    ...(result.verdict
      ? {
          verdict: {
            decision: result.verdict.decision,
            matchedRule: result.verdict.matchedRule,
            reason: result.verdict.reason,
            policyVersion: BigInt(result.verdict.policyVersion),
          },
        }
      : {}),
    ran: result.ran,
    ...(output ? { output } : {}),
    evaluation: { succeeded: result.evaluation.succeeded, problems: [...result.evaluation.problems] },
    errorCode: result.error?.code ?? "",
    errorMessage: result.error?.message ?? "",
    ...(result.approval
      ? {
          approval: {
            approvalId: result.approval.approvalId,
            argsHash: result.approval.argsHash,
            policyVersion: BigInt(result.approval.policyVersion),
            matchedRule: result.approval.matchedRule,
            reason: result.approval.reason,
            risk: result.approval.risk,
            channels: [...channelsOf(result.approval)],
          },
        }
      : {}),
  };
}

export function traceToProto(trace: CognitiveTrace): MessageInitShape<typeof TraceSchema> {
  return {
    objective: trace.objective,
    intent: intentToProto(trace.intent),
    plans: trace.plans.map((p) => planToProto(p)),
    results: trace.results.map(stepResultToProto),
    status: trace.status,
    replans: trace.replans,
    episodeKey: trace.episodeKey ?? "",
    notes: [...trace.notes],
    bookkeeping: trace.bookkeeping.map((w) => ({
      kind: w.kind,
      stored: w.stored,
      key: w.key ?? "",
      decision: w.decision ?? "",
      matchedRule: w.matchedRule ?? "",
      reason: w.reason,
    })),
    summary: trace.summary,
  };
}

/** Who is offered an upstream tool, for the edge to list it per session. */
function grantToProto(grant: UpstreamGrant) {
  return { tenants: [...grant.tenants], principals: [...(grant.principals ?? [])], as: grant.as ?? "tools", roles: [...(grant.roles ?? [])] };
}

/** A capability for ListCapabilities: its input as JSON Schema (what a caller may send), never its handler. */
export function capabilityToProto(capability: Capability): MessageInitShape<typeof CapabilitySchema> {
  const { upstream } = capability;
  // An upstream tool's schema is the one it published and the pin holds, not a rendering of its check.
  const schema = upstream ? upstream.inputSchema : z.toJSONSchema(capability.inputSchema, { io: "input", unrepresentable: "any" });
  return {
    name: capability.name,
    description: capability.description,
    risk: capability.risk,
    inputSchema: JSON.parse(JSON.stringify(schema)) as ProtoJsonObject,
    annotations: {
      readOnlyHint: capability.annotations.readOnlyHint,
      destructiveHint: capability.annotations.destructiveHint,
      idempotentHint: capability.annotations.idempotentHint,
      openWorldHint: capability.annotations.openWorldHint,
    },
    internal: capability.internal === true,
    implies: [...(capability.implies ?? [])],
    ...(upstream
      ? { upstream: { upstream: upstream.name, tool: upstream.tool, mcpName: upstream.mcpName, title: upstream.title, quarantined: upstream.drift?.() ?? "", grants: upstream.grants.map(grantToProto) } }
      : {}),
  };
}

/** What both views of an approval show: the exact call, the policy decision, who asked and until when. */
function approvalBase(a: StoredApproval) {
  return {
    approvalId: a.approvalId,
    capability: a.capability,
    // The validated input: capability inputs are JSON objects by their schemas.
    input: a.step.input as ProtoJsonObject,
    argsHash: a.argsHash,
    policyVersion: BigInt(a.policyVersion),
    matchedRule: a.matchedRule,
    reason: a.reason,
    risk: a.risk,
    requestedBy: a.call.principal,
    // The context label, as the ledger records it: the session, or request:<ref> without one.
    requestedInSession: contextLabel(a.call),
    createdAt: timestampFromDate(new Date(a.createdAt)),
    expiresAt: timestampFromDate(new Date(a.expiresAt)),
    channels: [...channelsOf(a)],
  };
}

/** A pending approval as ListApprovals shows it: what runs, who asked, and its lifetime. */
export function approvalSummaryToProto(a: StoredApproval): MessageInitShape<typeof ApprovalSummarySchema> {
  return approvalBase(a);
}

/** A stored approval as a person will be shown it: the exact input the step would run with. */
export function approvalToProto(a: StoredApproval): MessageInitShape<typeof GetApprovalResponseSchema> {
  return {
    ...approvalBase(a),
    status: a.status,
    resolvedBy: a.resolution?.resolvedBy ?? "",
    resolutionChannel: a.resolution?.channel ?? "",
    channelsRule: a.channelsRule ?? "",
  };
}
