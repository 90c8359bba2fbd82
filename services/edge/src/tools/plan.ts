import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import { defineTool } from "../definitions/tool.js";
import {
  intentFromInput,
  intentInput,
  MODEL_CALL_TIMEOUT_MS,
  objectiveSchema,
  planOutput,
  planToOutput,
} from "./cognition-shapes.js";

/** `chaoscore_plan`: steps grounded in registered capabilities, stored for this session. */
export const planTool = defineTool({
  name: "chaoscore_plan",
  toolset: "core",
  title: "Plan",
  description:
    "Turn an objective into steps, each a registered capability with its input and a rationale. Nothing runs: " +
    "the plan is kept for this session (2026-07-28: your principal) until expires_at; run it with chaoscore_execute " +
    "{plan_id}. A sequence that succeeded before for the same key words is planned first (source: procedure). " +
    "Without a model, everyday objectives are read offline (remember/store X is Y, what is X, list/find … tagged T, " +
    "forget X, fetch/check URL, \"… and remember it as K\"; English and German); notes say when one needs a model. " +
    "Pass chaoscore_reason's intent, or omit it and the planner reasons itself.",
  input: z.object({
    objective: objectiveSchema.describe("What to achieve, in plain words"),
    intent: intentInput.optional().describe("chaoscore_reason's intent, possibly edited"),
  }),
  output: planOutput,
  annotations: {
    // It stores working state with a time to live; it changes nothing a user owns.
    readOnlyHint: true,
    destructiveHint: false,
    // Every call stores a new plan under a new id.
    idempotentHint: false,
    // With a model provider the objective goes to that provider, which may be a third party.
    openWorldHint: true,
  },
  async run(args, ctx) {
    const res = await ctx.deps.cognition.plan(
      { objective: args.objective, ...(args.intent ? { intent: intentFromInput(args.intent) } : {}) },
      { ctx: ctx.call, signal: ctx.signal, timeoutMs: MODEL_CALL_TIMEOUT_MS },
    );
    const out = planToOutput(res);
    if (!out.plan_id || !out.expires_at) throw new ChaosError("internal", "cognition stored a plan without an id or expiry");
    return { ...out, plan_id: out.plan_id, expires_at: out.expires_at };
  },
});
