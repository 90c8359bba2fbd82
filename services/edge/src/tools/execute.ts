import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import { ApprovalChannel, type StepResult } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { fitsForm, tooLongForForm } from "../approvals/render-text.js";
import { defineTool, type ToolContext } from "./define.js";
import { approvalQuestion, approveCall, executeCall, nextStepAfterFailedRun, nextStepForPending } from "./approval.js";
import { MAX_STEPS, planStepInput, RUN_TIMEOUT_MS, stepResultOutput, stepResultToOutput, stepsFromInput } from "./cognition-shapes.js";

const output = z.object({
  results: z.array(stepResultOutput).describe("One result per step, in order; empty when an approval was rejected"),
  approval: z
    .object({
      approval_id: z.string(),
      status: z.enum(["approved", "rejected"]),
      resolved_by: z.string().optional().describe("Who answered, as recorded, when this call recorded the answer"),
    })
    .optional()
    .describe("Only with {approval_id}: the answer the step ran under, or the rejection (then nothing ran)"),
  next_step: z
    .string()
    .optional()
    .describe("What to do next, in plain words: when a step waits for approval, or an approval's step did not run or ran and failed"),
});

type Output = z.input<typeof output>;

/** The approval form: one yes/no question. */
function approvalSchema() {
  return {
    type: "object" as const,
    properties: { approve: { type: "boolean" as const, title: "Approve this call?" } },
    required: ["approve"],
  };
}

function withNextStep(results: StepResult[], ctx: ToolContext): Output {
  const out = results.map(stepResultToOutput);
  const next = nextStepForPending(out, ctx.canElicit());
  return { results: out, ...(next ? { next_step: next } : {}) };
}

/** Runs the step of an approval through the executor, which re-checks everything and runs it at most once. */
async function runApproval(approvalId: string, ctx: ToolContext): Promise<StepResult[]> {
  const res = await ctx.deps.cognition.execute(
    { target: { case: "approvalId", value: approvalId } },
    { ctx: ctx.call, signal: ctx.signal, timeoutMs: RUN_TIMEOUT_MS },
  );
  return res.results;
}

/**
 * `{approval_id}`: runs the step once it is approved. Still pending: the user of this session is
 * shown every argument of the call (from cognition, never from the agent's arguments) and asked,
 * when the client can elicit and the question fits a form (16 KiB; it is never cut); otherwise
 * an approver or the operator must answer first. Answered already (by an approver,
 * or rejected, or used): cognition's executor says what happens.
 */
async function executeApproval(approvalId: string, ctx: ToolContext): Promise<Output> {
  const view = await ctx.deps.cognition.getApproval({ approvalId }, { ctx: ctx.call, signal: ctx.signal });
  if (view.status !== "pending") {
    const out = withNextStep(await runApproval(approvalId, ctx), ctx);
    const next =
      nextStepAfterFailedRun(approvalId, out.results) ??
      (out.results.some((r) => r.status === "executed") ? undefined : `Approval ${approvalId} is ${view.status}: the step did not run now. Do not retry it.`);
    return {
      ...out,
      ...(view.status === "approved" || view.status === "rejected"
        ? { approval: { approval_id: approvalId, status: view.status, ...(view.resolvedBy ? { resolved_by: view.resolvedBy } : {}) } }
        : {}),
      ...(next ? { next_step: next } : {}),
    };
  }
  if (!ctx.canElicit()) {
    throw new ChaosError(
      "approval_required",
      `approval ${approvalId} has not been answered, and this client cannot ask its user (it did not declare elicitation). ` +
        `A person holding the approver role in this tenant must call ${approveCall(approvalId)} from their own session; ` +
        `then call ${executeCall(approvalId)} again. Nothing ran.`,
    );
  }
  const question = approvalQuestion(view);
  if (!fitsForm(question)) {
    throw new ChaosError(
      "approval_required",
      `approval ${approvalId}: ${tooLongForForm(question)} A person holding the approver role in this tenant must call ` +
        `${approveCall(approvalId)} from their own session, or, where Chaos Core runs as chaos-core serve or stdio, the ` +
        `operator runs chaos-core approvals approve ${approvalId} (chaos-core approvals list shows the whole call); ` +
        `then call ${executeCall(approvalId)} again. Nothing ran.`,
    );
  }
  const answer = await ctx.elicit({ message: question, requestedSchema: approvalSchema() });
  if (answer.action === "cancel") {
    throw new ChaosError(
      "approval_required",
      `the user dismissed the approval request without answering: approval ${approvalId} was not resolved and nothing ran. ` +
        `Call ${executeCall(approvalId)} to ask again, or have an approver answer it.`,
    );
  }
  let approve = false;
  if (answer.action === "accept") {
    const given = answer.content?.["approve"];
    if (typeof given !== "boolean") {
      throw new ChaosError("invalid_argument", "the client's answer carried no yes/no approve field: nothing was resolved and nothing ran");
    }
    approve = given;
  }
  const resolved = await ctx.deps.cognition.resolveApproval(
    { approvalId, approve, channel: ApprovalChannel.ELICITATION },
    { ctx: ctx.call, signal: ctx.signal },
  );
  const approval = { approval_id: approvalId, ...(resolved.resolvedBy ? { resolved_by: resolved.resolvedBy } : {}) };
  if (!approve) {
    return {
      results: [],
      approval: { ...approval, status: "rejected" },
      next_step: `The user rejected approval ${approvalId}: the step did not run and will not. Do not retry it; tell the user or choose another way.`,
    };
  }
  const out = withNextStep(await runApproval(approvalId, ctx), ctx);
  const next = nextStepAfterFailedRun(approvalId, out.results);
  return { ...out, approval: { ...approval, status: "approved" }, ...(next ? { next_step: next } : {}) };
}

/** `chaoscore_execute`: a stored plan, explicit steps, or an approved step, each through policy and the executor. */
export const executeTool = defineTool({
  name: "chaoscore_execute",
  toolset: "core",
  title: "Execute",
  description:
    "Run a plan from chaoscore_plan ({plan_id}, this session's only), an explicit list of steps ({steps}), or the step " +
    "of a pending approval ({approval_id}). Every step goes through policy first: a denied step never runs (status " +
    "denied), a step that needs approval stops the run (status pending_approval, with next_step), and the steps after " +
    "a failure, denial or approval stop are skipped. With {approval_id} the step runs once, after a person approved " +
    "it: your user is asked when this client supports elicitation, otherwise an approver must call chaoscore_approve " +
    "first. Success is decided by code: the handler returned and its output matches the capability's output schema.",
  input: z
    .object({
      plan_id: z.string().min(1).max(64).optional().describe("A plan id from chaoscore_plan in this session"),
      steps: z
        .array(planStepInput)
        .min(1, "steps must hold at least one step")
        .max(MAX_STEPS, `steps must hold at most ${MAX_STEPS} steps`)
        .optional()
        .describe(`Explicit steps (at most ${MAX_STEPS}), instead of plan_id`),
      approval_id: z
        .string()
        .min(1)
        .max(64)
        .optional()
        .describe("The approval_id of a pending_approval result from this session: runs that one step once it is approved"),
    })
    .superRefine((args, issue) => {
      const given = [args.plan_id, args.steps, args.approval_id].filter((v) => v !== undefined).length;
      if (given !== 1) {
        issue.addIssue({ code: "custom", path: ["plan_id"], message: "give exactly one of plan_id, steps or approval_id" });
      }
      const ids = new Set<string>();
      args.steps?.forEach((s, i) => {
        if (ids.has(s.id)) issue.addIssue({ code: "custom", path: ["steps", i, "id"], message: `step id "${s.id}" is used twice` });
        ids.add(s.id);
      });
    }),
  output,
  annotations: {
    readOnlyHint: false,
    // Capabilities can write (memory.remember replaces a stored value).
    destructiveHint: true,
    idempotentHint: false,
    // http.request and cognition.generate_text reach outside.
    openWorldHint: true,
  },
  async run(args, ctx) {
    if (args.approval_id !== undefined) return executeApproval(args.approval_id, ctx);
    const target =
      args.plan_id !== undefined
        ? { case: "planId" as const, value: args.plan_id }
        : { case: "steps" as const, value: { steps: stepsFromInput(args.steps ?? []) } };
    const res = await ctx.deps.cognition.execute({ target }, { ctx: ctx.call, signal: ctx.signal, timeoutMs: RUN_TIMEOUT_MS });
    return withNextStep(res.results, ctx);
  },
});
