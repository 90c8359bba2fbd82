import { z } from "zod";
import { ChaosError, withSpan } from "@chaos-core/kit";
import type { CapabilityRisk } from "../capabilities/capability.js";
import { offeredCapability, type CapabilityRegistry } from "../capabilities/registry.js";
import type { AIProvider } from "../providers/ai-provider.js";
import { NO_MODEL, rankCapabilities } from "../providers/heuristic.js";
import { parseObjective } from "../providers/objective-parser.js";
import { generateValidated } from "../providers/validated-json.js";
import { maxRisk, plannerCatalog, RISKS, truncate, UNTRUSTED_NOTE } from "./catalog.js";

/** What the cognitive core understood an objective to ask for. */
export interface Intent {
  readonly goal: string;
  readonly constraints: readonly string[];
  readonly successCriteria: readonly string[];
  /** What is unclear, and what the reading could not do (e.g. that no model was used). */
  readonly ambiguities: readonly string[];
  /** The highest risk among the candidates (a model may raise it, never lower it). */
  readonly risk: CapabilityRisk;
  /** Registered capability names only, most relevant first. */
  readonly candidateCapabilities: readonly string[];
  readonly provider: string;
  /** The model that read the objective; `none` when no model was used. */
  readonly model: string;
}

/** What `reason` needs. */
export interface ReasonDeps {
  readonly provider: AIProvider;
  readonly registry: CapabilityRegistry;
  readonly signal?: AbortSignal;
}

/** Objectives and contexts longer than this are refused rather than silently cut. */
export const MAX_OBJECTIVE_CHARS = 10_000;
export const MAX_CONTEXT_CHARS = 50_000;
/** How many candidates the heuristic reading proposes. */
export const HEURISTIC_CANDIDATES = 3;

/** The sentence every heuristic intent carries, so nobody mistakes it for a model's reading. */
export const NO_MODEL_NOTE =
  "No language model was used: the offline parser read the objective's everyday forms (remember, ask, list, forget, fetch), " +
  "or else the heuristic provider ranked capability descriptions against its words (BM25); " +
  "the goal is the objective as written, and constraints and success criteria were not interpreted.";

/** Whether a provider answers with a model; the heuristic provider has none. */
export function usesModel(provider: AIProvider): boolean {
  return provider.model !== null;
}

/** Refuses an empty or oversized objective. */
export function checkObjective(objective: string): string {
  const trimmed = objective.trim();
  if (trimmed === "") throw new ChaosError("invalid_argument", "objective must not be empty");
  if (trimmed.length > MAX_OBJECTIVE_CHARS) {
    throw new ChaosError("invalid_argument", `objective is ${trimmed.length} characters; the limit is ${MAX_OBJECTIVE_CHARS}`);
  }
  return trimmed;
}

function candidatesRisk(names: readonly string[], registry: CapabilityRegistry): CapabilityRisk {
  return names.reduce<CapabilityRisk>((risk, name) => maxRisk(risk, registry.get(name)?.risk ?? "low"), "low");
}

function heuristicIntent(objective: string, deps: ReasonDeps): Intent {
  // The offline parser's reading first (its capabilities, when every one is offered here); else
  // the capabilities whose descriptions share the objective's words.
  const parsed = parseObjective(objective);
  const read = parsed.kind === "steps" ? [...new Set(parsed.steps.map((s) => s.capability))] : [];
  const ranked =
    read.length > 0 && read.every((n) => offeredCapability(deps.registry, n) !== undefined)
      ? read
      : rankCapabilities(objective, deps.registry.descriptors(), HEURISTIC_CANDIDATES).map((r) => r.name);
  const ambiguities = [NO_MODEL_NOTE];
  if (parsed.kind !== "steps") ambiguities.push(parsed.note);
  else if (ranked.length === 0) ambiguities.push("No registered capability shares a word with the objective.");
  return {
    goal: objective,
    constraints: [],
    // The one criterion the core checks by code whatever reads the objective.
    successCriteria: ["Every planned step executes and its output validates against its capability's output schema."],
    ambiguities,
    risk: candidatesRisk(ranked, deps.registry),
    candidateCapabilities: ranked,
    provider: deps.provider.id,
    model: NO_MODEL,
  };
}

const modelIntentSchema = z.object({
  goal: z.string().min(1).max(2_000),
  constraints: z.array(z.string().min(1).max(1_000)).max(20),
  successCriteria: z.array(z.string().min(1).max(1_000)).max(20),
  ambiguities: z.array(z.string().min(1).max(1_000)).max(20),
  risk: z.enum(RISKS),
  candidateCapabilities: z.array(z.string()).max(20),
});

const INTENT_SHAPE =
  '{"goal": string, "constraints": string[], "successCriteria": string[], "ambiguities": string[], ' +
  '"risk": "low"|"medium"|"high"|"critical", "candidateCapabilities": string[] (names from the capability list only)}';

async function modelIntent(objective: string, context: string | undefined, deps: ReasonDeps): Promise<Intent> {
  const answer = await generateValidated(deps.provider, modelIntentSchema, {
    instructions:
      "You read an objective for an automation system and state what it asks for. Name only capabilities from the list " +
      "you are given. List real ambiguities; do not invent constraints the objective does not state. " +
      UNTRUSTED_NOTE,
    input: JSON.stringify({ objective, context: context ?? null, capabilities: plannerCatalog(deps.registry, objective).capabilities }),
    shapeDescription: INTENT_SHAPE,
    ...(deps.signal ? { signal: deps.signal } : {}),
  });
  const v = answer.value;
  // A model never introduces a capability: unregistered (or internal) names are dropped, and said to be.
  const offered = (name: string) => offeredCapability(deps.registry, name) !== undefined;
  const registered = [...new Set(v.candidateCapabilities.filter(offered))];
  const dropped = [...new Set(v.candidateCapabilities.filter((n) => !offered(n)))];
  const ambiguities = [...v.ambiguities];
  if (dropped.length > 0) {
    ambiguities.push(`The model named capabilities that are not registered for plans, dropped: ${dropped.map((n) => truncate(n, 80)).join(", ")}.`);
  }
  return {
    goal: v.goal,
    constraints: v.constraints,
    successCriteria: v.successCriteria,
    ambiguities,
    risk: maxRisk(v.risk, candidatesRisk(registered, deps.registry)),
    candidateCapabilities: registered,
    provider: answer.providerId,
    model: answer.model,
  };
}

/**
 * Reads an objective into an {@link Intent}. With a model provider the model's answer is
 * validated (one retry with the problem, then an `internal` error) and its candidate capabilities
 * are filtered to registered names. With the heuristic provider the reading is deterministic:
 * candidates from BM25 ranking, the goal is the objective, and the intent says no model was used.
 */
export async function reason(objective: string, context: string | undefined, deps: ReasonDeps): Promise<Intent> {
  const checked = checkObjective(objective);
  if (context !== undefined && context.length > MAX_CONTEXT_CHARS) {
    throw new ChaosError("invalid_argument", `context is ${context.length} characters; the limit is ${MAX_CONTEXT_CHARS}`);
  }
  return withSpan("chaoscore.cognition.reason", { "chaoscore.provider": deps.provider.id }, () =>
    usesModel(deps.provider) ? modelIntent(checked, context, deps) : heuristicIntent(checked, deps),
  );
}
