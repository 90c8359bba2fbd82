import { ChaosError, describeZodIssues, withIssueNote } from "@chaos-core/kit";
import { z } from "zod";
import { type Phase } from "./phases.js";
import { type Ruleset } from "./ruleset.js";

/** How sure a claim is, from verified to a working hypothesis. */
export const CERTAINTIES = ["confirmed", "likely", "uncertain", "unknown", "assumption"] as const;
export type Certainty = (typeof CERTAINTIES)[number];

/** Severity of a vulnerability and risk level of a critique, lowest first. */
export const SEVERITIES = ["low", "medium", "high", "critical"] as const;
export type Severity = (typeof SEVERITIES)[number];

/** A statement with how sure its author is and where it comes from. */
export interface Claim {
  text: string;
  certainty: Certainty;
  source?: string | undefined;
}

/** What the author knows, assumes, does not know and wants verified (the seed's four names). */
export interface KnowledgeBoundary {
  whatIKnow: string[];
  whatIAssume: string[];
  whatIDontKnow: string[];
  whatNeedsVerification: string[];
}

/**
 * The name this service once gave `whatNeedsVerification`. Sessions stored under it and models
 * that learnt it still send it; it is read as the seed's name and never written.
 */
export const OLD_NEEDS_VERIFICATION = "needsVerification";

/**
 * A knowledge boundary with the old `needsVerification` renamed to `whatNeedsVerification`; any
 * other value is returned as it is. Both names at once are left for the schema to refuse.
 */
export function renameOldBoundaryField(kb: unknown): unknown {
  if (typeof kb !== "object" || kb === null || Array.isArray(kb)) return kb;
  if (!Object.hasOwn(kb, OLD_NEEDS_VERIFICATION) || Object.hasOwn(kb, "whatNeedsVerification")) return kb;
  const { [OLD_NEEDS_VERIFICATION]: list, ...rest } = kb as Record<string, unknown>;
  return { ...rest, whatNeedsVerification: list };
}

/** A decision; a plain string in the input becomes `{text}`. */
export interface DecisionItem {
  text: string;
  rationale?: string | undefined;
  alternatives?: string[] | undefined;
}

/** One candidate approach of a design. */
export interface Approach {
  name: string;
  description: string;
  pros: string[];
  cons: string[];
}

/** One finding of a critique. */
export interface Vulnerability {
  description: string;
  severity: Severity;
  area?: string | undefined;
  mitigation?: string | undefined;
}

/** One check a verify ran. */
export interface Check {
  name: string;
  passed: boolean;
  details?: string | undefined;
}

/**
 * A validated phase output. Every field of every phase is listed; which are required for a
 * given phase is data (`ruleset.fields`), so the type leaves them optional.
 */
export interface PhaseOutput {
  summary: string;
  decisions?: DecisionItem[];
  constraints?: string[];
  confidence?: number;
  criticalQuestions?: string[];
  claims?: Claim[];
  knowledgeBoundary?: KnowledgeBoundary;
  components?: string[];
  approaches?: Approach[];
  justification?: string;
  tradeoffs?: string[];
  recommended?: string;
  vulnerabilities?: Vulnerability[];
  riskLevel?: Severity;
  mitigation?: string[];
  implementation?: string[];
  testing?: string[];
  warnings?: string[];
  checks?: Check[];
  passedCount?: number;
  failedCount?: number;
  finalConfidence?: number;
  decision?: "approve" | "reject";
  recommendations?: string[];
}

/**
 * How many checks a verify output failed: its `failedCount`, or more when its checks list more
 * failures, so counts that hide a failed check do not make it pass.
 */
export function failedCheckCount(output: PhaseOutput): number {
  return Math.max(output.failedCount ?? 0, (output.checks ?? []).filter((c) => !c.passed).length);
}

/**
 * What a verify output decided: its `decision`, which the seed makes optional, or else what its
 * checks say (reject when one failed, approve when none did).
 */
export function verifyDecision(output: PhaseOutput): "approve" | "reject" {
  return output.decision ?? (failedCheckCount(output) > 0 ? "reject" : "approve");
}

/**
 * How a plain string in a list of objects becomes that object: the seed lets a model write
 * "pgloader dump and restore" where an approach goes, and a list of strings is scored, not
 * refused. What a string cannot say comes from what the output says once for all its items, or
 * from the item's defaults:
 * - a decision's text, a check's or an approach's name, a vulnerability's description is the string;
 * - an approach's description is its name too (pros and cons default to none);
 * - a claim's certainty is "unknown": its author did not state one;
 * - a vulnerability's severity is the output's riskLevel;
 * - a check passed when the output reports no failed check (`failedCount` 0); otherwise it counts
 *   as failed, since the string cannot say which one passed.
 */
const PLAIN_ITEMS: Readonly<Record<string, (text: string, output: Readonly<Record<string, unknown>>) => Record<string, unknown>>> = {
  decisions: (text) => ({ text }),
  claims: (text) => ({ text, certainty: "unknown" }),
  approaches: (name) => ({ name, description: name }),
  vulnerabilities: (description, o) => (o.riskLevel === undefined ? { description } : { description, severity: o.riskLevel }),
  checks: (name, o) => ({ name, passed: o.failedCount === 0 }),
};

/** The output with every plain string in a list of objects expanded as {@link PLAIN_ITEMS} says. */
function expandPlainItems(output: unknown): unknown {
  if (typeof output !== "object" || output === null || Array.isArray(output)) return output;
  const o = output as Record<string, unknown>;
  let expanded: Record<string, unknown> | undefined;
  for (const [field, expand] of Object.entries(PLAIN_ITEMS)) {
    const list = o[field];
    if (!Array.isArray(list) || !list.some((x) => typeof x === "string")) continue;
    expanded ??= { ...o };
    expanded[field] = list.map((x: unknown) => (typeof x === "string" ? expand(x, o) : x));
  }
  return expanded ?? output;
}

/** An enumeration whose words are taken in any case ("HIGH", "High", "high"), as the seed capitalises them. */
function anyCase<const T extends readonly [string, ...string[]]>(words: T) {
  return withIssueNote(z.preprocess((v) => (typeof v === "string" ? v.trim().toLowerCase() : v), z.enum(words)), "(any case)");
}

/** The verify decision's words, the council's and the seed's (APPROVED, REJECTED), and the one each is stored as. */
const DECISION_WORDS = { approve: "approve", approved: "approve", reject: "reject", rejected: "reject" } as const;

/** Every output field's schema. */
function outputSchemas(r: Ruleset): Record<string, z.ZodType> {
  const str = z.string().trim().min(1).max(r.limits.maxStringChars);
  const list = <T extends z.ZodType>(item: T) => z.array(item).max(r.limits.maxListItems);
  const strings = list(str);
  const unit = z.number().min(0).max(1);
  const objects = {
    decisions: z.strictObject({ text: str, rationale: str.optional(), alternatives: strings.optional() }),
    claims: z.strictObject({ text: str, certainty: anyCase(CERTAINTIES), source: str.optional() }),
    knowledgeBoundary: z.strictObject({
      whatIKnow: strings.default([]),
      whatIAssume: strings.default([]),
      whatIDontKnow: strings.default([]),
      whatNeedsVerification: strings.default([]),
    }),
    approaches: z.strictObject({ name: str, description: str, pros: strings.default([]), cons: strings.default([]) }),
    vulnerabilities: z.strictObject({
      description: str,
      severity: anyCase(SEVERITIES),
      area: str.optional(),
      mitigation: str.optional(),
    }),
    checks: z.strictObject({ name: str, passed: z.boolean(), details: str.optional() }),
  };
  // What an error says such an item accepts.
  for (const [field, item] of Object.entries(objects)) if (Object.hasOwn(PLAIN_ITEMS, field)) withIssueNote(item, "(or a plain string)");
  return {
    summary: str,
    decisions: list(objects.decisions),
    constraints: strings,
    confidence: unit,
    criticalQuestions: strings,
    claims: list(objects.claims),
    knowledgeBoundary: z.preprocess(renameOldBoundaryField, objects.knowledgeBoundary),
    components: strings,
    approaches: list(objects.approaches),
    justification: str,
    tradeoffs: strings,
    recommended: str,
    vulnerabilities: list(objects.vulnerabilities),
    riskLevel: anyCase(SEVERITIES),
    mitigation: strings,
    implementation: strings,
    testing: strings,
    warnings: strings,
    checks: list(objects.checks),
    passedCount: z.number().int().min(0),
    failedCount: z.number().int().min(0),
    finalConfidence: unit,
    decision: anyCase(["approve", "approved", "reject", "rejected"]).transform((word) => DECISION_WORDS[word]),
    recommendations: strings,
  };
}

const schemaCache = new WeakMap<Ruleset, { all: Record<string, z.ZodType>; byPhase: Map<Phase, z.ZodType> }>();

/** The zod schema of one phase's output, built from the ruleset's field lists (once per ruleset). */
export function phaseSchema(phase: Phase, r: Ruleset): z.ZodType {
  let cached = schemaCache.get(r);
  if (!cached) schemaCache.set(r, (cached = { all: outputSchemas(r), byPhase: new Map() }));
  let schema = cached.byPhase.get(phase);
  if (!schema) cached.byPhase.set(phase, (schema = buildSchema(phase, cached.all, r)));
  return schema;
}

function buildSchema(phase: Phase, all: Record<string, z.ZodType>, r: Ruleset): z.ZodType {
  const shape: Record<string, z.ZodType> = {};
  const { required, optional } = r.fields[phase];
  for (const name of required) shape[name] = pick(all, name);
  for (const name of optional) shape[name] = pick(all, name).optional();
  return z.preprocess(expandPlainItems, z.strictObject(shape));
}

function pick(all: Record<string, z.ZodType>, name: string): z.ZodType {
  const schema = all[name];
  // A ruleset naming a field no schema knows is a programming error, not a caller's.
  if (!schema) throw new ChaosError("internal", `ruleset names unknown output field "${name}"`);
  return schema;
}

/**
 * Validates a phase output against the phase's fields and the ruleset's limits. Returns the
 * normalised output (trimmed strings, plain-string list items as objects, boundary lists
 * defaulted) or throws `invalid_argument` naming every offending field path.
 */
export function validateOutput(phase: Phase, output: unknown, r: Ruleset): PhaseOutput {
  if (typeof output !== "object" || output === null || Array.isArray(output)) {
    throw new ChaosError(
      "invalid_argument",
      `output: must be an object with the ${phase} fields (${r.fields[phase].required.join(", ")})`,
    );
  }
  // Measured before parsing so an oversized payload is refused before any work on it.
  const size = JSON.stringify(output).length;
  if (size > r.limits.maxOutputChars) {
    throw new ChaosError(
      "invalid_argument",
      `output: too large (${size} characters as JSON, at most ${r.limits.maxOutputChars})`,
    );
  }
  const schema = phaseSchema(phase, r);
  const parsed = schema.safeParse(output, { reportInput: true });
  if (parsed.success) return parsed.data as PhaseOutput;
  const problems = describeZodIssues(parsed.error, schema, "output", { underRoot: true });
  throw new ChaosError("invalid_argument", `invalid ${phase} output: ${problems.join("; ")}`);
}
