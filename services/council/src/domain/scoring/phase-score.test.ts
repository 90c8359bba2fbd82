import { describe, expect, it } from "vitest";
import { findAuthorityViolations } from "../authority.js";
import { CRITIQUE_OUTPUT, DECOMPILE_OUTPUT, VERIFY_OUTPUT } from "../examples.js";
import { type Phase } from "../phases.js";
import { RULESET, type Ruleset } from "../ruleset.js";
import { segmentsOf } from "../text.js";
import { validateOutput } from "../validation.js";
import { type PhaseContext } from "./checklist.js";
import { scorePhase, verdictOf } from "./phase-score.js";

function context(phase: Phase, raw: unknown, r: Ruleset = RULESET): PhaseContext {
  const output = validateOutput(phase, raw, r);
  const segments = segmentsOf(phase, output);
  return { phase, output, depth: "standard", segments, contradictions: [], violations: findAuthorityViolations(phase, segments, r) };
}

/** A decompile that is valid but thin: no claims, no boundary, short summary. */
const THIN = { summary: "Two parts.", decisions: ["Split it"], constraints: ["Fast"], confidence: 0.9, criticalQuestions: [], claims: [] };

describe("scorePhase", () => {
  it("gives every dimension a score, its passed and failed checks and how to improve", () => {
    const s = scorePhase(context("decompile", THIN), RULESET);
    for (const d of Object.values(s.dimensions)) {
      expect(d.score).toBeGreaterThanOrEqual(0);
      expect(d.score).toBeLessThanOrEqual(100);
      expect(d.improve).toHaveLength(d.failed.length);
    }
    expect(s.dimensions.completeness.failed).toContain("summary has at least 40 characters (10)");
    expect(s.dimensions.transparency.failed).toContain("knowledgeBoundary is stated");
    expect(s.dimensions.decisionQuality.improve[0]).toMatch(/rationale/);
    // 50–69: close, but it does not unlock the next phase.
    expect(s.verdict).toBe("needs_improvement");
    expect(s.passing).toBe(false);
    expect(s.suggestions.length).toBeGreaterThan(0);
    expect(s.ruleset).toEqual({ version: RULESET.version });
  });

  it("scores the example decompile excellent", () => {
    const s = scorePhase(context("decompile", DECOMPILE_OUTPUT), RULESET);
    expect(s.finalScore).toBe(100);
    expect(s.verdict).toBe("excellent");
  });

  it("penalises an authority violation in the agentic dimension, naming the phrase", () => {
    const s = scorePhase(context("decompile", { ...DECOMPILE_OUTPUT, summary: `${DECOMPILE_OUTPUT.summary} We recommend pgloader for the copy.` }), RULESET);
    expect(s.dimensions.agentic.score).toBe(100 - RULESET.agentic.violationPenalty);
    expect(s.dimensions.agentic.failed[0]).toContain('"We recommend"');
    expect(s.finalScore).toBeLessThan(100);
  });

  it("flags internal inconsistencies: a risk level below the worst severity", () => {
    const s = scorePhase(context("critique", { ...CRITIQUE_OUTPUT, riskLevel: "low" }), RULESET);
    expect(s.dimensions.consistency.failed[0]).toContain('riskLevel "low" is below the worst vulnerability severity "high"');
    expect(s.dimensions.consistency.score).toBe(100 - RULESET.consistency.warningPenalty);
  });

  it("is deterministic", () => {
    expect(scorePhase(context("decompile", THIN), RULESET)).toEqual(scorePhase(context("decompile", THIN), RULESET));
  });

  it("follows the ruleset: changing a weight changes the final score and the version is reported", () => {
    const base = scorePhase(context("decompile", THIN), RULESET);
    const modified: Ruleset = { ...RULESET, version: "test-weights", weights: { ...RULESET.weights, consistency: 0.6, completeness: 0.05 } };
    const changed = scorePhase(context("decompile", THIN, modified), modified);
    expect(changed.finalScore).toBeGreaterThan(base.finalScore);
    expect(changed.ruleset.version).toBe("test-weights");
  });

  it("follows the ruleset: a higher pass threshold turns a pass into a revision", () => {
    const strict: Ruleset = { ...RULESET, thresholds: { ...RULESET.thresholds, pass: 101 } };
    expect(scorePhase(context("decompile", DECOMPILE_OUTPUT), RULESET).passing).toBe(true);
    expect(scorePhase(context("decompile", DECOMPILE_OUTPUT, strict), strict).passing).toBe(false);
  });

  it("maps scores to the seed's verdict bands", () => {
    expect([95, 90, 89, 70, 69, 50, 49].map((s) => verdictOf(s, RULESET))).toEqual([
      "excellent",
      "excellent",
      "good",
      "good",
      "needs_improvement",
      "needs_improvement",
      "insufficient",
    ]);
  });
});

describe("transparency under the seed's field names", () => {
  it("credits uncertain claims marked in knowledgeBoundary.whatNeedsVerification", () => {
    const knowledgeBoundary = {
      whatIKnow: ["Data volume is 2GB"],
      whatIAssume: ["ENUM ordering is not relied on"],
      whatNeedsVerification: ["Peak write rate and the resulting replication lag"],
    };
    const s = scorePhase(context("critique", { ...CRITIQUE_OUTPUT, knowledgeBoundary }), RULESET);
    expect(s.dimensions.transparency.passed).toContain("uncertain and unknown claims are marked for verification");
    expect(s.dimensions.transparency.passed).toContain("the unknowns are admitted (whatIDontKnow or whatNeedsVerification)");
    expect(s.dimensions.transparency.score).toBe(100);
  });
});

describe("a verify's decision against its checks", () => {
  const oneFailed = [{ name: "Downtime budget", passed: false, details: "The drain step ran past the budget" }, ...VERIFY_OUTPUT.checks.slice(1)];

  it("flags an approval when a check failed, even if failedCount says none did", () => {
    const s = scorePhase(context("verify", { ...VERIFY_OUTPUT, checks: oneFailed, passedCount: 5, failedCount: 0, decision: "approve" }), RULESET);
    expect(s.dimensions.decisionQuality.failed).toContain("the approve decision follows from 1 failed check(s)");
    expect(s.suggestions).toContain("Do not approve with failed checks: reject, or fix and re-run them.");
  });

  it("flags an approval with failed checks the counts admit, and not an approval with none", () => {
    const admitted = scorePhase(context("verify", { ...VERIFY_OUTPUT, checks: oneFailed, passedCount: 4, failedCount: 1 }), RULESET);
    expect(admitted.dimensions.decisionQuality.failed).toContain("the approve decision follows from 1 failed check(s)");
    const clean = scorePhase(context("verify", VERIFY_OUTPUT), RULESET);
    expect(clean.dimensions.decisionQuality.passed).toContain("the approve decision follows from 0 failed check(s)");
  });
});
