import { z } from "zod";
import { defineTool } from "./define.js";
import { MAX_STEPS, planStepInput, RUN_TIMEOUT_MS, stepResultOutput, stepResultToOutput, stepsFromInput } from "./cognition-shapes.js";

/** `chaoscore_execute`: a stored plan or explicit steps, each through policy and the executor. */
export const executeTool = defineTool({
  name: "chaoscore_execute",
  toolset: "core",
  title: "Execute",
  description:
    "Run a plan from chaoscore_plan ({plan_id}, this session's only) or an explicit list of steps ({steps}). " +
    "Every step goes through policy first: a denied step never runs (status denied), a step that needs approval " +
    "stops the run (status pending_approval), and the steps after a failure, denial or approval stop are skipped. " +
    "Success is decided by code: the handler returned and its output matches the capability's output schema.",
  input: z
    .object({
      plan_id: z.string().min(1).max(64).optional().describe("A plan id from chaoscore_plan in this session"),
      steps: z
        .array(planStepInput)
        .min(1, "steps must hold at least one step")
        .max(MAX_STEPS, `steps must hold at most ${MAX_STEPS} steps`)
        .optional()
        .describe(`Explicit steps (at most ${MAX_STEPS}), instead of plan_id`),
    })
    .superRefine((args, issue) => {
      if ((args.plan_id === undefined) === (args.steps === undefined)) {
        issue.addIssue({ code: "custom", path: ["plan_id"], message: "give exactly one of plan_id or steps" });
      }
      const ids = new Set<string>();
      args.steps?.forEach((s, i) => {
        if (ids.has(s.id)) issue.addIssue({ code: "custom", path: ["steps", i, "id"], message: `step id "${s.id}" is used twice` });
        ids.add(s.id);
      });
    }),
  output: z.object({ results: z.array(stepResultOutput).describe("One result per step, in order") }),
  annotations: {
    readOnlyHint: false,
    // Capabilities can write (memory.remember replaces a stored value).
    destructiveHint: true,
    idempotentHint: false,
    // http.request and cognition.generate_text reach outside.
    openWorldHint: true,
  },
  async run(args, ctx) {
    const target =
      args.plan_id !== undefined
        ? { case: "planId" as const, value: args.plan_id }
        : { case: "steps" as const, value: { steps: stepsFromInput(args.steps ?? []) } };
    const res = await ctx.deps.cognition.execute({ target }, { ctx: ctx.call, signal: ctx.signal, timeoutMs: RUN_TIMEOUT_MS });
    return { results: res.results.map(stepResultToOutput) };
  },
});
