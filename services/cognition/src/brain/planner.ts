import { z } from "zod";
import { ChaosError, withSpan } from "@chaos-core/kit";
import type { Capability } from "../capabilities/capability.js";
import { offeredCapability, type CapabilityRegistry } from "../capabilities/registry.js";
import { describeIssues } from "../executor/evaluate.js";
import type { JsonObject, PlanStep } from "../plans/plan.js";
import { MAX_PLAN_STEPS } from "../plans/plan-store.js";
import type { AIProvider } from "../providers/ai-provider.js";
import { NO_MODEL, rankCapabilities } from "../providers/heuristic.js";
import { parseObjective, type ParsedObjective } from "../providers/objective-parser.js";
import { findReferences, renameReferences } from "../plans/step-reference.js";
import { generateValidated } from "../providers/validated-json.js";
import { plannerCatalog, truncate, UNTRUSTED_NOTE } from "./catalog.js";
import { checkObjective, usesModel, type Intent } from "./intent.js";

/** What `plan` needs. */
export interface PlanDeps {
  readonly provider: AIProvider;
  readonly registry: CapabilityRegistry;
  readonly signal?: AbortSignal;
}

/** What went wrong in the previous plan, for re-planning its remainder. */
export interface ReplanInput {
  /** Capabilities whose steps already executed (in order); they are not planned again. */
  readonly executed: readonly string[];
  /**
   * The ids of those executed steps, beside their capabilities, in order: a remaining step's
   * reference to a step left out is pointed at the one that executed (its output is the run's).
   */
  readonly executedSteps?: readonly { readonly stepId: string; readonly capability: string }[];
  /** The step that failed and why (its evaluation's problems). */
  readonly failed: { readonly capability: string; readonly problems: readonly string[] };
}

/** Options for one planning call. */
export interface PlanOptions {
  /** A capability sequence that succeeded before for this objective's signature; offered first. */
  readonly procedure?: readonly string[];
  readonly replan?: ReplanInput;
  /** Prefix of the step ids (`s1`, `s2`… by default), so re-plans' steps stay unique in a trace. */
  readonly idPrefix?: string;
}

/** Where a plan came from. */
export type PlanSource = "procedure" | "heuristic" | "model";

/** A plan: steps over registered capabilities only, each input valid for its capability. */
export interface Plan {
  readonly steps: readonly PlanStep[];
  /**
   * What a person should know about the plan, in words: above all why it is empty ("… needs a
   * language model; none is configured"), or that the model's answer was replaced by the offline
   * reading. Empty when there is nothing to say.
   */
  readonly notes: readonly string[];
  readonly source: PlanSource;
  readonly provider: string;
  /** `none` when no model was used. */
  readonly model: string;
}

/** How many ranked capabilities the heuristic planner considers. */
const HEURISTIC_RANK_K = 5;
/** A ranked capability is planned only if it scores at least this share of the best score. */
const HEURISTIC_RELATIVE_SCORE = 0.5;

function isJsonObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function jsonObject(value: unknown): JsonObject | undefined {
  // A round trip through JSON keeps only what a stored plan can carry.
  if (!isJsonObject(value)) return undefined;
  const copy: unknown = JSON.parse(JSON.stringify(value));
  return isJsonObject(copy) ? copy : undefined;
}

/** The input the capability's hook derives from the objective, if any and if its schema accepts it. */
function hookInput(capability: Capability, objective: string): JsonObject | undefined {
  const input = jsonObject(capability.fromObjective?.(objective));
  if (input === undefined || !capability.inputSchema.safeParse(input).success) return undefined;
  return input;
}

function withIds(steps: ReadonlyArray<Omit<PlanStep, "id">>, prefix: string): PlanStep[] {
  // Step references are written against `s1`, `s2`…; they follow the steps' real ids.
  const rename = (id: string) => (/^s[1-9][0-9]*$/.test(id) ? `${prefix}${id.slice(1)}` : id);
  return steps.map((s, i) => ({ id: `${prefix}${i + 1}`, ...s, input: prefix === "s" ? s.input : renameReferences(s.input, rename) }));
}

/**
 * Whether a planned input is valid for its capability once its step references are resolved:
 * the schema's complaints about a place a reference stands are left for the executor, which
 * validates the resolved value before anything else.
 */
export function validPlannedInput(capability: Capability, input: JsonObject): boolean {
  const parsed = capability.inputSchema.safeParse(input);
  if (parsed.success) return true;
  const refs = findReferences(input).map((r) => r.at.map(String).join("."));
  if (refs.length === 0) return false;
  return parsed.error.issues.every((issue) => {
    const at = issue.path.map(String).join(".");
    return refs.some((r) => at === r || at.startsWith(`${r}.`));
  });
}

/**
 * A re-plan's steps: the reading without the capabilities that already executed, given new ids;
 * a reference to a step left out points at the step of that capability that executed earlier in
 * the run (the n-th such step for the n-th left out), so its output is still what is used.
 */
function remainder(read: readonly Omit<PlanStep, "id">[], replan: ReplanInput, prefix: string): PlanStep[] {
  const done = new Set(replan.executed);
  const ran = replan.executedSteps ?? [];
  const taken = new Map<string, number>();
  const renamed = new Map<string, string>();
  const kept: Omit<PlanStep, "id">[] = [];
  read.forEach((step, i) => {
    const own = `s${i + 1}`;
    if (done.has(step.capability)) {
      const n = taken.get(step.capability) ?? 0;
      taken.set(step.capability, n + 1);
      const earlier = ran.filter((r) => r.capability === step.capability)[n];
      if (earlier) renamed.set(own, earlier.stepId);
      return;
    }
    kept.push(step);
    renamed.set(own, `${prefix}${kept.length}`);
  });
  return kept.map((s, i) => ({ id: `${prefix}${i + 1}`, ...s, input: renameReferences(s.input, (id) => renamed.get(id) ?? id) }));
}

/** The offline parser's steps when every one names an offered capability with a valid input; else undefined. */
function parsedSteps(parsed: ParsedObjective, registry: CapabilityRegistry): Omit<PlanStep, "id">[] | undefined {
  if (parsed.kind !== "steps") return undefined;
  const steps: Omit<PlanStep, "id">[] = [];
  for (const step of parsed.steps) {
    const capability = offeredCapability(registry, step.capability);
    const input = jsonObject(step.input);
    if (!capability || !input || !validPlannedInput(capability, input)) return undefined;
    steps.push({ capability: step.capability, input, rationale: step.rationale });
  }
  return steps;
}

const PROCEDURE_RATIONALE = "procedural memory: this capability sequence succeeded before for this objective";

function procedureSteps(objective: string, procedure: readonly string[], registry: CapabilityRegistry): Omit<PlanStep, "id">[] | undefined {
  if (procedure.length === 0) return undefined;
  const steps: Omit<PlanStep, "id">[] = [];
  for (const name of procedure) {
    // A procedure is a memory item anyone can overwrite: it never plans an internal capability.
    const capability = offeredCapability(registry, name);
    const input = capability ? hookInput(capability, objective) : undefined;
    // A remembered sequence is used whole or not at all: half of it is not what worked.
    if (!capability || !input) return undefined;
    steps.push({ capability: name, input, rationale: PROCEDURE_RATIONALE });
  }
  return steps;
}

function heuristicPlan(objective: string, options: PlanOptions, deps: PlanDeps): Plan {
  const prefix = options.idPrefix ?? "s";
  const base = { provider: deps.provider.id, model: NO_MODEL };
  const parsed = parseObjective(objective);
  const read = parsedSteps(parsed, deps.registry);
  if (options.procedure && !options.replan) {
    // The offline reading of the same sequence that worked: its inputs, the procedure's authority.
    const same = read && read.length === options.procedure.length && read.every((s, i) => s.capability === options.procedure?.[i]);
    const remembered = same
      ? read.map((s) => ({ ...s, rationale: `${PROCEDURE_RATIONALE}; ${s.rationale}` }))
      : procedureSteps(objective, options.procedure, deps.registry);
    if (remembered) return { ...base, source: "procedure", notes: [], steps: withIds(remembered, prefix) };
  }
  const done = new Set(options.replan?.executed ?? []);
  // Text generation is left out of ranking, because offline it would only answer that no model was used.
  // Ranked when the parser read nothing, or when upstream tools may answer what it read better.
  const ranked =
    read && !deps.registry.offered().some((c) => c.upstream !== undefined)
      ? []
      : rankCapabilities(objective, deps.registry.descriptors().filter((d) => d.name !== "cognition.generate_text"), HEURISTIC_RANK_K);
  const yields = yieldsToUpstream(objective, read, parsed.kind, ranked, deps.registry);
  if (read && !yields) {
    const steps = options.replan ? remainder(read, options.replan, prefix) : withIds(read, prefix);
    return { ...base, source: "heuristic", notes: [], steps };
  }
  if (parsed.kind === "needs_model" && !yields) return { ...base, source: "heuristic", notes: [parsed.note], steps: [] };

  // Not an everyday objective the parser reads, or one an upstream tool answers better: the
  // capabilities ranked by their descriptions instead.
  const best = ranked[0]?.score ?? 0;
  const steps: Omit<PlanStep, "id">[] = [];
  let upstreamPlanned = false;
  for (const { name, score } of ranked) {
    if (score < best * HEURISTIC_RELATIVE_SCORE || done.has(name)) continue;
    const capability = offeredCapability(deps.registry, name);
    // One upstream tool at most from ranking: two near-equal matches are a choice for a model or a person, not both.
    if (capability?.upstream && upstreamPlanned) continue;
    const input = capability ? hookInput(capability, objective) : undefined;
    if (!input) continue;
    if (capability?.upstream) upstreamPlanned = true;
    steps.push({
      capability: name,
      input,
      rationale: `heuristic (no model): "${name}" matches the objective's words (BM25 ${score.toFixed(2)}) and its input was derived from the objective`,
    });
  }
  // Ranked first, but its input could not be read from the objective: the parser's reading, when it had one.
  if (steps.length === 0 && read) return { ...base, source: "heuristic", notes: [], steps: options.replan ? remainder(read, options.replan, prefix) : withIds(read, prefix) };
  const missing = ranked[0] ? upstreamNote(offeredCapability(deps.registry, ranked[0].name)) : undefined;
  const note = missing ?? (parsed.kind === "steps" ? "The offline reading names a capability that is not registered here." : parsed.note);
  return { ...base, source: "heuristic", notes: steps.length === 0 ? [note] : [], steps: withIds(steps, prefix) };
}

/**
 * Whether the parser's everyday reading of an objective (a recall for "list/show/find …", a
 * remember, a fetch of what looked like a host, or "needs a model") yields to the caller's upstream
 * tools (docs/federation-platform.md §4): when an upstream tool ranks first, the objective names
 * neither memory nor a URL, and the reading's one capability is not among the first three ranked.
 */
function yieldsToUpstream(
  objective: string,
  read: readonly Omit<PlanStep, "id">[] | undefined,
  kind: string,
  ranked: readonly { name: string }[],
  registry: CapabilityRegistry,
): boolean {
  const top = ranked[0] && offeredCapability(registry, ranked[0].name);
  if (!top?.upstream) return false;
  if (kind === "needs_model") return true;
  if (!read || read.length !== 1) return false;
  // An objective that names memory, or gives a URL, meant what the parser read.
  if (/\b(memor(y|ies)|remember|recall|forget)\b|\bhttps?:\/\//i.test(objective)) return false;
  return !ranked.slice(0, 3).some((r) => r.name === read[0]!.capability);
}

/** What a person reads when the capability ranked first is an upstream tool whose input the objective does not give; undefined for any other. */
function upstreamNote(capability: Capability | undefined): string | undefined {
  const schema = capability?.upstream?.inputSchema;
  if (!capability || !schema) return undefined;
  const required = Array.isArray(schema.required) ? (schema.required as unknown[]).filter((r): r is string => typeof r === "string") : [];
  return `The upstream tool ${capability.name} matches the objective best, but its input (${required.join(", ") || "none required"}) could not be read from it offline: give it with chaoscore_execute, or configure a model provider.`;
}

/** The shape a model must answer; steps naming an unknown capability or invalid input fail it. */
function modelPlanSchema(registry: CapabilityRegistry) {
  const known = registry.offered().map((c) => c.name).join(", ");
  return z.object({
    steps: z
      .array(
        z.object({
          capability: z.string().min(1),
          input: z.record(z.string(), z.json()),
          rationale: z.string().max(2_000),
        }),
      )
      .max(MAX_PLAN_STEPS),
  }).superRefine((plan, ctx) => {
    plan.steps.forEach((step, i) => {
      const capability = offeredCapability(registry, step.capability);
      if (!capability) {
        ctx.addIssue({
          code: "custom",
          path: ["steps", i, "capability"],
          message: registry.get(step.capability)
            ? `"${step.capability}" is internal (the cognitive core's own bookkeeping) and cannot be planned; use one of: ${known}`
            : `"${truncate(step.capability, 80)}" is not a registered capability; use one of: ${known}`,
        });
        return;
      }
      const parsed = capability.inputSchema.safeParse(step.input);
      if (!parsed.success && !validPlannedInput(capability, step.input as JsonObject)) {
        for (const problem of describeIssues(`steps.${i}.input`, parsed.error)) {
          ctx.addIssue({ code: "custom", path: ["steps", i, "input"], message: `${capability.name}: ${problem}` });
        }
      }
    });
  });
}

const PLAN_SHAPE =
  '{"steps": [{"capability": string (a name from the capability list), "input": object (valid for that capability\'s input schema), "rationale": string}]}';

/** The offline reading as a model sees it: capability and input per step, or null when there is none. */
function offlineHint(read: readonly Omit<PlanStep, "id">[] | undefined): unknown {
  return read ? read.map((s) => ({ capability: s.capability, input: s.input })) : null;
}

async function modelPlan(objective: string, intent: Intent | undefined, options: PlanOptions, deps: PlanDeps): Promise<Plan> {
  const read = options.replan ? undefined : parsedSteps(parseObjective(objective), deps.registry);
  try {
    return await askModelPlan(objective, intent, options, deps, read);
  } catch (err) {
    // A model whose answer failed validation twice: the offline reading, when there is one, is
    // what the objective plainly says, so it plans instead of the call failing.
    const e = ChaosError.from(err);
    if (e.code !== "internal" || !read || read.length === 0) throw err;
    return {
      source: "heuristic",
      provider: deps.provider.id,
      model: NO_MODEL,
      notes: [`The model's plan failed validation twice (${truncate(e.message, 300)}); the offline parser's reading was used instead.`],
      steps: withIds(read, options.idPrefix ?? "s"),
    };
  }
}

async function askModelPlan(
  objective: string,
  intent: Intent | undefined,
  options: PlanOptions,
  deps: PlanDeps,
  read: readonly Omit<PlanStep, "id">[] | undefined,
): Promise<Plan> {
  const answer = await generateValidated(deps.provider, modelPlanSchema(deps.registry), {
    instructions:
      "You plan how an automation system reaches an objective, as an ordered list of capability calls. Use only capabilities " +
      "from the list, with inputs valid for their JSON Schema. Keep the plan as short as the objective allows. When a " +
      "remembered procedure is given, prefer it if it fits. When re-planning, plan only the remainder: what already " +
      "executed must not be repeated, and the failed step must be fixed or replaced. offlineReading is what a " +
      "deterministic parser read in the objective (null when it read nothing); use it when it is right. A later step " +
      'can take an earlier step\'s output as input with {"$step": "s1", "path": "/json/pointer"} in place of a value. ' +
      UNTRUSTED_NOTE,
    input: JSON.stringify({
      objective,
      intent: intent ?? null,
      rememberedProcedure: options.procedure ?? null,
      offlineReading: offlineHint(read),
      replan: options.replan ?? null,
      ...catalogFor(objective, intent, options, deps.registry),
    }),
    shapeDescription: PLAN_SHAPE,
    ...(deps.signal ? { signal: deps.signal } : {}),
  });
  const steps = answer.value.steps.map((s) => ({ capability: s.capability, input: s.input as JsonObject, rationale: s.rationale }));
  return { source: "model", provider: answer.providerId, model: answer.model, notes: [], steps: withIds(steps, options.idPrefix ?? "s") };
}

/**
 * The capabilities a model planner is shown for this objective (catalog.ts), the ones a remembered
 * procedure, the reading of the objective or a re-plan names kept; and how many upstream tools are not shown.
 */
function catalogFor(objective: string, intent: Intent | undefined, options: PlanOptions, registry: CapabilityRegistry) {
  const keep = [...(options.procedure ?? []), ...(intent?.candidateCapabilities ?? []), ...(options.replan ? [...options.replan.executed, options.replan.failed.capability] : [])];
  const { capabilities, unlisted } = plannerCatalog(registry, objective, keep);
  return { capabilities, ...(unlisted > 0 ? { unlistedUpstreamTools: `${unlisted} more upstream tools ranked as unrelated to the objective are not listed` } : {}) };
}

/**
 * Plans an objective as steps over registered capabilities only; every step's input passed its
 * capability's schema. With a model provider, an answer naming an unknown capability or an
 * invalid input is sent back once with the problems, then the call fails with `internal`. With
 * the heuristic provider the plan is deterministic: a remembered procedure (`options.procedure`)
 * is used when every capability in it can be filled from the objective; otherwise the ranked
 * capabilities whose `fromObjective` hook answers, in rank order. Re-planning (`options.replan`)
 * leaves out capabilities that already executed.
 */
export async function plan(objective: string, intent: Intent | undefined, deps: PlanDeps, options: PlanOptions = {}): Promise<Plan> {
  const checked = checkObjective(objective);
  if (options.idPrefix !== undefined && !/^[a-z0-9-]{1,16}$/.test(options.idPrefix)) {
    throw new ChaosError("invalid_argument", "idPrefix must be 1-16 lowercase letters, digits or dashes");
  }
  return withSpan("chaoscore.cognition.plan", { "chaoscore.provider": deps.provider.id }, async (span) => {
    const result = usesModel(deps.provider) ? await modelPlan(checked, intent, options, deps) : heuristicPlan(checked, options, deps);
    span.setAttributes({ "chaoscore.plan.steps": result.steps.length, "chaoscore.plan.source": result.source });
    return result;
  });
}
