/*
 * The cognitive core loop. Storage decision (details in memory-records.ts): episodes and
 * procedures are ordinary tagged items in the tenant's memory service — `episode:<signature>:
 * <time>:<id>` (tag `chaoscore.episode`, 30 days) and `procedure:<signature>` (tag
 * `chaoscore.procedure`, 90 days, latest success wins) — where the signature is the first 32 hex
 * digits of the SHA-256 of the objective's sorted distinct stemmed lowercase key words
 * (signature.ts). Episodes hold step statuses, problems and output shapes, never inputs or output
 * values. Both are written as the internal capability memory.episode through the executor, so
 * policy governs them like any step.
 */
import { ChaosError, withSpan } from "@chaos-core/kit";
import type { ExecutorDeps } from "../executor/executor-deps.js";
import { executeSteps } from "../executor/plan-run.js";
import type { StepResult } from "../executor/step-types.js";
import { DEFAULT_PLAN_TTL_SECONDS } from "../plans/plan-store.js";
import { parseObjective } from "../providers/objective-parser.js";
import { checkObjective, reason, usesModel, type Intent } from "./intent.js";
import {
  pastEpisodes,
  recallProcedure,
  recallRelevant,
  recordEpisode,
  recordProcedure,
  type BookkeepingWrite,
  type PastEpisode,
  type RecalledMemory,
} from "./memory-records.js";
import { plan, type Plan } from "./planner.js";
import { keyWords, objectiveSignature } from "./signature.js";
import { summarizeRun, unansweredQuestions, type SummaryOptions } from "./summary.js";

/** The stages of the loop, in the order they first occur. */
export type BrainStage = "context" | "reason" | "plan" | "execute" | "evaluate" | "replan" | "remember";

/** How a run ended. */
export type BrainStatus = "succeeded" | "failed" | "pending_approval" | "denied";

/** Told when a stage has finished; `detail` is a one-line summary safe to show (no secrets, no outputs). */
export type StageListener = (stage: BrainStage, detail: string) => void | Promise<void>;

/** Default and largest allowed re-plans per run. */
export const DEFAULT_MAX_REPLANS = 2;
export const MAX_REPLANS_LIMIT = 5;

/** What `runCognitiveCore` needs: the executor's deps (policy, memory, provider, audit, approvals, call). */
export interface BrainDeps extends ExecutorDeps {
  /** The clock for episode keys; tests pass their own. */
  readonly now?: () => Date;
}

export interface CognitiveRequest {
  readonly objective: string;
  /** Re-plans allowed after failed steps (default 2, at most 5); never exceeded. */
  readonly maxReplans?: number;
  readonly onStage?: StageListener;
}

/** What the context stage gathered. */
export interface BrainContext {
  readonly signature: string;
  readonly memories: readonly RecalledMemory[];
  readonly episodes: readonly PastEpisode[];
  /** The capability sequence procedural memory offered the planner first, if any. */
  readonly procedure?: readonly string[];
}

/** The full record of a run. */
export interface CognitiveTrace {
  readonly objective: string;
  readonly context: BrainContext;
  readonly intent: Intent;
  /** The first plan, then one per re-plan. */
  readonly plans: readonly Plan[];
  /** Every step result of every plan, in execution order (skipped steps included). */
  readonly results: readonly StepResult[];
  readonly status: BrainStatus;
  readonly replans: number;
  /** The episode's memory key; undefined when it was not stored (see `bookkeeping` and `notes`). */
  readonly episodeKey: string | undefined;
  /** Why the run ended as it did, and why a bookkeeping write was not stored. */
  readonly notes: readonly string[];
  /** The brain's own writes (the episode, and on success the procedure): each stored or not, and why. */
  readonly bookkeeping: readonly BookkeepingWrite[];
  /** The run's answer in words (what a recall found or that nothing matched, what changed); see summary.ts. */
  readonly summary: string;
}

const SELF_SPANNED = new Set<BrainStage>(["reason", "plan", "replan"]);

/** The queries of the recalls the offline parser reads from the objective's questions ("what is X?"). */
function questionQueries(objective: string): Set<string> {
  const parsed = parseObjective(objective);
  if (parsed.kind !== "steps") return new Set();
  return new Set(parsed.steps.flatMap((s) => (s.question && typeof s.input.query === "string" ? [s.input.query] : [])));
}

function checkMaxReplans(value: number | undefined): number {
  const n = value ?? DEFAULT_MAX_REPLANS;
  if (!Number.isInteger(n) || n < 0 || n > MAX_REPLANS_LIMIT) {
    throw new ChaosError("invalid_argument", `maxReplans must be a whole number from 0 to ${MAX_REPLANS_LIMIT}, got ${n}`);
  }
  return n;
}

function contextText(ctx: BrainContext): string | undefined {
  const parts: string[] = [];
  if (ctx.memories.length > 0) parts.push(`Relevant memories: ${JSON.stringify(ctx.memories)}`);
  if (ctx.episodes.length > 0) parts.push(`Past runs of this objective: ${JSON.stringify(ctx.episodes)}`);
  if (ctx.procedure) parts.push(`A capability sequence that succeeded before: ${ctx.procedure.join(" → ")}`);
  return parts.length > 0 ? parts.join("\n") : undefined;
}

/**
 * Runs the whole loop for one objective: context (relevant memories, past episodes of the same
 * signature, a remembered procedure) → reason → plan → execute (policy first, through the
 * executor only) → evaluate (deterministic) → on a failed step re-plan the remainder, at most
 * `maxReplans` times → record the episode, and on success the procedure (each a `memory.episode`
 * bookkeeping step: policy decides, a denial or an approval requirement skips the write and the
 * trace's `bookkeeping` and `notes` say so). Stops at once on a
 * pending approval or a denial (no re-plan: a denied capability is not worked around). Throws
 * only before anything ran (bad request, memory unreadable, a model that cannot produce a valid
 * plan); once steps ran, failures are in the trace. `onStage` hears each stage as it finishes,
 * in order.
 */
export async function runCognitiveCore(request: CognitiveRequest, deps: BrainDeps): Promise<CognitiveTrace> {
  const maxReplans = checkMaxReplans(request.maxReplans);
  const objective = checkObjective(request.objective);
  const now = deps.now ?? (() => new Date());
  const stage = async <T>(name: BrainStage, run: () => Promise<T>, detail: (value: T) => string): Promise<T> => {
    // reason() and plan() open their own stage spans; the others get one here.
    const value = SELF_SPANNED.has(name) ? await run() : await withSpan(`chaoscore.cognition.${name}`, {}, run);
    await request.onStage?.(name, detail(value));
    return value;
  };

  const context = await stage(
    "context",
    async (): Promise<BrainContext> => {
      const signature = objectiveSignature(objective);
      const [memories, episodes, procedure] = [
        await recallRelevant(keyWords(objective), deps),
        await pastEpisodes(signature, deps),
        await recallProcedure(signature, deps),
      ];
      return { signature, memories, episodes, ...(procedure ? { procedure } : {}) };
    },
    (c) => `${c.memories.length} memories, ${c.episodes.length} past episodes${c.procedure ? ", a remembered procedure" : ""}`,
  );

  const intent = await stage("reason", () => reason(objective, contextText(context), deps), (i) =>
    `goal read by ${i.provider}/${i.model}; candidates: ${i.candidateCapabilities.join(", ") || "none"}`,
  );

  const plans: Plan[] = [];
  const results: StepResult[] = [];
  const notes: string[] = [];
  let current = await stage(
    "plan",
    () => plan(objective, intent, deps, { idPrefix: "p1-s", ...(context.procedure ? { procedure: context.procedure } : {}) }),
    (p) => `${p.steps.length} steps (${p.source}): ${p.steps.map((s) => s.capability).join(" → ") || "none"}`,
  );
  plans.push(current);

  let status: BrainStatus = "failed";
  let replans = 0;
  for (;;) {
    if (current.steps.length === 0) {
      notes.push(...current.notes);
      notes.push("No step over a registered capability serves the objective; nothing was planned to run.");
      status = "failed";
      break;
    }
    notes.push(...current.notes);
    // A re-plan's steps may refer to outputs of steps an earlier plan executed.
    const ranBefore = results.filter((r) => r.status === "executed");
    const earlier = new Map(ranBefore.map((r) => [r.stepId, r.output]));
    // A step that stops for approval keeps the rest of this plan, for chaoscore_execute {approval_id} to go on with.
    const origin = {
      objective,
      expiresAt: new Date(now().getTime() + DEFAULT_PLAN_TTL_SECONDS * 1000).toISOString(),
      executed: ranBefore.map((r) => r.capability),
    };
    const stepResults = await stage("execute", () => executeSteps(current.steps, deps, earlier, origin), (rs) =>
      rs.map((r) => `${r.stepId} ${r.capability}: ${r.status}`).join("; "),
    );
    results.push(...stepResults);
    const stop = await stage("evaluate", async () => stepResults.find((r) => r.status !== "executed" && r.status !== "skipped"), (r) =>
      r ? `${r.stepId} ${r.status}: ${r.evaluation.problems.join("; ")}` : "every step executed and passed evaluation",
    );
    if (!stop) {
      status = "succeeded";
      break;
    }
    if (stop.status === "pending_approval" || stop.status === "denied") {
      status = stop.status;
      notes.push(
        stop.status === "denied"
          ? `Policy denied ${stop.capability}; the loop stopped without re-planning around it.`
          : `${stop.capability} waits for a human approval${stop.approval ? ` (${stop.approval.approvalId})` : ""}; the loop stopped.`,
      );
      break;
    }
    if (replans >= maxReplans) {
      notes.push(`${stop.stepId} (${stop.capability}) failed and the re-plan budget (${maxReplans}) is spent.`);
      status = "failed";
      break;
    }
    replans += 1;
    const ran = results.filter((r) => r.status === "executed");
    const executed = ran.map((r) => r.capability);
    const executedSteps = ran.map((r) => ({ stepId: r.stepId, capability: r.capability }));
    current = await stage(
      "replan",
      () =>
        plan(objective, intent, deps, {
          idPrefix: `p${replans + 1}-s`,
          replan: { executed, executedSteps, failed: { capability: stop.capability, problems: stop.evaluation.problems } },
        }),
      (p) => `re-plan ${replans}/${maxReplans}: ${p.steps.map((s) => s.capability).join(" → ") || "nothing left to try"}`,
    );
    plans.push(current);
  }

  // The writes run as bookkeeping steps (policy first, in the ledger) and never throw: the steps
  // already ran, so the trace must reach the caller whatever became of its record.
  const bookkeeping = await stage(
    "remember",
    async () => {
      const writes = [
        await recordEpisode(
          { objective, signature: context.signature, status, replans, provider: intent.provider, model: intent.model, results },
          now(),
          deps,
        ),
      ];
      if (status === "succeeded") {
        const sequence = results.filter((r) => r.status === "executed").map((r) => r.capability);
        writes.push(await recordProcedure(context.signature, sequence, now(), deps));
      }
      for (const w of writes) if (w.note) notes.push(w.note);
      return writes.map((w) => w.write);
    },
    (writes) => writes.map((w) => (w.stored ? `${w.kind} ${w.key ?? ""}` : `${w.kind} not stored (${w.decision ?? "failed"})`)).join("; "),
  );
  const episodeKey = bookkeeping.find((w) => w.kind === "episode" && w.stored)?.key;

  // Offline, memory is all that answers a question: one it holds nothing about is said to be
  // unanswered, and what would answer it, in the summary and the notes.
  const steps = plans.flatMap((p) => p.steps);
  const answers: SummaryOptions = usesModel(deps.provider) ? {} : { offlineQuestions: questionQueries(objective) };
  notes.push(...unansweredQuestions(results, steps, answers));
  const summary = summarizeRun(results, steps, answers);
  return { objective, context, intent, plans, results, status, replans, episodeKey, notes, bookkeeping, summary };
}
