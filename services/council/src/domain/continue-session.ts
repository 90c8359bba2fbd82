import type { Ruleset } from "./ruleset.js";
import { scoreWholeSession } from "./scoring/session-score.js";
import { type CouncilSession, previousPhase } from "./session.js";
import { briefFor, handoff, memorySlots, phasePlan, transparencyLog, warnings } from "./session-views.js";

/**
 * Where the session stands and what the active persona must produce next, under a given ruleset
 * (`continueSession` in engine.ts uses the current one).
 */
export function continueSessionWith(session: CouncilSession, r: Ruleset): Record<string, unknown> {
  const base = { type: "council_continue", sessionId: session.id, title: session.title, task: session.task, ruleset: { version: r.version } };
  const active = session.currentPhase;
  if (session.status === "complete" || active === null) {
    const final = scoreWholeSession(session, r);
    return {
      ...base,
      status: "complete",
      outcome: session.outcome,
      currentPhase: null,
      finalVerdict: final.verdict,
      score: final,
      phasePlan: phasePlan(session),
      message: `The session is complete: Quality Assurance ${session.outcome === "approved" ? "approved" : "rejected"} the plan; the session scored ${final.finalScore} (${final.verdict}). Nothing more can be saved.`,
    };
  }
  const brief = briefFor(session, active, r);
  const last = session.phases[active];
  const prev = previousPhase(session, active);
  const prevRecord = prev ? session.phases[prev] : undefined;
  // After a loop-back the handoff comes from the rejecting verify, kept in the archive.
  const rejecting = session.loops > 0 && active === r.loop.loopBackTo ? [...session.archived].reverse().find((x) => x.phase === "verify") : undefined;
  const from = rejecting ?? prevRecord;
  const minimums = Object.fromEntries(
    r.fields[active].required
      .map((f) => [f, r.completeness.minItems[session.depth][`${active}.${f}`]] as const)
      .filter(([, n]) => n !== undefined),
  );
  return {
    ...base,
    status: "active",
    outcome: session.outcome,
    currentPhase: { name: active, persona: brief.name, status: last ? "retry" : "active" },
    personas: { current: brief },
    handoff: from ? handoff(session, from, active, r) : null,
    needed: {
      phase: active,
      requiredFields: r.fields[active].required,
      optionalFields: r.fields[active].optional,
      minimumItems: minimums,
      passThreshold: r.thresholds.pass,
      lastAttempt: last
        ? {
            attempt: last.attempts,
            score: last.score.finalScore,
            verdict: last.score.verdict,
            failedChecks: Object.values(last.score.dimensions).flatMap((d) => d.failed),
            suggestions: last.score.suggestions,
          }
        : null,
    },
    loops: { count: session.loops, max: session.depth === "full" ? r.loop.maxLoops : 0 },
    phasePlan: phasePlan(session),
    instructions: brief.instructions,
    memorySlots: memorySlots(session),
    warnings: warnings(session),
    transparencyLog: transparencyLog(session),
  };
}
