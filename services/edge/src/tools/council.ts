import type { JsonObject } from "@bufbuild/protobuf";
import { z } from "zod";
import { defineTool } from "../definitions/tool.js";
import {
  boundedText,
  claimSchema,
  COUNCIL_INPUT_LIMITS,
  COUNCIL_PHASES,
  COUNCIL_RESULT_NOTE,
  orNull,
  phaseOutputSchema,
  sessionIdSchema,
} from "./council-shapes.js";

// The council tools are thin: arguments → CouncilService → the service's result. Each result is
// the council's full JSON answer with the service's typed fields laid over it at the top level,
// so the fields a client branches on are declared here and cannot move with the ruleset.
// No policy check: the council runs no capability and reaches nothing outside its own
// per-tenant sessions (docs/council.md).

const L = COUNCIL_INPUT_LIMITS;
const verdict = z.string().describe("excellent (>= 90), good (70-89), needs_improvement (50-69) or insufficient (< 50)");

/** `council_init`: starts a council session for a task. */
export const councilInitTool = defineTool({
  name: "council_init",
  toolset: "council",
  title: "Council: start a session",
  description:
    "Start a council session: deterministic scaffolding for a hard problem in ordered phases (decompile → design → " +
    "critique → synthesis → verify), each owned by a persona with an authority boundary. The task's complexity " +
    "(score and reason returned) sets the pipeline depth: light skips design and critique. No model is called; " +
    "explainable rules compute every score. Then work as the returned persona and call council_save with the " +
    "phase's output. Sessions belong to your tenant and survive restarts.",
  input: z.object({
    task: boundedText("task", L.maxTaskChars).describe("The problem to solve"),
    title: boundedText("title", L.maxTitleChars).optional(),
    context: boundedText("context", L.maxContextChars)
      .optional()
      .describe("Background the personas should take into account"),
  }),
  output: z.looseObject({
    sessionId: z.string().describe("Pass to every other council tool"),
    phase: z.string(),
    persona: z.string(),
    complexityLevel: z.string().describe("simple, moderate or complex"),
    pipelineDepth: z.string().describe("light, standard or full"),
    pipeline: z.array(z.string()),
  }).describe(COUNCIL_RESULT_NOTE),
  annotations: {
    readOnlyHint: false,
    // Adds a new session; never touches an existing one.
    destructiveHint: false,
    // Each call starts another session.
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const res = await ctx.deps.council.init(
      { task: args.task, title: args.title ?? "", context: args.context ?? "" },
      { ctx: ctx.call, signal: ctx.signal },
    );
    return {
      ...res.result,
      sessionId: res.sessionId,
      phase: res.phase,
      persona: res.persona,
      complexityLevel: res.complexityLevel,
      pipelineDepth: res.pipelineDepth,
      pipeline: [...res.pipeline],
    };
  },
});

/** `council_save`: records the active phase's output. */
export const councilSaveTool = defineTool({
  name: "council_save",
  toolset: "council",
  title: "Council: save a phase",
  description:
    "Save the output of the session's active phase: validated against the phase's fields (a wrong or missing one " +
    "is named), scored (completeness, consistency, decision quality, structure, transparency, agentic), checked for " +
    "contradictions with earlier phases and for output outside the persona's authority. A score of 70 or more locks " +
    "the phase and hands over to the next persona; below, improve the output and save the phase again. Phases " +
    "cannot be skipped, saved out of order or changed once locked.",
  input: z.object({
    sessionId: sessionIdSchema,
    phase: z.enum(COUNCIL_PHASES).describe("The active phase"),
    output: phaseOutputSchema.describe(
      "Required fields: decompile {summary, decisions, constraints, confidence, criticalQuestions, claims}; design " +
        "{summary, approaches, justification, tradeoffs, recommended, decisions}; critique {summary, vulnerabilities, " +
        "riskLevel, mitigation, confidence}; synthesis {summary, implementation, testing, warnings}; verify {summary, " +
        "checks, passedCount, failedCount, finalConfidence}, optionally decision (approve or reject; without it a " +
        "failed check rejects). List items: decisions {text, rationale?, alternatives?}; claims {text, certainty " +
        "(confirmed|likely|uncertain|unknown|assumption), source?}; approaches {name, description, pros?, cons?}; " +
        "vulnerabilities {description, severity (low|medium|high|critical), area?, mitigation?}; checks {name, passed, " +
        "details?}; any of these may be a plain string. Optional knowledgeBoundary {whatIKnow, whatIAssume, " +
        `whatIDontKnow, whatNeedsVerification}. No other field is taken. At most ${L.maxOutputChars} characters as JSON.`,
    ),
  }),
  output: z.looseObject({
    sessionId: z.string(),
    phase: z.string(),
    score: z.number().describe("0-100"),
    verdict,
    canProceed: z.boolean().describe("Whether the next phase is unlocked"),
    nextPhase: z.string().nullable().describe("Now active; null when complete or this phase must be saved again"),
    sessionComplete: z.boolean(),
  }).describe(COUNCIL_RESULT_NOTE),
  annotations: {
    readOnlyHint: false,
    // A locked phase is never overwritten; a failing attempt is kept and superseded, not erased.
    destructiveHint: false,
    // A second save of a locked phase is refused, so repeating a call does not repeat its effect,
    // but it does not answer the same either.
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const res = await ctx.deps.council.save(
      { sessionId: args.sessionId, phase: args.phase, output: args.output as JsonObject },
      { ctx: ctx.call, signal: ctx.signal },
    );
    return {
      ...res.result,
      sessionId: res.sessionId,
      phase: res.phase,
      score: res.score,
      verdict: res.verdict,
      canProceed: res.canProceed,
      nextPhase: orNull(res.nextPhase),
      sessionComplete: res.sessionComplete,
    };
  },
});

/** `council_recall`: a session's state, to keep continuity. */
export const councilRecallTool = defineTool({
  name: "council_recall",
  toolset: "council",
  title: "Council: recall a session",
  description:
    "Recall a council session: progress, the active phase and persona, each phase's status and score, decisions, " +
    "warnings and the transparency log (format summary: less; decisions: those only).",
  input: z.object({
    sessionId: sessionIdSchema,
    format: z.enum(["full", "summary", "decisions"]).optional().describe("Default full"),
  }),
  output: z.looseObject({
    sessionId: z.string(),
    status: z.string(),
    activePhase: z.string().nullable().describe("Null when the session is complete"),
  }).describe(COUNCIL_RESULT_NOTE),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    const res = await ctx.deps.council.recall({ sessionId: args.sessionId, format: args.format ?? "full" }, { ctx: ctx.call, signal: ctx.signal });
    return { ...res.result, sessionId: res.sessionId, status: res.status, activePhase: orNull(res.currentPhase) };
  },
});

/** `council_verify`: checks claims against what a session stored. */
export const councilVerifyTool = defineTool({
  name: "council_verify",
  toolset: "council",
  title: "Council: verify claims",
  description:
    "Check claims against what the session stored: contradictions (numbers that disagree, a statement and its " +
    "negation, earlier constraints broken) and grounding (whether a saved phase supports the claim). Reports " +
    "verified and unverified percentages.",
  input: z.object({
    sessionId: sessionIdSchema,
    claims: z
      .array(claimSchema)
      .min(1, "claims must list at least one claim")
      .max(L.maxClaimsToVerify, `claims must list at most ${L.maxClaimsToVerify} claims`)
      .describe("A plain string is a claim's text"),
    mode: z.enum(["contradiction", "grounding", "all"]).optional().describe("Default all"),
  }),
  output: z.looseObject({
    sessionId: z.string(),
    total: z.number(),
    passed: z.number(),
    failed: z.number(),
  }).describe(COUNCIL_RESULT_NOTE),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    const res = await ctx.deps.council.verify(
      {
        sessionId: args.sessionId,
        claims: args.claims.map((c) => ({ text: c.text, source: c.source ?? "" })),
        mode: args.mode ?? "all",
      },
      { ctx: ctx.call, signal: ctx.signal },
    );
    return { ...res.result, sessionId: res.sessionId, total: res.total, passed: res.passed, failed: res.failed };
  },
});

/** `council_continue`: resumes a session where it left off. */
export const councilContinueTool = defineTool({
  name: "council_continue",
  toolset: "council",
  title: "Council: continue a session",
  description:
    "Resume a council session where it left off (after a break, a new conversation or a restart): the active " +
    "phase and its persona (identity, authority and its limits), the phase plan and instructions, memory slots and " +
    "the transparency log. Changes nothing.",
  input: z.object({ sessionId: sessionIdSchema }),
  output: z.looseObject({
    sessionId: z.string(),
    status: z.string(),
    activePhase: z.string().nullable().describe("Null when the session is complete"),
    activePersona: z.string().nullable().describe("Null when the session is complete"),
  }).describe(COUNCIL_RESULT_NOTE),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    const res = await ctx.deps.council.continue({ sessionId: args.sessionId }, { ctx: ctx.call, signal: ctx.signal });
    return {
      ...res.result,
      sessionId: res.sessionId,
      status: res.status,
      activePhase: orNull(res.currentPhase),
      activePersona: orNull(res.persona),
    };
  },
});

/** `council_score`: the session's multi-dimensional assessment. */
export const councilScoreTool = defineTool({
  name: "council_score",
  toolset: "council",
  title: "Council: score a session",
  description:
    "Score a council session: overall score and verdict from quality (phase scores), adaptability, transparency " +
    "and agentic (authority) scores, with every phase's score and verdict and the ruleset version used.",
  input: z.object({ sessionId: sessionIdSchema }),
  output: z.looseObject({
    sessionId: z.string(),
    score: z.number().describe("Overall, 0-100"),
    verdict,
  }).describe(COUNCIL_RESULT_NOTE),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    const res = await ctx.deps.council.score({ sessionId: args.sessionId }, { ctx: ctx.call, signal: ctx.signal });
    return { ...res.result, sessionId: res.sessionId, score: res.score, verdict: res.verdict };
  },
});

/** The council toolset, in the order a session uses it. */
export const COUNCIL_TOOLS = [
  councilInitTool,
  councilSaveTool,
  councilRecallTool,
  councilVerifyTool,
  councilContinueTool,
  councilScoreTool,
] as const;
