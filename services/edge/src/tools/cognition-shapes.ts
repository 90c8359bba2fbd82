import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { RISKS } from "@chaos-core/kit";
import { z } from "zod";
import type {
  Intent,
  PlanResponse,
  PlanStep,
  StepResult,
} from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { acceptedChannels, approvalChannelOutput, stepApprovalChannels, type ChannelPlace } from "../approvals/channels.js";
import { isoTime } from "../clients/timestamps.js";

// Limits checked by the schema, so a bad argument is refused naming the field before any call
// is made. Tighter than the cognition service's own (10 000 / 50 000 characters): an objective
// is a sentence or a paragraph, not a document.
export const OBJECTIVE_MAX_CHARS = 4000;
export const CONTEXT_MAX_CHARS = 20_000;
/** The plan store's own limit (`MAX_PLAN_STEPS` in cognition). */
export const MAX_STEPS = 50;
/** The brain's own limit (`MAX_REPLANS_LIMIT` in cognition). */
export const MAX_REPLANS = 5;

/**
 * Deadlines of cognition calls. Reason and plan may wait on a model provider (60 s per attempt,
 * one transport retry, one retry after invalid JSON); execute and achieve run capabilities (30 s
 * each) and achieve also reasons, plans and re-plans. The client's default (10 s) would cut all
 * of these off; listing capabilities and describing the provider keep it.
 */
export const MODEL_CALL_TIMEOUT_MS = 3 * 60_000;
export const RUN_TIMEOUT_MS = 5 * 60_000;

export const objectiveSchema = z
  .string()
  .trim()
  .min(1, "objective must not be empty")
  .max(OBJECTIVE_MAX_CHARS, `objective must be at most ${OBJECTIVE_MAX_CHARS} characters`);

const line = z.string().max(2000);
const lines = z.array(line).max(32);

/** An intent as `chaoscore_reason` returns it and `chaoscore_plan` accepts it back. */
export const intentOutput = z.object({
  goal: z.string(),
  constraints: z.array(z.string()),
  success_criteria: z.array(z.string()),
  ambiguities: z.array(z.string()).describe("What is unclear; with the heuristic provider, also that no model was used"),
  risk: z.string().describe("low, medium, high or critical: never below the candidates' registered risk"),
  candidate_capabilities: z.array(z.string()).describe("Registered capability names, most relevant first"),
  provider: z.string(),
  model: z.string().describe('"none" when no model was used'),
});

export const intentInput = z.strictObject({
  goal: z.string().trim().min(1).max(OBJECTIVE_MAX_CHARS),
  constraints: lines.default([]),
  success_criteria: lines.default([]),
  ambiguities: lines.default([]),
  risk: z.enum(RISKS),
  candidate_capabilities: z.array(z.string().min(1).max(256)).max(32).default([]),
  provider: z.string().max(64).optional(),
  model: z.string().max(256).optional(),
});

export const planStepOutput = z.object({
  id: z.string(),
  capability: z.string(),
  input: z.record(z.string(), z.unknown()),
  rationale: z.string(),
});

export const planStepInput = z.strictObject({
  id: z.string().min(1).max(64).describe("Unique within the list; results refer to steps by it"),
  capability: z.string().min(1).max(256).describe("A registered capability (chaoscore_inspect what=capabilities)"),
  input: z.record(z.string(), z.unknown()).default({}).describe("The capability's input, checked against its schema"),
  rationale: z.string().max(2000).default(""),
});

export const planOutput = z.object({
  plan_id: z.string().describe("For chaoscore_execute in this session (2026-07-28: by this principal); no one else sees it"),
  steps: z.array(planStepOutput),
  source: z.string().describe("procedure (a sequence that succeeded before), heuristic or model"),
  provider: z.string(),
  model: z.string(),
  expires_at: z.string().describe("ISO 8601"),
  notes: z.array(z.string()).describe("Above all, why the plan is empty"),
});

export const stepResultOutput = z.object({
  step_id: z.string(),
  capability: z.string(),
  decision: z
    .enum(["ALLOW", "DENY", "REQUIRE_APPROVAL", "NOT_ASKED"])
    .describe("Policy's decision; NOT_ASKED when the step never reached policy (unknown capability, invalid input, skipped)"),
  policy: z
    .object({ matched_rule: z.string(), reason: z.string(), policy_version: z.number() })
    .optional()
    .describe("Why policy decided as it did"),
  status: z.enum(["executed", "denied", "pending_approval", "failed", "skipped"]),
  ran: z.boolean().describe("Whether the capability's handler started: a failed step that ran may have had side effects"),
  output: z.unknown().optional().describe("Only on executed"),
  evaluation: z.object({
    succeeded: z.boolean().describe("The handler returned and its output validated: decided by code, never by a model"),
    problems: z.array(z.string()),
  }),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  approval: z
    .object({
      approval_id: z.string(),
      args_hash: z.string(),
      policy_version: z.number(),
      matched_rule: z.string(),
      reason: z.string(),
      risk: z.string(),
      policy_channels: z.array(z.string()).describe("Every channel policy accepts for this approval, wherever it is served"),
      channels: z.array(approvalChannelOutput).describe("The ways to approve it that exist here, each with its exact call or command"),
    })
    .optional()
    .describe("Only on pending_approval: the step did not run and waits for a human"),
});

/** A plan inside an achieve trace; re-plans are not stored, so they have no id or expiry. */
export const tracePlanOutput = planOutput.partial({ plan_id: true, expires_at: true });

export function intentToOutput(intent: Intent | undefined): z.output<typeof intentOutput> {
  return {
    goal: intent?.goal ?? "",
    constraints: [...(intent?.constraints ?? [])],
    success_criteria: [...(intent?.successCriteria ?? [])],
    ambiguities: [...(intent?.ambiguities ?? [])],
    risk: intent?.risk ?? "",
    candidate_capabilities: [...(intent?.candidateCapabilities ?? [])],
    provider: intent?.provider ?? "",
    model: intent?.model ?? "",
  };
}

export function intentFromInput(intent: z.output<typeof intentInput>) {
  return {
    goal: intent.goal,
    constraints: intent.constraints,
    successCriteria: intent.success_criteria,
    ambiguities: intent.ambiguities,
    risk: intent.risk,
    candidateCapabilities: intent.candidate_capabilities,
    provider: intent.provider ?? "",
    model: intent.model ?? "",
  };
}

export function stepsFromInput(steps: ReadonlyArray<z.output<typeof planStepInput>>) {
  return steps.map((s) => ({
    id: s.id,
    capability: s.capability,
    // Arguments arrived as JSON, so the record holds only JSON values.
    input: s.input as JsonObject,
    rationale: s.rationale,
  }));
}

function stepToOutput(step: PlanStep): z.output<typeof planStepOutput> {
  return { id: step.id, capability: step.capability, input: step.input ?? {}, rationale: step.rationale };
}

export function planToOutput(plan: PlanResponse): z.output<typeof tracePlanOutput> {
  const expires = isoTime(plan.expiresAt);
  return {
    ...(plan.planId ? { plan_id: plan.planId } : {}),
    steps: plan.steps.map(stepToOutput),
    source: plan.source,
    provider: plan.provider,
    model: plan.model,
    notes: [...plan.notes],
    ...(expires ? { expires_at: expires } : {}),
  };
}

/** A step result as the tools show it; a pending approval lists the ways to approve it in `place`. */
export function stepResultToOutput(r: StepResult, place: ChannelPlace): z.output<typeof stepResultOutput> {
  return {
    step_id: r.stepId,
    capability: r.capability,
    decision: (r.verdict?.decision || "NOT_ASKED") as z.output<typeof stepResultOutput>["decision"],
    ...(r.verdict
      ? {
          policy: {
            matched_rule: r.verdict.matchedRule,
            reason: r.verdict.reason,
            policy_version: Number(r.verdict.policyVersion),
          },
        }
      : {}),
    status: r.status as z.output<typeof stepResultOutput>["status"],
    ran: r.ran,
    ...(r.output ? { output: toJson(ValueSchema, r.output) } : {}),
    evaluation: { succeeded: r.evaluation?.succeeded ?? false, problems: [...(r.evaluation?.problems ?? [])] },
    ...(r.errorCode ? { error: { code: r.errorCode, message: r.errorMessage } } : {}),
    ...(r.approval
      ? {
          approval: {
            approval_id: r.approval.approvalId,
            args_hash: r.approval.argsHash,
            policy_version: Number(r.approval.policyVersion),
            matched_rule: r.approval.matchedRule,
            reason: r.approval.reason,
            risk: r.approval.risk,
            policy_channels: [...acceptedChannels(r.approval.channels)],
            channels: stepApprovalChannels(r.approval.approvalId, r.approval.channels, place),
          },
        }
      : {}),
  };
}
