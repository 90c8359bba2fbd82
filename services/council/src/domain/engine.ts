import { ChaosError } from "@chaos-core/kit";
import { findAuthorityViolations } from "./authority.js";
import { assessComplexity } from "./complexity.js";
import { type Contradiction, detectContradictions } from "./contradictions.js";
import { checkClaims, type ClaimInput, type VerifyMode } from "./grounding.js";
import { buildPersonaBrief, personaName, type PersonaBrief } from "./personas.js";
import { isPhase, type Phase } from "./phases.js";
import { RULESET, type Ruleset } from "./ruleset.js";
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
import { segmentsOf } from "./text.js";
import { validateOutput, verifyDecision } from "./validation.js";

export { PHASES, type Phase } from "./phases.js";
export { RULESET, type Ruleset } from "./ruleset.js";
export type { PersonaBrief } from "./personas.js";
export type { AttemptEntry, CouncilSession, PhaseRecord } from "./session.js";
export { restoreSession } from "./session.js";

function requireText(field: string, value: unknown, max: number, optional = false): string | undefined {
  if (value === undefined && optional) return undefined;
  if (typeof value !== "string") throw new ChaosError("invalid_argument", `${field}: must be a string`);
  const text = value.trim();
  if (text.length === 0) {
    if (optional) return undefined;
    throw new ChaosError("invalid_argument", `${field}: must not be empty`);
  }
  if (text.length > max) throw new ChaosError("invalid_argument", `${field}: too long (at most ${max} characters)`);
  return text;
}

function iso(now: Date): string {
  if (!(now instanceof Date) || Number.isNaN(now.getTime())) throw new ChaosError("invalid_argument", "now: must be a valid date");
  return now.toISOString();
}

/** Status of a phase in the plan: done (saved, passing, locked), active (to save now), pending. */
function phasePlan(session: CouncilSession): Array<Record<string, unknown>> {
  return session.pipeline.map((phase, i) => {
    const rec = session.phases[phase];
    const status = rec?.locked ? "done" : phase === session.currentPhase ? "active" : "pending";
    return {
      name: phase,
      persona: personaName(phase),
      order: i + 1,
      status,
      locked: rec?.locked ?? false,
      score: rec ? rec.score.finalScore : null,
      verdict: rec ? rec.score.verdict : null,
      attempts: rec?.attempts ?? 0,
    };
  });
}

function briefFor(session: CouncilSession, phase: Phase, r: Ruleset): PersonaBrief {
  return buildPersonaBrief(phase, r, session.depth);
}

/** What the council remembers for the model, gathered from the current loop's records. */
function memorySlots(session: CouncilSession): Record<string, unknown> {
  const recs = records(session);
  const o = (p: Phase) => session.phases[p]?.output;
  return {
    originalTask: session.task,
    ...(session.context ? { context: session.context } : {}),
    decompositions: o("decompile")?.components ?? [],
    decisions: recs.flatMap((x) => (x.output.decisions ?? []).map((d) => ({ phase: x.phase, ...d }))),
    constraints: recs.flatMap((x) => x.output.constraints ?? []),
    criticalQuestions: o("decompile")?.criticalQuestions ?? [],
    recommended: o("design")?.recommended ?? null,
    riskLevel: o("critique")?.riskLevel ?? null,
    warnings: o("synthesis")?.warnings ?? [],
  };
}

function transparencyLog(session: CouncilSession): { entries: Array<Record<string, unknown>>; count: number } {
  const entries = records(session).map((x) => {
    const kb = x.output.knowledgeBoundary;
    return {
      phase: x.phase,
      loop: x.loop,
      claims: (x.output.claims ?? []).map((c) => ({ text: c.text, certainty: c.certainty, source: c.source ?? null })),
      knowledgeBoundary: kb ?? null,
      transparencyScore: x.score.dimensions.transparency.score,
    };
  });
  return { entries, count: entries.length };
}

function allContradictions(session: CouncilSession): Array<Contradiction & { phase: Phase }> {
  return records(session).flatMap((x) => x.contradictions.map((c) => ({ phase: x.phase, ...c })));
}

function warnings(session: CouncilSession): string[] {
  return records(session).flatMap((x) => [
    ...x.contradictions.map((c) => `${x.phase}: ${c.explanation}`),
    ...x.authorityViolations.map((v) => `${x.phase}: authority violation (${v.rule}): "${v.phrase}" at ${v.location}`),
  ]);
}

function handoff(session: CouncilSession, from: PhaseRecord, to: Phase, r: Ruleset, note?: string): Record<string, unknown> {
  const fromBrief = briefFor(session, from.phase, r);
  const toBrief = briefFor(session, to, r);
  const o = from.output;
  const context: string[] = [`${fromBrief.name}: ${o.summary}`];
  if (o.recommended) context.push(`Recommended approach: ${o.recommended}`);
  if (o.riskLevel) context.push(`Risk level: ${o.riskLevel}`);
  for (const c of memorySlots(session).constraints as string[]) context.push(`Constraint: ${c}`);
  for (const d of o.decisions ?? []) context.push(`Decision: ${d.text}`);
  for (const v of (o.vulnerabilities ?? []).filter((x) => x.severity === "high" || x.severity === "critical")) {
    context.push(`Risk (${v.severity}): ${v.description}`);
  }
  for (const m of o.mitigation ?? []) context.push(`Mitigation to build in: ${m}`);
  for (const w of o.warnings ?? []) context.push(`Warning: ${w}`);
  for (const c of (o.checks ?? []).filter((x) => !x.passed)) context.push(`Failed check: ${c.name}${c.details ? ` — ${c.details}` : ""}`);
  for (const rec of o.recommendations ?? []) context.push(`Recommendation: ${rec}`);
  const unresolved = [...(o.criticalQuestions ?? []), ...(o.knowledgeBoundary?.whatNeedsVerification ?? [])];
  return {
    from: from.phase,
    to,
    personaTransition: { fromPersona: fromBrief.name, toPersona: toBrief.name },
    message: note ?? fromBrief.handoff,
    conflicts: from.contradictions.map((c) => c.explanation),
    handshake: { fromAuthority: fromBrief.authority, toAuthority: toBrief.authority, context, unresolved },
  };
}

/** Starts a session: scores the task's complexity, picks the pipeline and briefs the first persona. */
export function createSession(input: { id: string; tenant: string; task: string; title?: string; context?: string; now: Date }): {
  session: CouncilSession;
  result: Record<string, unknown>;
} {
  return createSessionWith(input, RULESET);
}

/** {@link createSession} under a given ruleset. */
export function createSessionWith(
  input: { id: string; tenant: string; task: string; title?: string; context?: string; now: Date },
  r: Ruleset,
): { session: CouncilSession; result: Record<string, unknown> } {
  const id = requireText("id", input.id, r.limits.maxIdChars) as string;
  const tenant = requireText("tenant", input.tenant, r.limits.maxIdChars) as string;
  const task = requireText("task", input.task, r.limits.maxTaskChars) as string;
  const context = requireText("context", input.context, r.limits.maxContextChars, true);
  const title = requireText("title", input.title, r.limits.maxTitleChars, true) ?? defaultTitle(task);
  const at = iso(input.now);
  // The task alone decides the depth, so one task always gets one pipeline whatever context comes with it.
  const complexity = assessComplexity(task, r);
  const first = complexity.pipeline[0] as Phase;
  const session: CouncilSession = {
    id,
    tenant,
    task,
    title,
    ...(context !== undefined ? { context } : {}),
    createdAt: at,
    updatedAt: at,
    rulesetVersion: r.version,
    complexity,
    depth: complexity.depth,
    pipeline: complexity.pipeline,
    status: "active",
    outcome: "in_progress",
    currentPhase: first,
    loops: 0,
    phases: {},
    archived: [],
    history: [],
  };
  const brief = briefFor(session, first, r);
  return {
    session,
    result: {
      type: "council_init",
      sessionId: id,
      title,
      adaptation: {
        complexity: {
          raw: complexity.score,
          normalized: complexity.score,
          level: complexity.level,
          pipelineDepth: complexity.depth,
          reasons: complexity.reasons,
        },
        pipeline: complexity.pipeline.map((name, i) => ({ name, persona: personaName(name), depth: complexity.depth, order: i + 1 })),
        adaptiveReason: complexity.explanation,
        maxLoops: complexity.depth === "full" ? r.loop.maxLoops : 0,
      },
      personas: { current: brief },
      phase: first,
      phasePlan: phasePlan(session),
      instructions: brief.instructions,
      memorySlots: memorySlots(session),
      transparencyLog: transparencyLog(session),
      ruleset: { version: r.version },
    },
  };
}

function defaultTitle(task: string): string {
  const first = task.split(/(?<=[.!?])\s+/)[0] ?? task;
  return first.length <= 80 ? first : `${first.slice(0, 79)}…`;
}

/** Validates, scores and records one phase output; returns a new session (the input is not changed). */
export function saveOutput(session: CouncilSession, input: { phase: string; output: unknown; now: Date }): {
  session: CouncilSession;
  result: Record<string, unknown>;
} {
  return saveOutputWith(session, input, RULESET);
}

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

/** {@link saveOutput} under a given ruleset. */
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

/** The session's state for the calling model: full, summary or decisions only. */
export function recallSession(session: CouncilSession, format: "full" | "summary" | "decisions"): Record<string, unknown> {
  return recallSessionWith(session, format, RULESET);
}

/** {@link recallSession} under a given ruleset. */
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

/** Checks claims against what the session stored. */
export function verifyClaims(
  session: CouncilSession,
  input: { claims: Array<{ text: string; source?: string }>; mode: VerifyMode },
): Record<string, unknown> {
  return verifyClaimsWith(session, input, RULESET);
}

/** {@link verifyClaims} under a given ruleset. */
export function verifyClaimsWith(
  session: CouncilSession,
  input: { claims: Array<{ text: string; source?: string }>; mode: VerifyMode },
  r: Ruleset,
): Record<string, unknown> {
  const mode = input.mode;
  if (mode !== "contradiction" && mode !== "grounding" && mode !== "all") {
    throw new ChaosError("invalid_argument", `mode: must be one of contradiction, grounding, all (got ${JSON.stringify(mode)})`);
  }
  if (!Array.isArray(input.claims) || input.claims.length === 0) throw new ChaosError("invalid_argument", "claims: must be a non-empty list");
  if (input.claims.length > r.limits.maxClaimsToVerify) {
    throw new ChaosError("invalid_argument", `claims: too many items (at most ${r.limits.maxClaimsToVerify})`);
  }
  const claims: ClaimInput[] = input.claims.map((c, i) => {
    if (typeof c !== "object" || c === null) throw new ChaosError("invalid_argument", `claims[${i}]: must be an object {text, source?}`);
    const text = requireText(`claims[${i}].text`, c.text, r.limits.maxStringChars) as string;
    const source = requireText(`claims[${i}].source`, c.source, r.limits.maxStringChars, true);
    return { text, ...(source !== undefined ? { source } : {}) };
  });
  const results = checkClaims(session, claims, mode, r);
  const contradicted = results.filter((x) => x.status === "contradicted").length;
  const verified = results.filter((x) => x.status === "verified").length;
  const grounded = mode === "contradiction" ? undefined : { verified, unverified: results.length - verified };
  const pct = (n: number) => Math.round((100 * n) / results.length);
  const passed = results.filter((x) => (mode === "contradiction" ? x.status === "consistent" : x.status === "verified")).length;
  return {
    type: "council_verify",
    sessionId: session.id,
    mode,
    results: {
      claims: results,
      contradictions: results.flatMap((x) => x.contradictions),
      ...(grounded
        ? { grounding: { ...grounded, verifiedPct: pct(grounded.verified), unverifiedPct: pct(grounded.unverified) } }
        : {}),
    },
    summary: { total: results.length, passed, failed: results.length - passed, contradicted },
    ruleset: { version: r.version },
  };
}

/** Where the session stands and what the active persona must produce next. */
export function continueSession(session: CouncilSession): Record<string, unknown> {
  return continueSessionWith(session, RULESET);
}

/** {@link continueSession} under a given ruleset. */
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

/** The session's multi-dimensional score. */
export function scoreSession(session: CouncilSession): Record<string, unknown> {
  return scoreSessionWith(session, RULESET);
}

/** {@link scoreSession} under a given ruleset. */
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

/** The brief of the persona that owns `phase` (standard depth). */
export function personaBrief(phase: Phase): PersonaBrief {
  if (!isPhase(phase)) throw new ChaosError("invalid_argument", `phase: must be one of decompile, design, critique, synthesis, verify`);
  return buildPersonaBrief(phase, RULESET);
}
