import { ChaosError } from "@chaos-core/kit";
import { personaName } from "./personas.js";
import type { Phase } from "./phases.js";
import type { Ruleset } from "./ruleset.js";
import { type CouncilSession, records } from "./session.js";
import { allContradictions, memorySlots, phasePlan, transparencyLog, warnings } from "./session-views.js";
import { verifyDecision } from "./validation.js";

/**
 * The session's state for the calling model under a given ruleset (`recallSession` in engine.ts
 * uses the current one): full, summary or decisions only.
 */
export function recallSessionWith(session: CouncilSession, format: "full" | "summary" | "decisions", r: Ruleset): Record<string, unknown> {
  if (format !== "full" && format !== "summary" && format !== "decisions") {
    throw new ChaosError("invalid_argument", `format: must be one of full, summary, decisions (got ${JSON.stringify(format)})`);
  }
  const recs = records(session);
  const done = recs.filter((x) => x.locked).length;
  const base = {
    type: "council_recall",
    format,
    sessionId: session.id,
    title: session.title,
    task: session.task,
    status: session.status,
    outcome: session.outcome,
    progress: `${done}/${session.pipeline.length}`,
    currentPhase: session.currentPhase
      ? { name: session.currentPhase, persona: personaName(session.currentPhase), status: session.phases[session.currentPhase] ? "retry" : "active" }
      : null,
    complexity: { score: session.complexity.score, level: session.complexity.level, depth: session.depth },
    pipeline: session.pipeline,
    loops: session.loops,
    createdAt: session.createdAt,
    updatedAt: session.updatedAt,
    ruleset: { version: r.version, sessionCreatedUnder: session.rulesetVersion },
  };
  const decisions = {
    decisions: recs.flatMap((x) => (x.output.decisions ?? []).map((d) => ({ phase: x.phase, ...d }))),
    constraints: recs.flatMap((x) => (x.output.constraints ?? []).map((c) => ({ phase: x.phase, text: c }))),
    recommended: session.phases.design?.output.recommended ?? null,
    riskLevel: session.phases.critique?.output.riskLevel ?? null,
    verifyDecision: session.phases.verify ? verifyDecision(session.phases.verify.output) : null,
  };
  if (format === "decisions") return { ...base, ...decisions };
  const phaseSummaries = phasePlan(session).map((p) => ({
    ...p,
    summary: session.phases[p.name as Phase]?.output.summary ?? null,
  }));
  if (format === "summary") {
    return {
      ...base,
      phases: phaseSummaries,
      summary: recs.map((x) => `${x.phase} (${x.score.finalScore}, ${x.score.verdict}): ${x.output.summary}`).join("\n"),
      decisions: decisions.decisions.map((d) => `${d.phase}: ${d.text}`),
      warnings: warnings(session),
      transparencyLog: { count: recs.length },
    };
  }
  return {
    ...base,
    ...(session.context ? { context: session.context } : {}),
    adaptation: session.complexity,
    phases: recs.map((x) => ({
      name: x.phase,
      persona: personaName(x.phase),
      status: x.locked ? "done" : "needs_revision",
      loop: x.loop,
      attempts: x.attempts,
      savedAt: x.savedAt,
      score: x.score.finalScore,
      verdict: x.score.verdict,
      dimensions: Object.fromEntries(Object.entries(x.score.dimensions).map(([k, d]) => [k, { score: d.score, failed: d.failed }])),
      output: x.output,
    })),
    phasePlan: phasePlan(session),
    ...decisions,
    contradictions: allContradictions(session),
    authorityViolations: recs.flatMap((x) => x.authorityViolations),
    warnings: warnings(session),
    memorySlots: memorySlots(session),
    transparencyLog: transparencyLog(session),
    history: session.history,
    archived: session.archived.map((x) => ({
      name: x.phase,
      loop: x.loop,
      score: x.score.finalScore,
      verdict: x.score.verdict,
      summary: x.output.summary,
      ...(x.phase === "verify" ? { decision: verifyDecision(x.output) } : {}),
    })),
  };
}
