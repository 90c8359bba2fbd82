import { type Ruleset } from "../ruleset.js";
import { type CouncilSession, records } from "../session.js";
import { type Verdict, verdictOf } from "./phase-score.js";

/** The multi-dimensional score of a whole session. */
export interface SessionScore {
  finalScore: number;
  verdict: Verdict;
  qualityScore: number;
  adaptabilityScore: number;
  transparencyScore: number;
  agenticScore: number;
  reasons: string[];
}

const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

/**
 * Scores a session across its phases: quality (mean phase score), adaptability (how well the
 * outputs met the depth the task called for, less retries and loop-backs), transparency and
 * agentic (means of those dimensions), weighted by the ruleset into one final score.
 */
export function scoreWholeSession(session: CouncilSession, r: Ruleset): SessionScore {
  const recs = records(session);
  if (recs.length === 0) {
    return {
      finalScore: 0,
      verdict: verdictOf(0, r),
      qualityScore: 0,
      adaptabilityScore: 0,
      transparencyScore: 0,
      agenticScore: 0,
      reasons: ["no phase has been saved yet"],
    };
  }
  const quality = mean(recs.map((x) => x.score.finalScore));
  const transparency = mean(recs.map((x) => x.score.dimensions.transparency.score));
  const agentic = mean(recs.map((x) => x.score.dimensions.agentic.score));
  // Depth fit: the share of the depth's "at least N items" checks the outputs met.
  let met = 0;
  let total = 0;
  for (const x of recs) {
    const m = x.score.dimensions.completeness.details?.["itemMinimums"] as { met: number; total: number } | undefined;
    met += m?.met ?? 0;
    total += m?.total ?? 0;
  }
  const depthFit = total === 0 ? 1 : met / total;
  const retries = session.history.filter((h) => h.attempt > 1).length;
  const adaptability = Math.max(0, Math.min(100, 100 * depthFit - retries * r.session.retryPenalty - session.loops * r.session.loopPenalty));
  const w = r.session.weights;
  const weightSum = w.quality + w.adaptability + w.transparency + w.agentic;
  const final =
    weightSum > 0 ? (w.quality * quality + w.adaptability * adaptability + w.transparency * transparency + w.agentic * agentic) / weightSum : 0;
  const finalScore = Math.round(final);
  const reasons = [
    `quality ${Math.round(quality)}: mean score of ${recs.length} saved phase(s)`,
    `adaptability ${Math.round(adaptability)}: ${Math.round(depthFit * 100)}% of the ${session.depth}-depth item minimums met, ${retries} retr${retries === 1 ? "y" : "ies"} (−${r.session.retryPenalty} each), ${session.loops} loop-back(s) (−${r.session.loopPenalty} each)`,
    `transparency ${Math.round(transparency)}: mean transparency dimension`,
    `agentic ${Math.round(agentic)}: mean agentic dimension (persona identity and authority)`,
  ];
  return {
    finalScore,
    verdict: verdictOf(finalScore, r),
    qualityScore: Math.round(quality),
    adaptabilityScore: Math.round(adaptability),
    transparencyScore: Math.round(transparency),
    agenticScore: Math.round(agentic),
    reasons,
  };
}
