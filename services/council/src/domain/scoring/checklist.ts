import { type AuthorityViolation } from "../authority.js";
import { type Contradiction } from "../contradictions.js";
import { type Phase } from "../phases.js";
import { type Depth, type Ruleset } from "../ruleset.js";
import { type Segment } from "../text.js";
import { type PhaseOutput } from "../validation.js";

/** One scoring dimension: its score, the checks behind it and how to raise it. */
export interface DimensionResult {
  score: number;
  weight: number;
  passed: string[];
  failed: string[];
  improve: string[];
  details?: Record<string, unknown>;
}

/** Everything a dimension may look at when scoring one phase output. */
export interface PhaseContext {
  phase: Phase;
  output: PhaseOutput;
  depth: Depth;
  segments: readonly Segment[];
  contradictions: readonly Contradiction[];
  violations: readonly AuthorityViolation[];
}

/** One yes/no check: what it verifies and what to do when it fails. */
export interface Check {
  ok: boolean;
  label: string;
  fix: string;
}

/** Scores a list of equally weighted checks as the share that passed. */
export function fromChecks(checks: readonly Check[], weight: number, details?: Record<string, unknown>): DimensionResult {
  const passed = checks.filter((c) => c.ok);
  const failed = checks.filter((c) => !c.ok);
  return {
    score: checks.length === 0 ? 100 : Math.round((100 * passed.length) / checks.length),
    weight,
    passed: passed.map((c) => c.label),
    failed: failed.map((c) => c.label),
    improve: failed.map((c) => c.fix),
    ...(details ? { details } : {}),
  };
}

/** Every string list of an output, by field name, for checks that look at all of them. */
export function stringLists(output: PhaseOutput): Array<[string, string[]]> {
  const lists: Array<[string, string[]]> = [];
  for (const [key, value] of Object.entries(output)) {
    if (Array.isArray(value) && value.every((v) => typeof v === "string")) lists.push([key, value as string[]]);
  }
  if (output.knowledgeBoundary) {
    for (const [key, value] of Object.entries(output.knowledgeBoundary)) lists.push([`knowledgeBoundary.${key}`, value]);
  }
  return lists;
}

/** The weight of a dimension as a share of all weights, so a modified ruleset need not sum to 1. */
export function share(r: Ruleset, key: keyof Ruleset["weights"]): number {
  const total = Object.values(r.weights).reduce((a, b) => a + b, 0);
  return total > 0 ? r.weights[key] / total : 0;
}
