import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import type { Trace } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { ChannelPlace } from "../approvals/channels.js";
import { channelPlace, nextStepForPending } from "./approval.js";
import { defineTool } from "../definitions/tool.js";
import {
  intentOutput,
  intentToOutput,
  MAX_REPLANS,
  objectiveSchema,
  planToOutput,
  RUN_TIMEOUT_MS,
  stepResultOutput,
  stepResultToOutput,
  tracePlanOutput,
} from "./cognition-shapes.js";

const output = z.object({
  status: z.enum(["succeeded", "failed", "pending_approval", "denied"]),
  objective: z.string(),
  summary: z
    .string()
    .describe("The answer in words: what a recall found (the exact key's value first) or that nothing matched"),
  intent: intentOutput,
  plans: z.array(tracePlanOutput).describe("The first plan, then one per re-plan (not stored)"),
  results: z.array(stepResultOutput),
  replans: z.number(),
  episode_key: z.string().optional(),
  notes: z.array(z.string()).describe("Why the run ended so, and why a bookkeeping write was not stored"),
  bookkeeping: z
    .array(
      z.object({
        kind: z.enum(["episode", "procedure"]),
        stored: z.boolean(),
        key: z.string().optional().describe("The memory key written, when stored"),
        decision: z.enum(["ALLOW", "DENY", "REQUIRE_APPROVAL"]).optional().describe("Policy's decision that held, when policy was reached"),
        matched_rule: z.string().optional().describe("The rule that decided; memory.remember's is prefixed with its name"),
        reason: z.string().describe("Policy's reason, or why the write failed"),
      }),
    )
    .describe("The run's own memory writes (episode, procedure), each through policy"),
  next_step: z.string().optional().describe("What to do next when a step waits for approval"),
});

function traceToOutput(t: Trace, place: ChannelPlace): z.output<typeof output> {
  const results = t.results.map((r) => stepResultToOutput(r, place));
  const next = t.status === "pending_approval" ? nextStepForPending(results) : undefined;
  return {
    status: t.status as z.output<typeof output>["status"],
    objective: t.objective,
    summary: t.summary,
    intent: intentToOutput(t.intent),
    plans: t.plans.map(planToOutput),
    results,
    replans: t.replans,
    ...(t.episodeKey ? { episode_key: t.episodeKey } : {}),
    notes: [...t.notes],
    bookkeeping: t.bookkeeping.map((w) => ({
      kind: w.kind as "episode" | "procedure",
      stored: w.stored,
      ...(w.key ? { key: w.key } : {}),
      ...(w.decision ? { decision: w.decision as "ALLOW" | "DENY" | "REQUIRE_APPROVAL" } : {}),
      ...(w.matchedRule ? { matched_rule: w.matchedRule } : {}),
      reason: w.reason,
    })),
    ...(next ? { next_step: next } : {}),
  };
}

/** `chaoscore_achieve`: the whole loop, one progress notification per stage, the trace last. */
export const achieveTool = defineTool({
  name: "chaoscore_achieve",
  toolset: "core",
  title: "Achieve",
  description:
    "Run the whole cognitive loop for an objective: context from memory, reason, plan, execute every step through " +
    "policy, evaluate, re-plan the rest after a failed step (at most max_replans times) and record the episode " +
    "(through policy too; bookkeeping says whether it was stored). A denial ends the run; a step that needs approval " +
    "stops it (status pending_approval; next_step says how to get it approved and run). Sends a progress " +
    "notification per stage when the request has a progress token. Returns the trace, with summary: the answer in " +
    "words (what a recall found, or that nothing matched). May take minutes.",
  input: z.object({
    objective: objectiveSchema.describe("What to achieve, in plain words"),
    max_replans: z
      .number()
      .int()
      .min(0)
      .max(MAX_REPLANS)
      .optional()
      .describe("Re-plans after failed steps (default 2)"),
  }),
  output,
  annotations: {
    readOnlyHint: false,
    // Capabilities can write (memory.remember replaces a stored value), and the run is recorded.
    destructiveHint: true,
    idempotentHint: false,
    // http.request and cognition.generate_text reach outside.
    openWorldHint: true,
  },
  async run(args, ctx) {
    const stream = ctx.deps.cognition.achieve(
      { objective: args.objective, ...(args.max_replans !== undefined ? { maxReplans: args.max_replans } : {}) },
      { ctx: ctx.call, signal: ctx.signal, timeoutMs: RUN_TIMEOUT_MS },
    );
    let stages = 0;
    let trace: Trace | undefined;
    for await (const res of stream) {
      if (res.event.case === "stage") {
        const { stage, detail } = res.event.value;
        await ctx.progress(++stages, undefined, detail ? `${stage}: ${detail}` : stage);
      } else if (res.event.case === "trace") {
        trace = res.event.value;
      }
    }
    if (!trace) throw new ChaosError("internal", "cognition ended the run without a trace");
    return traceToOutput(trace, channelPlace(ctx));
  },
});
