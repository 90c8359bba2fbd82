import { ChaosError } from "@chaos-core/kit";
import { findAuthorityViolations } from "./authority.js";
import { detectContradictions } from "./contradictions.js";
import { iso } from "./input-checks.js";
import { personaName } from "./personas.js";
import { isPhase, type Phase } from "./phases.js";
import type { Ruleset } from "./ruleset.js";
import { scorePhase } from "./scoring/phase-score.js";
import { scoreWholeSession } from "./scoring/session-score.js";
import {
  type AttemptEntry,
  type CouncilSession,
  nextPhase,
  type PhaseRecord,
  previousPhase,
  records,
  sessionSegments,
} from "./session.js";
import { briefFor, handoff, phasePlan } from "./session-views.js";
import { segmentsOf } from "./text.js";
import { validateOutput, verifyDecision } from "./validation.js";

function orderError(session: CouncilSession, phase: Phase, r: Ruleset): ChaosError | undefined {
  const active = session.currentPhase;
  const order = session.pipeline.join(" → ");
  if (session.status === "complete" || active === null) {
    return new ChaosError(
      "failed_precondition",
      `session ${session.id} is complete (verify decided: ${session.outcome}); nothing more can be saved — start a new session to work on it again`,
    );
  }
  const activeDesc = `the active phase is ${active} (${personaName(active)})`;
  if (!session.pipeline.includes(phase)) {
    return new ChaosError(
      "failed_precondition",
      `cannot save ${phase}: it is not part of this session's ${session.depth} pipeline (${order}); ${activeDesc}`,
    );
  }
  const rec = session.phases[phase];
  if (rec?.locked) {
    return new ChaosError(
      "failed_precondition",
      `cannot save ${phase}: it was saved with a passing score (${rec.score.finalScore}) and is locked; ${activeDesc}`,
    );
  }
  if (phase !== active) {
    const before = previousPhase(session, phase);
    return new ChaosError(
      "failed_precondition",
      `cannot save ${phase}: ${activeDesc}. Phases run in order (${order}) and cannot be skipped; ${phase} unlocks only after ${before ?? "the previous phase"} is saved with a score of at least ${r.thresholds.pass}`,
    );
  }
  if (rec && rec.attempts >= r.limits.maxAttemptsPerPhase) {
    return new ChaosError(
      "failed_precondition",
      `cannot save ${phase}: it was already saved ${rec.attempts} times in this round (at most ${r.limits.maxAttemptsPerPhase}); start a new session`,
    );
  }
  return undefined;
}

/**
 * Validates, scores and records one phase output under a given ruleset (`saveOutput` in engine.ts
 * uses the current one); returns a new session (the input is not changed).
 */
export function saveOutputWith(
  session: CouncilSession,
  input: { phase: string; output: unknown; now: Date },
  r: Ruleset,
): { session: CouncilSession; result: Record<string, unknown> } {
  if (!isPhase(input.phase)) {
    throw new ChaosError("invalid_argument", `phase: must be one of ${session.pipeline.join(", ")} (got ${JSON.stringify(input.phase)})`);
  }
  const phase = input.phase;
  const refused = orderError(session, phase, r);
  if (refused) throw refused;
  const output = validateOutput(phase, input.output, r);
  const at = iso(input.now);

  const earlier = sessionSegments(session, records(session).filter((x) => x.locked && x.phase !== phase));
  const added = segmentsOf(phase, output);
  const contradictions = detectContradictions(earlier, added, r);
  const violations = findAuthorityViolations(phase, added, r);
  const score = scorePhase({ phase, output, depth: session.depth, segments: added, contradictions, violations }, r);
  const attempts = (session.phases[phase]?.attempts ?? 0) + 1;
  const record: PhaseRecord = {
    phase,
    loop: session.loops,
    attempts,
    output,
    score,
    locked: score.passing,
    savedAt: at,
    contradictions,
    authorityViolations: violations,
  };
  const entry: AttemptEntry = {
    phase,
    loop: session.loops,
    attempt: attempts,
    score: score.finalScore,
    verdict: score.verdict,
    locked: score.passing,
    contradictions: contradictions.length,
    authorityViolations: violations.length,
    savedAt: at,
  };
  let next: CouncilSession = {
    ...session,
    updatedAt: at,
    phases: { ...session.phases, [phase]: record },
    history: [...session.history, entry],
  };

  const scoring = {
    finalScore: score.finalScore,
    verdict: score.verdict,
    passThreshold: r.thresholds.pass,
    dimensions: score.dimensions,
    suggestions: score.suggestions,
  };
  const base = {
    type: "council_save",
    sessionId: session.id,
    phase,
    persona: personaName(phase),
    attempt: attempts,
    scoring,
    contradictions,
    authorityWarnings: violations,
    ruleset: { version: r.version },
  };

  if (!score.passing) {
    const band =
      score.verdict === "insufficient"
        ? `insufficient (below ${r.thresholds.needsImprovement}): the output misses essentials`
        : `needs improvement (${r.thresholds.needsImprovement}–${r.thresholds.pass - 1}): close, but below the ${r.thresholds.pass} needed to proceed`;
    return {
      session: next,
      result: {
        ...base,
        status: "needs_revision",
        canProceed: false,
        nextPhase: phase,
        message: `${phase} scored ${score.finalScore}, ${band}. Improve it using the suggestions and save ${phase} again; ${nextPhase(session, phase) ?? "completion"} stays locked until then.`,
        phasePlan: phasePlan(next),
        sessionComplete: false,
      },
    };
  }

  const following = nextPhase(session, phase);
  if (following) {
    next = { ...next, currentPhase: following };
    return {
      session: next,
      result: {
        ...base,
        status: "saved",
        canProceed: true,
        nextPhase: following,
        handoff: handoff(next, record, following, r),
        instructions: briefFor(next, following, r).instructions,
        phasePlan: phasePlan(next),
        sessionComplete: false,
      },
    };
  }

  // Verify passed: its decision ends the session, or sends a full-depth session back.
  const decision = verifyDecision(output);
  const rejected = decision === "reject";
  if (rejected && session.depth === "full" && session.loops < r.loop.maxLoops) {
    const target = r.loop.loopBackTo;
    const from = session.pipeline.indexOf(target);
    const reopened = session.pipeline.slice(from);
    const archived = reopened.map((p) => next.phases[p]).filter((x): x is PhaseRecord => x !== undefined);
    const kept = Object.fromEntries(session.pipeline.slice(0, from).map((p) => [p, next.phases[p]]).filter(([, v]) => v !== undefined));
    next = {
      ...next,
      currentPhase: target,
      loops: session.loops + 1,
      phases: kept,
      archived: [...next.archived, ...archived],
    };
    const note = `Quality Assurance rejected the plan (loop ${next.loops} of ${r.loop.maxLoops}): the Solution Architect revises the design with the failed checks and recommendations; ${reopened.join(" → ")} are redone.`;
    return {
      session: next,
      result: {
        ...base,
        status: "loop_back",
        canProceed: true,
        decision: "reject",
        nextPhase: target,
        loop: { count: next.loops, max: r.loop.maxLoops, reopened },
        handoff: handoff(next, record, target, r, note),
        instructions: briefFor(next, target, r).instructions,
        phasePlan: phasePlan(next),
        sessionComplete: false,
      },
    };
  }
  next = { ...next, status: "complete", currentPhase: null, outcome: rejected ? "rejected" : "approved" };
  const final = scoreWholeSession(next, r);
  const why = rejected
    ? session.depth === "full"
      ? `Quality Assurance rejected the plan and the ${r.loop.maxLoops} loop-back(s) allowed are used up.`
      : `Quality Assurance rejected the plan; a ${session.depth} pipeline has no loop-back — start a new session with the recommendations.`
    : "Quality Assurance approved the plan.";
  return {
    session: next,
    result: {
      ...base,
      status: "complete",
      canProceed: false,
      decision,
      nextPhase: null,
      outcome: next.outcome,
      message: `${why} Session complete: ${final.finalScore} (${final.verdict}).`,
      finalScore: final,
      phasePlan: phasePlan(next),
      sessionComplete: true,
    },
  };
}
