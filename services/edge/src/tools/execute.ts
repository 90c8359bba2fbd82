import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import { ApprovalChannel, type GetApprovalResponse, type StepResult } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { executeCall, whyClientNotAsked } from "../approvals/channels.js";
import { fitsForm, tooLongForForm } from "../approvals/render-text.js";
import { consolePageFor, waitForStepAnswer } from "../approvals/url-elicitation.js";
import { defineTool, type ToolContext } from "../definitions/tool.js";
import { approvalQuestion, channelPlace, howToRunApproved, nextStepAfterApprovedRun, nextStepForPending } from "./approval.js";
import { MAX_STEPS, planStepInput, RUN_TIMEOUT_MS, stepResultOutput, stepResultToOutput, stepsFromInput } from "./cognition-shapes.js";

const output = z.object({
  results: z.array(stepResultOutput).describe("One per step, in order ({approval_id}: the approved step, then the rest of its plan); empty when an approval was rejected"),
  approval: z
    .object({
      approval_id: z.string(),
      status: z.enum(["approved", "rejected"]),
      resolved_by: z.string().optional().describe("Who answered, as recorded, when this call recorded the answer"),
    })
    .optional()
    .describe("With {approval_id}: the answer the step ran under, or the rejection (nothing ran)"),
  next_step: z
    .string()
    .optional()
    .describe("What to do next: a step waits for approval, or an approval's step did not run or failed"),
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
  const place = channelPlace(ctx);
  const out = results.map((r) => stepResultToOutput(r, place));
  const next = nextStepForPending(out);
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

/** The answer for an approval already answered (or used): cognition's executor decides what happens. */
function answeredOutput(approvalId: string, status: string, resolvedBy: string, results: StepResult[], ctx: ToolContext): Output {
  const out = withNextStep(results, ctx);
  const next =
    nextStepAfterApprovedRun(approvalId, out.results) ??
    (out.results.some((r) => r.status === "executed") ? undefined : `Approval ${approvalId} is ${status}: the step did not run now. Do not retry it.`);
  return {
    ...out,
    ...(status === "approved" || status === "rejected"
      ? { approval: { approval_id: approvalId, status, ...(resolvedBy ? { resolved_by: resolvedBy } : {}) } }
      : {}),
    ...(next ? { next_step: next } : {}),
  };
}

/**
 * Why this call does not ask its user through a form, or undefined when it may: policy must
 * accept the client's own answer for this approval (by default not at high risk and above: the
 * client's host can answer a form itself), the client must have declared form elicitation, and
 * the whole question must fit a form.
 */
function whyNotAsked(view: GetApprovalResponse, question: string, ctx: ToolContext): string | undefined {
  const about = `${view.capability}, risk ${view.risk || "unspecified"}`;
  return whyClientNotAsked(view.channels, about, view.channelsRule, ctx.client.formElicitation) ?? (fitsForm(question) ? undefined : tooLongForForm(question));
}

/**
 * Nobody answered in this call (`why`, a clause after "has not been answered, and"). The attempt
 * still goes to cognition, which records it and runs the step if a person approved it meanwhile;
 * still pending → `approval_required` listing every channel that can approve it here. A call the
 * client cancelled sends nothing more.
 */
async function notAnswered(approvalId: string, view: GetApprovalResponse, why: string, ctx: ToolContext, cancelled = false): Promise<Output> {
  const place = { ...channelPlace(ctx), canElicit: false };
  const refusal = () =>
    new ChaosError(
      "approval_required",
      `approval ${approvalId} has not been answered, and ${why}\n${howToRunApproved(approvalId, view.channels, place)}\nNothing ran.`,
    );
  if (cancelled) throw refusal();
  // Cognition records the refused attempt (and runs the step if it was approved meanwhile).
  const results = await runApproval(approvalId, ctx);
  const stillPending = results.length === 1 && !results[0]!.ran && results[0]!.errorCode === "approval_required";
  if (!stillPending) {
    const now = await ctx.deps.cognition.getApproval({ approvalId }, { ctx: ctx.call, signal: ctx.signal });
    return answeredOutput(approvalId, now.status, now.resolvedBy, results, ctx);
  }
  throw refusal();
}

/**
 * URL mode (docs/approvals.md §3): the client's user is asked to open the approval's console
 * page, and the call waits for a person's answer there (or through any other channel). Approved →
 * the executor runs the step, once; rejected → the rejection; nobody answered in time, the user
 * declined or dismissed it, or the client cancelled → {@link notAnswered}.
 */
async function askThroughConsole(approvalId: string, view: GetApprovalResponse, url: string, ctx: ToolContext): Promise<Output> {
  const waited = await waitForStepAnswer(ctx, view, url);
  if (!waited.answered) return notAnswered(approvalId, view, waited.why, ctx, waited.cancelled);
  const now = waited.value;
  if (now.status === "rejected") {
    return {
      results: [],
      approval: { approval_id: approvalId, status: "rejected", ...(now.resolvedBy ? { resolved_by: now.resolvedBy } : {}) },
      next_step:
        `${now.resolvedBy || "A person"} rejected approval ${approvalId}: the step did not run and will not. ` +
        "Do not retry it; tell the user or choose another way.",
    };
  }
  // Approved (or consumed by a concurrent call of the requester): the executor decides, and runs it at most once.
  return answeredOutput(approvalId, now.status, now.resolvedBy, await runApproval(approvalId, ctx), ctx);
}

/**
 * `{approval_id}`: runs the step once it is approved. Still pending: where policy accepts the
 * console and the client declared URL-mode elicitation, its user is sent to the approval's
 * console page and the call waits for a person's answer ({@link askThroughConsole}). Otherwise
 * the user of this session is shown every argument of the call (from cognition, never from the agent's arguments) and asked,
 * when policy accepts the client's answer for it, the client can elicit, and the question fits a
 * form (16 KiB; it is never cut). Otherwise the client is not asked: the attempt still goes to
 * cognition, which records it, and the answer lists every channel that can approve it here.
 * Answered already (by an approver, the operator, or rejected, or used): cognition's executor
 * says what happens.
 */
async function executeApproval(approvalId: string, ctx: ToolContext): Promise<Output> {
  const view = await ctx.deps.cognition.getApproval({ approvalId }, { ctx: ctx.call, signal: ctx.signal });
  if (view.status !== "pending") return answeredOutput(approvalId, view.status, view.resolvedBy, await runApproval(approvalId, ctx), ctx);
  // The console first: its answer comes from a person on the page, never from the client.
  const url = consolePageFor(ctx, { kind: "step", approvalId }, view.channels);
  if (url) return askThroughConsole(approvalId, view, url, ctx);
  const question = approvalQuestion(view);
  const why = whyNotAsked(view, question, ctx);
  if (why) return notAnswered(approvalId, view, why, ctx);
  const answer = await ctx.ask({ mode: "form", key: "approve", message: question, requestedSchema: approvalSchema() });
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
  const next = nextStepAfterApprovedRun(approvalId, out.results);
  return { ...out, approval: { ...approval, status: "approved" }, ...(next ? { next_step: next } : {}) };
}

/** `chaoscore_execute`: a stored plan, explicit steps, or an approved step, each through policy and the executor. */
export const executeTool = defineTool({
  name: "chaoscore_execute",
  toolset: "core",
  title: "Execute",
  description:
    "Run a plan from chaoscore_plan ({plan_id}: this session's; 2026-07-28: this principal's), explicit steps " +
    "({steps}), or the step of a pending approval ({approval_id}). Policy decides every step first: a denied step " +
    "never runs (status denied); one that needs approval stops the run (status pending_approval, with the ways to " +
    "approve it and next_step); steps after a failure, denial or stop are skipped. {approval_id} runs the step once, after a person approved " +
    "it, then the rest of its plan, each step through policy again (a plan expired meanwhile: only the approved step; the rest is named): " +
    "a client with URL-mode elicitation has its user sent to the console page and the call waits; otherwise your " +
    "user is asked where policy accepts your client's answer and the client can elicit; otherwise an approver " +
    '(chaoscore_approve), the operator or the console must answer first. A step\'s input may take an earlier step\'s ' +
    'output: {"$step": "s1", "path": "/status"} (a JSON Pointer into it) for a value, resolved before policy and ' +
    "approval, so an approval shows the real value. Success is decided by code: the output matches the capability's schema.",
  input: z
    .object({
      plan_id: z.string().min(1).max(64).optional().describe("From chaoscore_plan"),
      steps: z
        .array(planStepInput)
        .min(1, "steps must hold at least one step")
        .max(MAX_STEPS, `steps must hold at most ${MAX_STEPS} steps`)
        .optional()
        .describe("Instead of plan_id"),
      approval_id: z
        .string()
        .min(1)
        .max(64)
        .optional()
        .describe("Of a pending_approval step you requested: runs that step once it is approved, then the rest of its plan"),
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
