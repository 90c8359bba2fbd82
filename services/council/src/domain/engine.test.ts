import { ChaosError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import {
  continueSession,
  type CouncilSession,
  createSession,
  personaBrief,
  PHASES,
  recallSession,
  restoreSession,
  RULESET,
  saveOutput,
  scoreSession,
  verifyClaims,
} from "./engine.js";
import {
  CRITIQUE_OUTPUT,
  DECOMPILE_OUTPUT,
  DESIGN_OUTPUT,
  MIGRATION_OUTPUTS,
  MIGRATION_TASK,
  SEED_STYLE_OUTPUTS,
  SYNTHESIS_OUTPUT,
  VERIFY_OUTPUT,
  VERIFY_REJECT_OUTPUT,
} from "./examples.js";

const NOW = new Date("2025-06-01T12:00:00Z");
const COMPLEX_TASK =
  "Migrate a multi-tenant MySQL cluster to PostgreSQL on Kubernetes: 2GB data, downtime < 30 minutes, encryption in transit, replication lag under 5 seconds. Handling JSON and ENUM types.";

function start(task = MIGRATION_TASK): CouncilSession {
  return createSession({ id: "s-1", tenant: "acme", task, now: NOW }).session;
}

function save(session: CouncilSession, phase: string, output: unknown) {
  return saveOutput(session, { phase, output, now: NOW });
}

function refusal(fn: () => unknown): ChaosError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ChaosError) return err;
    throw err;
  }
  throw new Error("expected a ChaosError");
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** Saves the pipeline's phases in order from the example outputs, each through JSON as a store would. */
function runAll(session: CouncilSession, outputs: Partial<Record<string, unknown>> = MIGRATION_OUTPUTS) {
  const results: Array<Record<string, unknown>> = [];
  let s = session;
  for (const phase of s.pipeline) {
    const r = save(s, phase, outputs[phase]);
    s = JSON.parse(JSON.stringify(r.session)) as CouncilSession;
    results.push(r.result);
  }
  return { session: s, results };
}

describe("a full session: MySQL → PostgreSQL", () => {
  it("initialises with the complexity, the pipeline and the Systems Analyst's brief", () => {
    const { session, result } = createSession({ id: "s-1", tenant: "acme", task: MIGRATION_TASK, title: "Migration", now: NOW });
    expect(result).toMatchObject({
      type: "council_init",
      sessionId: "s-1",
      phase: "decompile",
      adaptation: { complexity: { raw: 46, level: "moderate", pipelineDepth: "standard" } },
      personas: { current: { name: "Systems Analyst" } },
      ruleset: { version: RULESET.version },
    });
    expect((result.phasePlan as Array<{ status: string }>).map((p) => p.status)).toEqual(["active", "pending", "pending", "pending", "pending"]);
    expect(result.instructions).toContain("criticalQuestions");
    expect(session).toMatchObject({ tenant: "acme", currentPhase: "decompile", status: "active", createdAt: NOW.toISOString() });
  });

  it("passes all five phases with verdicts and handoffs between personas, then scores the session", () => {
    const { session, results } = runAll(start());
    expect(results.map((r) => [r.phase, r.status, r.canProceed, r.nextPhase])).toEqual([
      ["decompile", "saved", true, "design"],
      ["design", "saved", true, "critique"],
      ["critique", "saved", true, "synthesis"],
      ["synthesis", "saved", true, "verify"],
      ["verify", "complete", false, null],
    ]);
    for (const r of results) expect((r.scoring as { verdict: string }).verdict).toBe("excellent");
    expect(results[0]?.handoff).toMatchObject({
      from: "decompile",
      to: "design",
      personaTransition: { fromPersona: "Systems Analyst", toPersona: "Solution Architect" },
      conflicts: [],
    });
    expect((results[0]?.handoff as { handshake: { context: string[] } }).handshake.context).toContain("Constraint: Downtime must not exceed 30 minutes");
    expect(results[3]?.handoff).toMatchObject({ personaTransition: { fromPersona: "Implementation Engineer", toPersona: "Quality Assurance" } });
    expect(results[4]).toMatchObject({ outcome: "approved", sessionComplete: true, decision: "approve" });
    expect(session).toMatchObject({ status: "complete", outcome: "approved", currentPhase: null });

    const score = scoreSession(session);
    expect(score).toMatchObject({ type: "council_score", complete: true, progress: "5/5", contradictions: 0, authorityViolations: 0 });
    const overall = score.overall as Record<string, number | string>;
    expect(overall.verdict).toBe("excellent");
    for (const k of ["qualityScore", "adaptabilityScore", "transparencyScore", "agenticScore"]) expect(overall[k]).toBeGreaterThanOrEqual(90);
    expect(Object.keys(score.phaseScores as object)).toEqual([...PHASES]);
  });

  it("is deterministic: the same inputs give the same session and results", () => {
    expect(runAll(start())).toEqual(runAll(start()));
  });

  it("does not mutate the session it is given", () => {
    const frozen = deepFreeze(start());
    const before = JSON.stringify(frozen);
    const { session } = save(frozen, "decompile", DECOMPILE_OUTPUT);
    expect(JSON.stringify(frozen)).toBe(before);
    expect(session.currentPhase).toBe("design");
    expect(frozen.currentPhase).toBe("decompile");
  });
});

describe("order", () => {
  it("refuses skipping a phase, naming the active phase and why", () => {
    const err = refusal(() => save(start(), "design", DESIGN_OUTPUT));
    expect(err.code).toBe("failed_precondition");
    expect(err.message).toContain("cannot save design: the active phase is decompile (Systems Analyst)");
    expect(err.message).toContain("design unlocks only after decompile is saved with a score of at least 70");
  });

  it("refuses saving out of order later on", () => {
    const s = save(save(start(), "decompile", DECOMPILE_OUTPUT).session, "design", DESIGN_OUTPUT).session;
    expect(refusal(() => save(s, "synthesis", SYNTHESIS_OUTPUT)).message).toContain("the active phase is critique");
  });

  it("refuses re-saving a locked phase", () => {
    const s = save(start(), "decompile", DECOMPILE_OUTPUT).session;
    const err = refusal(() => save(s, "decompile", DECOMPILE_OUTPUT));
    expect(err.code).toBe("failed_precondition");
    expect(err.message).toContain("cannot save decompile: it was saved with a passing score (100) and is locked; the active phase is design");
  });

  it("refuses any save after completion", () => {
    const { session } = runAll(start());
    const err = refusal(() => save(session, "verify", VERIFY_OUTPUT));
    expect(err.code).toBe("failed_precondition");
    expect(err.message).toContain("is complete (verify decided: approved)");
  });

  it("refuses an unknown phase and a malformed output with the field named", () => {
    expect(refusal(() => save(start(), "review", {})).code).toBe("invalid_argument");
    const err = refusal(() => save(start(), "decompile", { ...DECOMPILE_OUTPUT, claims: [{ text: "x" }] }));
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toContain('output.claims[0].certainty: required, expected one of "confirmed", "likely", "uncertain", "unknown", "assumption" (any case)');
  });
});

describe("insufficient and improved outputs", () => {
  const POOR = { summary: "Move it.", decisions: [], constraints: [], confidence: 0.5, criticalQuestions: [], claims: [] };

  it("keeps the next phase locked until the phase is improved and re-saved", () => {
    const first = save(start(), "decompile", POOR);
    expect(first.result).toMatchObject({ status: "needs_revision", canProceed: false, nextPhase: "decompile" });
    const scoring = first.result.scoring as { finalScore: number; verdict: string; suggestions: string[] };
    expect(scoring.verdict).toBe("insufficient");
    expect(scoring.finalScore).toBeLessThan(50);
    expect(scoring.suggestions.length).toBeGreaterThan(0);
    expect(first.result.message).toContain("insufficient");

    expect(refusal(() => save(first.session, "design", DESIGN_OUTPUT)).message).toContain("the active phase is decompile");
    const cont = continueSession(first.session);
    expect(cont).toMatchObject({ currentPhase: { name: "decompile", status: "retry" }, needed: { lastAttempt: { attempt: 1 } } });

    const second = save(first.session, "decompile", DECOMPILE_OUTPUT);
    expect(second.result).toMatchObject({ status: "saved", attempt: 2, nextPhase: "design" });
    expect(second.session.history.map((h) => [h.attempt, h.locked])).toEqual([
      [1, false],
      [2, true],
    ]);
    // The retry costs adaptability in the session score.
    const adapt = (scoreSession(second.session).overall as { adaptabilityScore: number }).adaptabilityScore;
    expect(adapt).toBe(100 - RULESET.session.retryPenalty);
  });
});

describe("contradictions and authority through saves", () => {
  it("reports a constraint violation in the design and lowers its consistency", () => {
    const s = save(start(), "decompile", DECOMPILE_OUTPUT).session;
    const { result } = save(s, "design", { ...DESIGN_OUTPUT, summary: `${DESIGN_OUTPUT.summary} The cutover needs a 2 hour maintenance window.` });
    const found = result.contradictions as Array<{ type: string; earlier: { location: string } }>;
    expect(found.map((c) => c.type)).toContain("constraint");
    expect((result.scoring as { dimensions: { consistency: { score: number } } }).dimensions.consistency.score).toBeLessThan(100);
    expect((result.handoff as { conflicts: string[] }).conflicts[0]).toMatch(/Constraint violated on downtime/);
  });

  it("reports a polarity contradiction between design and synthesis", () => {
    let s = start();
    for (const [phase, out] of [
      ["decompile", DECOMPILE_OUTPUT],
      ["design", { ...DESIGN_OUTPUT, tradeoffs: [...DESIGN_OUTPUT.tradeoffs, "The catch-up uses logical replication from the binlog stream"] }],
      ["critique", CRITIQUE_OUTPUT],
    ] as const) s = save(s, phase, out).session;
    const { result } = save(s, "synthesis", {
      ...SYNTHESIS_OUTPUT,
      warnings: [...SYNTHESIS_OUTPUT.warnings],
      decisions: [{ text: "The catch-up does not use logical replication from the binlog stream", rationale: "The tooling is not installed on the source" }],
    });
    expect((result.contradictions as Array<{ type: string }>).map((c) => c.type)).toEqual(["polarity"]);
  });

  it("flags a decompile that proposes a solution and still records it", () => {
    const { result, session } = save(start(), "decompile", { ...DECOMPILE_OUTPUT, summary: `${DECOMPILE_OUTPUT.summary} We should use pgloader for the copy.` });
    expect(result.authorityWarnings).toEqual([
      expect.objectContaining({ rule: "No solutions", phrase: "We should use", location: "decompile.summary" }),
    ]);
    expect(scoreSession(session).authorityViolations).toBe(1);
    expect((recallSession(session, "summary").warnings as string[])[0]).toContain('authority violation (No solutions): "We should use"');
  });
});

describe("adaptive depth", () => {
  it("runs a simple task through the light pipeline", () => {
    const s = createSession({ id: "s-2", tenant: "acme", task: "Rename the helper function in the README example.", now: NOW }).session;
    expect(s.pipeline).toEqual(["decompile", "synthesis", "verify"]);
    expect(refusal(() => save(save(s, "decompile", DECOMPILE_OUTPUT).session, "design", DESIGN_OUTPUT)).message).toContain(
      "not part of this session's light pipeline",
    );
    const { session, results } = runAll(s);
    expect(results.map((r) => r.phase)).toEqual(["decompile", "synthesis", "verify"]);
    expect(session.outcome).toBe("approved");
  });

  it("ends a standard session on a rejecting verify, without a loop", () => {
    const { session, results } = runAll(start(), { ...MIGRATION_OUTPUTS, verify: VERIFY_REJECT_OUTPUT });
    expect(results[4]).toMatchObject({ status: "complete", outcome: "rejected", decision: "reject" });
    expect(session.loops).toBe(0);
  });

  it("loops a full-depth session back to design when verify rejects, bounded by the ruleset", () => {
    let s = createSession({ id: "s-3", tenant: "acme", task: COMPLEX_TASK, now: NOW }).session;
    expect(s.depth).toBe("full");
    const rejecting = { ...MIGRATION_OUTPUTS, verify: VERIFY_REJECT_OUTPUT };
    const out = runAll(s, rejecting);
    expect(out.results[4]).toMatchObject({ status: "loop_back", nextPhase: "design", loop: { count: 1, max: RULESET.loop.maxLoops } });
    expect((out.results[4]?.handoff as { personaTransition: object }).personaTransition).toEqual({
      fromPersona: "Quality Assurance",
      toPersona: "Solution Architect",
    });
    s = out.session;
    expect(s.currentPhase).toBe("design");
    expect(Object.keys(s.phases)).toEqual(["decompile"]);
    expect(s.archived.map((r) => r.phase)).toEqual(["design", "critique", "synthesis", "verify"]);
    const cont = continueSession(s);
    expect(cont).toMatchObject({ currentPhase: { name: "design" }, handoff: { from: "verify", to: "design" } });
    expect(JSON.stringify(cont.handoff)).toContain("Failed check: Downtime budget");

    // The second round rejects again, the third round has no loop left.
    const redo = (session: CouncilSession, verify: unknown) => {
      let cur = session;
      const res: Array<Record<string, unknown>> = [];
      for (const phase of ["design", "critique", "synthesis", "verify"]) {
        const r = save(cur, phase, phase === "verify" ? verify : rejecting[phase as keyof typeof rejecting]);
        cur = r.session;
        res.push(r.result);
      }
      return { session: cur, last: res[3] };
    };
    const second = redo(s, VERIFY_REJECT_OUTPUT);
    expect(second.last).toMatchObject({ status: "loop_back", loop: { count: 2 } });
    const third = redo(second.session, VERIFY_REJECT_OUTPUT);
    expect(third.last).toMatchObject({ status: "complete", outcome: "rejected" });
    expect(third.last?.message).toContain("loop-back(s) allowed are used up");
    expect((scoreSession(third.session).overall as { adaptabilityScore: number }).adaptabilityScore).toBeLessThan(100);

    const approved = redo(s, VERIFY_OUTPUT);
    expect(approved.last).toMatchObject({ status: "complete", outcome: "approved" });
  });
});

describe("recall, continue, verify, personas", () => {
  const half = () => {
    let s = start();
    for (const phase of ["decompile", "design"] as const) s = save(s, phase, MIGRATION_OUTPUTS[phase]).session;
    return s;
  };

  it("recalls full, summary and decisions", () => {
    const s = half();
    const summary = recallSession(s, "summary");
    expect(summary).toMatchObject({ type: "council_recall", progress: "2/5", currentPhase: { name: "critique", persona: "Security & Quality Auditor" } });
    expect(summary.summary).toContain("design (100, excellent)");
    const decisions = recallSession(s, "decisions");
    expect(decisions.recommended).toBe(DESIGN_OUTPUT.recommended);
    expect((decisions.decisions as Array<{ phase: string }>).map((d) => d.phase)).toEqual(["decompile", "decompile", "design", "design"]);
    const full = recallSession(s, "full");
    expect((full.phases as Array<{ output: unknown }>)[1]?.output).toMatchObject({ recommended: DESIGN_OUTPUT.recommended });
    expect((full.transparencyLog as { count: number }).count).toBe(2);
  });

  it("continues with the active persona, the handoff and what is still needed", () => {
    const c = continueSession(half());
    expect(c).toMatchObject({
      status: "active",
      currentPhase: { name: "critique", persona: "Security & Quality Auditor", status: "active" },
      handoff: { from: "design", to: "critique" },
      needed: { requiredFields: RULESET.fields.critique.required, minimumItems: { vulnerabilities: 2, mitigation: 2 } },
    });
    expect(c.instructions).toContain("Phase CRITIQUE");
  });

  it("says when the session is complete, with the final verdict", () => {
    const c = continueSession(runAll(start()).session);
    expect(c).toMatchObject({ status: "complete", outcome: "approved", finalVerdict: "excellent", currentPhase: null });
  });

  it("verifies claims against the session: grounded, ungrounded and contradicted", () => {
    const s = half();
    const r = verifyClaims(s, {
      mode: "all",
      claims: [
        { text: "JSON columns are mapped to jsonb", source: "design" },
        { text: "The team prefers MongoDB for analytics" },
        { text: "Downtime of 3 hours is planned" },
      ],
    });
    const claims = (r.results as { claims: Array<{ status: string; reason: string }> }).claims;
    expect(claims.map((c) => c.status)).toEqual(["verified", "unverified", "contradicted"]);
    expect(claims[0]?.reason).toContain("design.decisions[0].text");
    expect(claims[2]?.reason).toContain("Constraint violated on downtime");
    // The seed's word for checking both, answered as it was asked.
    expect(r.mode).toBe("all");
    expect(r.summary).toEqual({ total: 3, passed: 1, failed: 2, contradicted: 1 });
    expect((r.results as { grounding: object }).grounding).toEqual({ verified: 1, unverified: 2, verifiedPct: 33, unverifiedPct: 67 });
  });

  it("grounds a weaker match when the claim's source names where it comes from", () => {
    const s = half();
    const claim = { text: "pgloader handles ENUM conversion for the move", source: "pgloader documentation" };
    const withSource = (verifyClaims(s, { mode: "grounding", claims: [claim] }).results as { claims: Array<{ status: string; grounding: { sourceMatched: boolean } }> }).claims[0];
    expect(withSource).toMatchObject({ status: "verified", grounding: { sourceMatched: true } });
    const without = (verifyClaims(s, { mode: "grounding", claims: [{ text: claim.text }] }).results as { claims: Array<{ status: string }> }).claims[0];
    expect(without?.status).toBe("unverified");
  });

  it("checks only contradictions in contradiction mode and refuses bad input", () => {
    const r = verifyClaims(half(), { mode: "contradiction", claims: [{ text: "The dataset is 2GB" }] });
    expect(r.summary).toMatchObject({ total: 1, passed: 1 });
    expect(r.results).not.toHaveProperty("grounding");
    expect(refusal(() => verifyClaims(half(), { mode: "contradiction", claims: [] })).message).toContain("claims: must be a non-empty list");
    expect(refusal(() => verifyClaims(half(), { mode: "everything" as "all", claims: [{ text: "x" }] })).code).toBe("invalid_argument");
  });

  it("briefs every persona with identity, authority, not-authority, handoff and English instructions", () => {
    const names = PHASES.map((p) => personaBrief(p).name);
    expect(names).toEqual(["Systems Analyst", "Solution Architect", "Security & Quality Auditor", "Implementation Engineer", "Quality Assurance"]);
    const verify = personaBrief("verify");
    expect(verify.notAuthority).toEqual(["No redesign", "No reimplementation"]);
    expect(verify.instructions).toContain("decision: approve | reject");
    expect(personaBrief("decompile").authority.length).toBeGreaterThan(0);
  });

  it("refuses a malformed init with the field named", () => {
    expect(refusal(() => createSession({ id: "x", tenant: "t", task: "  ", now: NOW })).message).toBe("task: must not be empty");
    expect(refusal(() => createSession({ id: "x", tenant: "t", task: "a", title: "t".repeat(500), now: NOW })).message).toContain("title: too long");
  });
});

describe("sessions stored before the seed's field names", () => {
  it("hands the old needsVerification items over as unresolved when a stored session is resumed", () => {
    const { session } = save(start(), "decompile", DECOMPILE_OUTPUT);
    // What a store holds for a session saved when the field was still called needsVerification.
    const stored = JSON.parse(
      JSON.stringify(session).replaceAll('"whatNeedsVerification"', '"needsVerification"'),
    ) as unknown;
    const resumed = restoreSession(stored);
    const unresolved = (continueSession(resumed).handoff as { handshake: { unresolved: string[] } }).handshake.unresolved;
    expect(unresolved).toContain("JSON function usage, from the slow-query log");
    expect(resumed.phases.decompile?.output.knowledgeBoundary).not.toHaveProperty("needsVerification");
    // And it goes on: the design saves on top of the restored decompile.
    expect(save(resumed, "design", DESIGN_OUTPUT).result).toMatchObject({ status: "saved", nextPhase: "critique" });
  });
});

describe("plain-string items in lists of objects", () => {
  it("scores a design whose approaches are plain strings instead of refusing it, and says what they lack", () => {
    const { session } = save(start(), "decompile", DECOMPILE_OUTPUT);
    const design = {
      ...DESIGN_OUTPUT,
      approaches: ["Bulk copy with binlog change data capture", "Offline dump and restore"],
    };
    const { result } = save(session, "design", design);
    expect(result).toMatchObject({ status: "saved", canProceed: true, nextPhase: "critique" });
    const quality = (result.scoring as { dimensions: { decisionQuality: { passed: string[]; failed: string[] } } }).dimensions.decisionQuality;
    expect(quality.passed).toContain("recommended names one of the approaches");
    expect(quality.failed).toContain("every approach lists pros and cons");
  });
});

describe("the seed's enumeration words", () => {
  it("ends a session on a verify that says REJECTED, and approves one that says APPROVED", () => {
    const upToVerify = (s: CouncilSession) => {
      let cur = s;
      for (const phase of cur.pipeline.slice(0, -1)) cur = save(cur, phase, MIGRATION_OUTPUTS[phase as keyof typeof MIGRATION_OUTPUTS]).session;
      return cur;
    };
    const rejected = save(upToVerify(start()), "verify", { ...VERIFY_REJECT_OUTPUT, decision: "REJECTED" });
    expect(rejected.result).toMatchObject({ status: "complete", decision: "reject", outcome: "rejected" });
    const approved = save(upToVerify(start()), "verify", { ...VERIFY_OUTPUT, decision: "APPROVED" });
    expect(approved.result).toMatchObject({ status: "complete", decision: "approve", outcome: "approved" });
    expect(approved.session.phases.verify?.output.decision).toBe("approve");
  });
});

describe("a verify without a decision, as the seed's field table allows", () => {
  const withoutDecision = <T extends { decision: string }>(o: T): Omit<T, "decision"> => {
    const { decision: _left, ...rest } = o;
    return rest;
  };

  it("approves when every check passed and rejects when one failed", () => {
    const approved = runAll(start(), { ...MIGRATION_OUTPUTS, verify: withoutDecision(VERIFY_OUTPUT) });
    expect(approved.results[4]).toMatchObject({ status: "complete", decision: "approve", outcome: "approved" });
    expect((approved.results[4]?.scoring as { verdict: string }).verdict).toBe("excellent");
    expect(recallSession(approved.session, "decisions")).toMatchObject({ verifyDecision: "approve" });
    const rejected = runAll(start(), { ...MIGRATION_OUTPUTS, verify: withoutDecision(VERIFY_REJECT_OUTPUT) });
    expect(rejected.results[4]).toMatchObject({ status: "complete", decision: "reject", outcome: "rejected" });
  });

  it("loops a full-depth session back on a failed check", () => {
    const s = createSession({ id: "s-4", tenant: "acme", task: COMPLEX_TASK, now: NOW }).session;
    const out = runAll(s, { ...MIGRATION_OUTPUTS, verify: withoutDecision(VERIFY_REJECT_OUTPUT) });
    expect(out.results[4]).toMatchObject({ status: "loop_back", decision: "reject", nextPhase: "design" });
    expect((recallSession(out.session, "full").archived as Array<{ name: string; decision?: string }>).at(-1)).toMatchObject({
      name: "verify",
      decision: "reject",
    });
  });
});

describe("a session written as the council seed documents it", () => {
  it("passes all five phases with the seed's field names, plain-string list items and its words, and is approved", () => {
    const { session, results } = runAll(start(), SEED_STYLE_OUTPUTS);
    expect(results.map((r) => [r.phase, r.status, r.nextPhase])).toEqual([
      ["decompile", "saved", "design"],
      ["design", "saved", "critique"],
      ["critique", "saved", "synthesis"],
      ["synthesis", "saved", "verify"],
      ["verify", "complete", null],
    ]);
    // Scored, not refused: each passes, and loses points only where the strings say less than objects would.
    for (const r of results) expect((r.scoring as { finalScore: number }).finalScore).toBeGreaterThanOrEqual(RULESET.thresholds.pass);
    expect((results[1]?.scoring as { suggestions: string[] }).suggestions).toContain("List at least one pro and one con for every approach.");
    expect(results[4]).toMatchObject({ status: "complete", decision: "approve", outcome: "approved" });
    expect(results.flatMap((r) => r.contradictions as unknown[])).toEqual([]);
    expect(session.phases.critique?.output).toMatchObject({ riskLevel: "high", vulnerabilities: [{ severity: "high" }, { severity: "high" }, { severity: "high" }] });
  });
});
