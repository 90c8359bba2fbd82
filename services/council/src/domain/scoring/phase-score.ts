import { type Ruleset } from "../ruleset.js";
import { scoreAgentic } from "./agentic.js";
import { type DimensionResult, type PhaseContext } from "./checklist.js";
import { scoreCompleteness } from "./completeness.js";
import { scoreConsistency } from "./consistency.js";
import { scoreDecisionQuality } from "./decision-quality.js";
import { scoreStructure } from "./structure.js";
import { scoreTransparency } from "./transparency.js";

/** A score's verdict band. */
export type Verdict = "excellent" | "good" | "needs_improvement" | "insufficient";

/** The six dimensions by name. */
export interface PhaseDimensions {
  completeness: DimensionResult;
  consistency: DimensionResult;
  decisionQuality: DimensionResult;
  structure: DimensionResult;
  transparency: DimensionResult;
  agentic: DimensionResult;
}

/** The score of one phase output. */
export interface PhaseScore {
  finalScore: number;
  verdict: Verdict;
  /** At least the pass threshold: the phase locks and the next one unlocks. */
  passing: boolean;
  dimensions: PhaseDimensions;
  /** The fixes that would add the most points, best first. */
  suggestions: string[];
  ruleset: { version: string };
}

/** The verdict band of a score. */
export function verdictOf(score: number, r: Ruleset): Verdict {
  const t = r.thresholds;
  if (score >= t.excellent) return "excellent";
  if (score >= t.good) return "good";
  if (score >= t.needsImprovement) return "needs_improvement";
  return "insufficient";
}

/** How many suggestions a score lists. */
const SUGGESTIONS = 6;

/**
 * Scores one phase output in six weighted dimensions. Pure: the same context and ruleset
 * always give the same score.
 */
export function scorePhase(ctx: PhaseContext, r: Ruleset): PhaseScore {
  const dimensions: PhaseDimensions = {
    completeness: scoreCompleteness(ctx, r),
    consistency: scoreConsistency(ctx, r),
    decisionQuality: scoreDecisionQuality(ctx, r),
    structure: scoreStructure(ctx, r),
    transparency: scoreTransparency(ctx, r),
    agentic: scoreAgentic(ctx, r),
  };
  const all = Object.values(dimensions);
  const finalScore = Math.round(all.reduce((sum, d) => sum + d.weight * d.score, 0));
  // Fixes of the dimensions that lose the most weighted points come first.
  const suggestions = Object.values(dimensions)
    .map((d) => ({ loss: d.weight * (100 - d.score), improve: d.improve }))
    .filter((d) => d.improve.length > 0)
    .sort((a, b) => b.loss - a.loss)
    .flatMap((d) => d.improve)
    .slice(0, SUGGESTIONS);
  return {
    finalScore,
    verdict: verdictOf(finalScore, r),
    passing: finalScore >= r.thresholds.pass,
    dimensions,
    suggestions,
    ruleset: { version: r.version },
  };
}
