import type { Ruleset } from "./ruleset.js";
import { scoreWholeSession } from "./scoring/session-score.js";
import { type CouncilSession, records } from "./session.js";
import { allContradictions } from "./session-views.js";

/**
 * The session's multi-dimensional score under a given ruleset (`scoreSession` in engine.ts uses the
 * current one).
 */
export function scoreSessionWith(session: CouncilSession, r: Ruleset): Record<string, unknown> {
  const overall = scoreWholeSession(session, r);
  const phaseScores = Object.fromEntries(
    records(session).map((x) => [x.phase, { score: x.score.finalScore, verdict: x.score.verdict, attempts: x.attempts, locked: x.locked }]),
  );
  return {
    type: "council_score",
    sessionId: session.id,
    status: session.status,
    outcome: session.outcome,
    complete: session.status === "complete",
    progress: `${records(session).filter((x) => x.locked).length}/${session.pipeline.length}`,
    overall,
    phaseScores,
    loops: session.loops,
    contradictions: allContradictions(session).length,
    authorityViolations: records(session).reduce((n, x) => n + x.authorityViolations.length, 0),
    ruleset: { version: r.version },
  };
}
