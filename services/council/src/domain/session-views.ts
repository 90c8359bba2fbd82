import type { Contradiction } from "./contradictions.js";
import { buildPersonaBrief, personaName, type PersonaBrief } from "./personas.js";
import type { Phase } from "./phases.js";
import type { Ruleset } from "./ruleset.js";
import { type CouncilSession, type PhaseRecord, records } from "./session.js";

// What the answers of several operations show of a session: the phase plan, the memory slots,
// the transparency log, the warnings, and the handoff from one persona to the next.

/** Status of a phase in the plan: done (saved, passing, locked), active (to save now), pending. */
export function phasePlan(session: CouncilSession): Array<Record<string, unknown>> {
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

export function briefFor(session: CouncilSession, phase: Phase, r: Ruleset): PersonaBrief {
  return buildPersonaBrief(phase, r, session.depth);
}

/** What the council remembers for the model, gathered from the current loop's records. */
export function memorySlots(session: CouncilSession): Record<string, unknown> {
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

export function transparencyLog(session: CouncilSession): { entries: Array<Record<string, unknown>>; count: number } {
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

export function allContradictions(session: CouncilSession): Array<Contradiction & { phase: Phase }> {
  return records(session).flatMap((x) => x.contradictions.map((c) => ({ phase: x.phase, ...c })));
}

export function warnings(session: CouncilSession): string[] {
  return records(session).flatMap((x) => [
    ...x.contradictions.map((c) => `${x.phase}: ${c.explanation}`),
    ...x.authorityViolations.map((v) => `${x.phase}: authority violation (${v.rule}): "${v.phrase}" at ${v.location}`),
  ]);
}

export function handoff(session: CouncilSession, from: PhaseRecord, to: Phase, r: Ruleset, note?: string): Record<string, unknown> {
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
