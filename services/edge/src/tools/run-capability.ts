import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ChaosError, ERROR_CODES, type ErrorCode } from "@chaos-core/kit";
import type { ExecuteRequestSchema, ExecuteResponse, StepResult } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { z } from "zod";
import type { ToolContext } from "../definitions/tool.js";
import { APPROVAL_LIMITS, channelPlace, howToRunApproved } from "./approval.js";
import { RUN_TIMEOUT_MS } from "./cognition-shapes.js";
import { consolePageFor, waitForStepAnswer } from "../approvals/url-elicitation.js";

/** The id of the one step a capability tool sends; the audit ledger records it with the step. */
const STEP_ID = "s1";

/** How a capability tool has cognition run its steps: the unary Execute, unless a tool passes another. */
export type ExecuteSteps = (ctx: ToolContext, request: MessageInitShape<typeof ExecuteRequestSchema>) => Promise<ExecuteResponse>;

/** Runs the steps as `execute` does, or else through the unary Execute. */
function executeSteps(ctx: ToolContext, request: MessageInitShape<typeof ExecuteRequestSchema>, execute: ExecuteSteps | undefined): Promise<ExecuteResponse> {
  return execute ? execute(ctx, request) : ctx.deps.cognition.execute(request, { ctx: ctx.call, signal: ctx.signal, timeoutMs: RUN_TIMEOUT_MS });
}

function errorCode(code: string): ErrorCode {
  return (ERROR_CODES as readonly string[]).includes(code) ? (code as ErrorCode) : "internal";
}

/** Logs policy's decision on the step as the edge always has: fields a log search can use. */
async function logVerdict(ctx: ToolContext, capability: string, r: StepResult): Promise<void> {
  const v = r.verdict;
  if (!v) return;
  const fields = { capability, decision: v.decision, matchedRule: v.matchedRule, policyVersion: Number(v.policyVersion) };
  switch (v.decision) {
    case "ALLOW":
      return ctx.log("debug", `policy allows ${capability}`, fields);
    case "DENY":
      return ctx.log("warning", `policy denies ${capability}`, fields);
    case "REQUIRE_APPROVAL":
      return ctx.log("warning", `policy requires approval for ${capability}`, fields);
  }
}

function ruleOf(r: StepResult): string {
  return `rule ${r.verdict?.matchedRule || "(none)"}, policy version ${r.verdict?.policyVersion ?? 0n}`;
}

/**
 * Runs one capability as a single step through cognition's executor (policy, the audit ledger,
 * the handler, evaluation) and returns its output checked against `output`. Anything other than
 * an executed step is thrown as the typed error a client branches on: `policy_denied` naming the
 * capability, rule and reason; `approval_required` with the approval id and how to run it; a
 * failed step's own code and message. The approval's message lists every channel that can approve
 * it here (policy's list, filtered to this call), one per line. Where the approval accepts the
 * console and the client declared URL-mode elicitation, the call first sends the client's user to
 * the approval's console page and waits for a person's answer (docs/approvals.md §3): approved,
 * the step runs and this call returns its output. `execute` is how the steps reach cognition (the
 * unary Execute by default; upstream tools stream their progress).
 */
export async function runCapability<O extends z.ZodType>(
  ctx: ToolContext,
  capability: string,
  input: JsonObject,
  output: O,
  execute?: ExecuteSteps,
): Promise<z.input<O>> {
  // 2026-07-28: the retry of a round that sent the user to the console resumes the approval that
  // round created (sealed in its state), instead of asking for a new one.
  const resumedApproval = ctx.resumed?.carried["approval_id"];
  if (resumedApproval) return outputOf(capability, await resumeThroughConsole(ctx, capability, resumedApproval, execute), output);
  const res = await executeSteps(ctx, { target: { case: "steps", value: { steps: [{ id: STEP_ID, capability, input }] } } }, execute);
  const r = oneResult(res.results, capability);
  await logVerdict(ctx, capability, r);
  if (r.status === "pending_approval") {
    const id = r.approval?.approvalId;
    if (!id) throw new ChaosError("internal", `${capability} waits for approval, but cognition gave no approval id`);
    const channels = r.approval?.channels ?? [];
    const url = consolePageFor(ctx, { kind: "step", approvalId: id }, channels);
    const pending = (why: string) =>
      new ChaosError(
        "approval_required",
        `${capability} needs a human approval under policy (${ruleOf(r)}): ${r.verdict?.reason ?? ""}. ` +
          `Nothing ran: approval ${id} waits for a person${why}.\n${howToRunApproved(id, channels, url ? { ...channelPlace(ctx), canElicit: false } : channelPlace(ctx))}\n${APPROVAL_LIMITS}`,
      );
    if (!url) throw pending("");
    return outputOf(capability, await approvedThroughConsole(ctx, capability, id, url, pending, execute), output);
  }
  return outputOf(capability, r, output);
}

function oneResult(results: readonly StepResult[], capability: string): StepResult {
  const r = results[0];
  if (results.length !== 1 || !r) {
    throw new ChaosError("internal", `cognition answered ${results.length} step results for one ${capability} step`);
  }
  return r;
}

/**
 * URL mode (docs/approvals.md §3) for the approval this call just created: the client's user is
 * sent to its console page and the call waits for a person's answer. Approved → the executor
 * runs the step (once) and its result is this call's; rejected → `permission_denied`; nobody
 * answered in this call → `approval_required` (`pending`, with why), the approval still pending.
 */
async function approvedThroughConsole(
  ctx: ToolContext,
  capability: string,
  approvalId: string,
  url: string,
  pending: (why: string) => ChaosError,
  execute: ExecuteSteps | undefined,
): Promise<StepResult> {
  const view = await ctx.deps.cognition.getApproval({ approvalId }, { ctx: ctx.call, signal: ctx.signal });
  const waited = await waitForStepAnswer(ctx, view, url);
  if (!waited.answered) throw pending(`: it has not been answered, and ${waited.why.replace(/\.$/, "")}`);
  if (waited.value.status === "rejected") {
    throw new ChaosError(
      "permission_denied",
      `${waited.value.resolvedBy || "a person"} rejected approval ${approvalId}: ${capability} did not run and will not. Do not retry it; tell the user or choose another way.`,
    );
  }
  const res = await executeSteps(ctx, { target: { case: "approvalId", value: approvalId } }, execute);
  return oneResult(res.results, capability);
}

/**
 * The retried round of a URL-mode ask (2026-07-28): the approval the asking round created, read
 * again (it is the requester's own), and waited on as {@link approvedThroughConsole} does.
 */
async function resumeThroughConsole(ctx: ToolContext, capability: string, approvalId: string, execute: ExecuteSteps | undefined): Promise<StepResult> {
  const view = await ctx.deps.cognition.getApproval({ approvalId }, { ctx: ctx.call, signal: ctx.signal });
  if (view.capability !== capability) {
    throw new ChaosError("internal", `the resumed approval ${approvalId} is for ${view.capability}, not ${capability}: nothing ran`);
  }
  const url = consolePageFor(ctx, { kind: "step", approvalId }, view.channels);
  const pending = (why: string) =>
    new ChaosError(
      "approval_required",
      `${capability} needs a human approval under policy (rule ${view.matchedRule || "(none)"}, policy version ${view.policyVersion}): ${view.reason}. ` +
        `Nothing ran: approval ${approvalId} waits for a person${why}.\n${howToRunApproved(approvalId, view.channels, { ...channelPlace(ctx), canElicit: false })}\n${APPROVAL_LIMITS}`,
    );
  if (!url) throw pending("");
  return approvedThroughConsole(ctx, capability, approvalId, url, pending, execute);
}

/** The output of a step that ran, or the typed error a client branches on. */
function outputOf<O extends z.ZodType>(capability: string, r: StepResult, output: O): z.input<O> {
  switch (r.status) {
    case "executed": {
      const parsed = output.safeParse(r.output ? toJson(ValueSchema, r.output) : undefined);
      if (!parsed.success) {
        throw new ChaosError("internal", `${capability} ran, but its output does not have this tool's shape: ${parsed.error.message}`);
      }
      return parsed.data as z.input<O>;
    }
    case "denied":
      throw new ChaosError("policy_denied", `${capability} is denied by policy (${ruleOf(r)}): ${r.verdict?.reason ?? ""}`);
    case "failed":
      throw new ChaosError(errorCode(r.errorCode), r.errorMessage || `${capability} failed: ${r.evaluation?.problems.join("; ") ?? ""}`);
    default:
      throw new ChaosError("internal", `${capability} ended with status "${r.status}", which this tool cannot answer with`);
  }
}
