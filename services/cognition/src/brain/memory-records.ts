import { randomUUID } from "node:crypto";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { z } from "zod";
import { MAX_BOOKKEEPING_VALUE_BYTES, memoryEpisodeCapability } from "../capabilities/memory-episode.js";
import type { ExecutorDeps } from "../executor/executor-deps.js";
import { executeStep } from "../executor/step-run.js";
import type { PolicyVerdict, StepResult } from "../executor/step-types.js";
import { truncate } from "./catalog.js";

/*
 * How the brain keeps episodes and procedures: as ordinary, tagged items in the tenant's memory
 * service, written and read through the memory client with the caller's call context (so tenant
 * isolation is the memory service's, as for every other item). No new RPC is needed.
 *
 * - Episode: key `episode:<signature>:<ISO time>:<8 hex>`, tags `chaoscore.episode` and
 *   `chaoscore.sig.<signature>`, TTL 30 days. Value: objective (≤ 500 chars), status, replans,
 *   provider/model, and per step capability, status, ran, problems (each ≤ 200 chars) and the
 *   *shape* of its output (field names and types, never values). Step inputs and output values
 *   are not stored: they may hold what the user asked to remember (a secret, say).
 * - Procedure: key `procedure:<signature>`, tags `chaoscore.procedure` and
 *   `chaoscore.sig.<signature>`, TTL 90 days, replaced by the latest success. Value:
 *   `{capabilities: string[], succeededAt}`.
 *
 * These are items like any other: `chaoscore_recall` shows them by key or by their tags (a
 * search without a `chaoscore.*` tag leaves them out, memory-recall.ts), and the user can forget them.
 * Every write runs as the internal capability `memory.episode` through the executor (policy
 * first, for it and for `memory.remember`, which it implies; decision and outcome in the ledger,
 * the value only as its argsHash), so a DENY on either holds, and a REQUIRE_APPROVAL skips the
 * write rather than waiting for a person. The context stage's reads do not go through policy
 * yet (docs/approvals.md, Known limits).
 */

export const EPISODE_TAG = "chaoscore.episode";
export const PROCEDURE_TAG = "chaoscore.procedure";
export const EPISODE_TTL_SECONDS = 30 * 24 * 3600;
export const PROCEDURE_TTL_SECONDS = 90 * 24 * 3600;
/** How many past episodes of the same signature the context holds. */
export const CONTEXT_EPISODES = 5;
/** How many key words are searched for relevant memories, and items kept per word. */
export const CONTEXT_WORDS = 3;
export const CONTEXT_ITEMS_PER_WORD = 5;

export const signatureTag = (signature: string): string => `chaoscore.sig.${signature}`;
export const procedureKey = (signature: string): string => `procedure:${signature}`;
const isBookkeeping = (key: string): boolean => key.startsWith("episode:") || key.startsWith("procedure:");

type MemoryDeps = Pick<ExecutorDeps, "memory" | "call" | "signal">;

function opts(deps: MemoryDeps) {
  return { ctx: deps.call, ...(deps.signal ? { signal: deps.signal } : {}) };
}

/** A memory the context offers the planner: key and a short rendering of the value. */
export interface RecalledMemory {
  readonly key: string;
  readonly value: string;
}

/** A past episode as the context offers it. */
export interface PastEpisode {
  readonly key: string;
  readonly status: string;
  readonly capabilities: readonly string[];
}

const episodeValueSchema = z.object({
  status: z.string(),
  steps: z.array(z.object({ capability: z.string() })),
});

const procedureValueSchema = z.object({ capabilities: z.array(z.string().min(1)).min(1).max(50) });

/** Items matching any of the first key words, bookkeeping items excluded, values cut short. */
export async function recallRelevant(words: readonly string[], deps: MemoryDeps): Promise<RecalledMemory[]> {
  const found = new Map<string, RecalledMemory>();
  for (const word of words.slice(0, CONTEXT_WORDS)) {
    const res = await deps.memory.search({ query: word, tags: [], limit: CONTEXT_ITEMS_PER_WORD, cursor: "" }, opts(deps));
    for (const item of res.items) {
      if (isBookkeeping(item.key) || found.has(item.key)) continue;
      const value = item.value ? JSON.stringify(toJson(ValueSchema, item.value)) : "null";
      found.set(item.key, { key: item.key, value: truncate(value, 300) });
    }
  }
  return [...found.values()];
}

/** The latest episodes recorded for this signature, oldest first. */
export async function pastEpisodes(signature: string, deps: MemoryDeps): Promise<PastEpisode[]> {
  const res = await deps.memory.search(
    { query: "", tags: [EPISODE_TAG, signatureTag(signature)], limit: 100, cursor: "" },
    opts(deps),
  );
  // Keys carry the ISO time, and search pages by key: the last ones are the newest.
  return res.items.slice(-CONTEXT_EPISODES).flatMap((item) => {
    const parsed = episodeValueSchema.safeParse(item.value ? toJson(ValueSchema, item.value) : null);
    return parsed.success ? [{ key: item.key, status: parsed.data.status, capabilities: parsed.data.steps.map((s) => s.capability) }] : [];
  });
}

/** The capability sequence that last succeeded for this signature, if any (never trusted unparsed). */
export async function recallProcedure(signature: string, deps: MemoryDeps): Promise<string[] | undefined> {
  const res = await deps.memory.recall({ key: procedureKey(signature) }, opts(deps));
  const parsed = procedureValueSchema.safeParse(res.item?.value ? toJson(ValueSchema, res.item.value) : null);
  return parsed.success ? parsed.data.capabilities : undefined;
}

/** Field names and types of an output, never its values. */
export function outputShape(output: unknown): string | undefined {
  if (output === undefined) return undefined;
  if (output === null || typeof output !== "object") return typeof output;
  if (Array.isArray(output)) return `array(${output.length})`;
  const fields = Object.entries(output as Record<string, unknown>).map(([k, v]) => {
    const type = Array.isArray(v) ? `array(${v.length})` : v === null ? "null" : typeof v === "string" ? `string(${v.length})` : typeof v;
    return `${k}: ${type}`;
  });
  return truncate(`{${fields.join(", ")}}`, 200);
}

/** What an episode records. */
export interface EpisodeRecord {
  readonly objective: string;
  readonly signature: string;
  readonly status: string;
  readonly replans: number;
  readonly provider: string;
  readonly model: string;
  readonly results: readonly StepResult[];
}

/** One of the brain's own writes, as the trace reports it. */
export interface BookkeepingWrite {
  readonly kind: "episode" | "procedure";
  readonly stored: boolean;
  /** The memory key written; only when stored. */
  readonly key?: string;
  /** Policy's decision that held (the strictest over memory.episode and memory.remember); absent when policy was not reached. */
  readonly decision?: PolicyVerdict["decision"];
  /** The rule that decided; an implied capability's is prefixed with its name (`memory.remember: deniedCapabilities`). */
  readonly matchedRule?: string;
  /** Policy's reason, or why the write failed. */
  readonly reason: string;
}

/** A write's report, and the trace note saying why it was not stored (undefined when it was). */
export interface RecordedWrite {
  readonly write: BookkeepingWrite;
  readonly note?: string;
}

interface BookkeepingInput {
  readonly key: string;
  readonly value: unknown;
  readonly tags: readonly string[];
  readonly ttl_seconds: number;
}

/** Why a write was not stored, in words: which capability's policy, which rule. */
function notStoredNote(kind: BookkeepingWrite["kind"], result: StepResult): string {
  const v = result.verdict;
  const head = `The ${kind} was not stored`;
  if (result.status === "failed" || !v) return `${head}: ${result.error?.message ?? result.evaluation.problems.join("; ")}`;
  // The implied capability whose decision held, named with its own rule.
  const by = v.implied?.find((i) => i.capability === v.decidedBy);
  const who = by?.capability ?? result.capability;
  const rule = by?.verdict.matchedRule ?? v.matchedRule;
  return v.decision === "REQUIRE_APPROVAL"
    ? `${head}: policy requires a person's approval for ${who} (${rule}), and bookkeeping never waits for one`
    : `${head}: policy denied ${who} (${rule})`;
}

/** Runs one write as a `memory.episode` bookkeeping step and reports what became of it. */
async function writeBookkeeping(kind: BookkeepingWrite["kind"], input: BookkeepingInput, deps: ExecutorDeps): Promise<RecordedWrite> {
  const result = await executeStep({ id: `bookkeeping-${kind}`, capability: memoryEpisodeCapability.name, input }, deps, { bookkeeping: true });
  const v = result.verdict;
  const stored = result.status === "executed";
  const write: BookkeepingWrite = {
    kind,
    stored,
    ...(stored ? { key: input.key } : {}),
    ...(v ? { decision: v.decision, matchedRule: v.matchedRule } : {}),
    reason: result.status === "failed" || !v ? (result.error?.message ?? result.evaluation.problems.join("; ")) : v.reason,
  };
  return stored ? { write } : { write, note: notStoredNote(kind, result) };
}

/**
 * An episode's value, within `memory.episode`'s bound: a run too long for it keeps each step's
 * id, capability, status and `ran` only (`compact: true`), which is what past episodes are read for.
 */
export function episodeValue(episode: EpisodeRecord, now: Date): Record<string, unknown> {
  const head = {
    objective: truncate(episode.objective, 500),
    status: episode.status,
    replans: episode.replans,
    provider: episode.provider,
    model: episode.model,
    at: now.toISOString(),
  };
  const full = {
    ...head,
    steps: episode.results.map((r) => ({
      id: r.stepId,
      capability: r.capability,
      status: r.status,
      ran: r.ran,
      problems: r.evaluation.problems.slice(0, 5).map((p) => truncate(p, 200)),
      ...(outputShape(r.output) ? { output: outputShape(r.output) } : {}),
    })),
  };
  if (Buffer.byteLength(JSON.stringify(full), "utf8") <= MAX_BOOKKEEPING_VALUE_BYTES) return full;
  return { ...head, compact: true, steps: episode.results.map((r) => ({ id: r.stepId, capability: r.capability, status: r.status, ran: r.ran })) };
}

/** Stores one episode through the executor (as `memory.episode`); the report has its key when stored. */
export async function recordEpisode(episode: EpisodeRecord, now: Date, deps: ExecutorDeps): Promise<RecordedWrite> {
  return writeBookkeeping(
    "episode",
    {
      key: `episode:${episode.signature}:${now.toISOString()}:${randomUUID().slice(0, 8)}`,
      value: episodeValue(episode, now),
      tags: [EPISODE_TAG, signatureTag(episode.signature)],
      ttl_seconds: EPISODE_TTL_SECONDS,
    },
    deps,
  );
}

/** Stores the capability sequence that succeeded for this signature, replacing the previous one, through the executor. */
export async function recordProcedure(signature: string, capabilities: readonly string[], now: Date, deps: ExecutorDeps): Promise<RecordedWrite> {
  return writeBookkeeping(
    "procedure",
    {
      key: procedureKey(signature),
      value: { capabilities: [...capabilities], succeededAt: now.toISOString() },
      tags: [PROCEDURE_TAG, signatureTag(signature)],
      ttl_seconds: PROCEDURE_TTL_SECONDS,
    },
    deps,
  );
}
