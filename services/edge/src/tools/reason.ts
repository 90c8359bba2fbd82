import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import { defineTool } from "../definitions/tool.js";
import { CONTEXT_MAX_CHARS, intentOutput, intentToOutput, MODEL_CALL_TIMEOUT_MS, objectiveSchema } from "./cognition-shapes.js";

/** `chaoscore_reason`: what the cognitive core understands an objective to ask for. */
export const reasonTool = defineTool({
  name: "chaoscore_reason",
  toolset: "core",
  title: "Reason",
  description:
    "Analyse an objective into an intent: goal, constraints, success criteria, ambiguities, risk and the registered " +
    "capabilities most likely to serve it, with the provider and model that read it. Nothing runs. The default " +
    "heuristic provider uses no model (model \"none\", and the ambiguities say so). Pass the intent to chaoscore_plan.",
  input: z.object({
    objective: objectiveSchema.describe("What to achieve, in plain words"),
    context: z
      .string()
      .max(CONTEXT_MAX_CHARS, `context must be at most ${CONTEXT_MAX_CHARS} characters`)
      .optional()
      .describe("Anything the reading should take into account"),
  }),
  output: z.object({ intent: intentOutput }),
  annotations: {
    readOnlyHint: true,
    destructiveHint: false,
    idempotentHint: true,
    // With a model provider the objective goes to that provider, which may be a third party.
    openWorldHint: true,
  },
  async run(args, ctx) {
    const res = await ctx.deps.cognition.reason(
      { objective: args.objective, context: args.context ?? "" },
      { ctx: ctx.call, signal: ctx.signal, timeoutMs: MODEL_CALL_TIMEOUT_MS },
    );
    if (!res.intent) throw new ChaosError("internal", "cognition answered without an intent");
    return { intent: intentToOutput(res.intent) };
  },
});
