import { ChaosError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { CRITIQUE_OUTPUT, DECOMPILE_OUTPUT, DESIGN_OUTPUT, VERIFY_OUTPUT } from "./examples.js";
import { RULESET } from "./ruleset.js";
import { validateOutput } from "./validation.js";

function refusal(fn: () => unknown): ChaosError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ChaosError) return err;
    throw err;
  }
  throw new Error("expected a ChaosError");
}

describe("validateOutput", () => {
  it("accepts the example outputs and normalises string decisions to objects", () => {
    const out = validateOutput("decompile", { ...DECOMPILE_OUTPUT, decisions: ["Split the work in two"] }, RULESET);
    expect(out.decisions).toEqual([{ text: "Split the work in two" }]);
    expect(validateOutput("design", DESIGN_OUTPUT, RULESET).recommended).toBe(DESIGN_OUTPUT.recommended);
  });

  it("names a missing required field", () => {
    const { criticalQuestions: _omit, ...rest } = DECOMPILE_OUTPUT;
    const err = refusal(() => validateOutput("decompile", rest, RULESET));
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toContain("output.criticalQuestions: required, expected array");
  });

  it("names the path of a wrong type deep inside a list", () => {
    const bad = { ...DESIGN_OUTPUT, approaches: [DESIGN_OUTPUT.approaches[0], { ...DESIGN_OUTPUT.approaches[1], pros: "simple" }] };
    const err = refusal(() => validateOutput("design", bad, RULESET));
    expect(err.message).toContain("output.approaches[1].pros: expected array, got string");
    const claims = refusal(() => validateOutput("decompile", { ...DECOMPILE_OUTPUT, claims: [5] }, RULESET));
    expect(claims.message).toContain("output.claims[0]: expected object (or a plain string), got number");
  });

  it("names a bad enum value and an out-of-range number", () => {
    const bad = { ...DECOMPILE_OUTPUT, confidence: 85, claims: [{ text: "x y", certainty: "sure" }] };
    const err = refusal(() => validateOutput("decompile", bad, RULESET));
    expect(err.message).toContain("output.confidence: expected at most 1, got 85");
    expect(err.message).toContain('output.claims[0].certainty: expected one of "confirmed", "likely", "uncertain", "unknown", "assumption" (any case), got "sure"');
  });

  it("refuses oversized text and too many items with the limit", () => {
    const long = "a".repeat(RULESET.limits.maxStringChars + 1);
    expect(refusal(() => validateOutput("decompile", { ...DECOMPILE_OUTPUT, summary: long }, RULESET)).message).toContain(
      `output.summary: expected at most ${RULESET.limits.maxStringChars} characters, got ${RULESET.limits.maxStringChars + 1}`,
    );
    const many = Array.from({ length: RULESET.limits.maxListItems + 1 }, (_, i) => `constraint ${i}`);
    expect(refusal(() => validateOutput("decompile", { ...DECOMPILE_OUTPUT, constraints: many }, RULESET)).message).toContain(
      `output.constraints: expected at most ${RULESET.limits.maxListItems} items, got ${RULESET.limits.maxListItems + 1}`,
    );
  });

  it("refuses an output larger than the total limit before parsing it", () => {
    const huge = Array.from({ length: 15 }, () => "b".repeat(RULESET.limits.maxStringChars));
    const err = refusal(() => validateOutput("synthesis", { summary: "s", implementation: huge, testing: huge, warnings: [] }, RULESET));
    expect(err.message).toMatch(/^output: too large/);
  });

  it("refuses unknown fields and lists the accepted ones", () => {
    const err = refusal(() => validateOutput("verify", { ...VERIFY_OUTPUT, verdict: "approve" }, RULESET));
    expect(err.message).toContain(
      "output.verdict: unknown field; accepted fields: summary, checks, passedCount, failedCount, finalConfidence, decision, recommendations, claims, knowledgeBoundary",
    );
  });

  it("names the fields a list item accepts when one of its fields is unknown, not the phase's", () => {
    const approach = { ...DESIGN_OUTPUT.approaches[0], title: "CDC" };
    expect(refusal(() => validateOutput("design", { ...DESIGN_OUTPUT, approaches: [approach] }, RULESET)).message).toContain(
      'output.approaches[0].title: unknown field; accepted fields: name, description, pros, cons (or a plain string)',
    );
    const check = { name: "Downtime budget", passed: true, evidence: "12 minutes" };
    expect(refusal(() => validateOutput("verify", { ...VERIFY_OUTPUT, checks: [...VERIFY_OUTPUT.checks, check] }, RULESET)).message).toContain(
      'output.checks[5].evidence: unknown field; accepted fields: name, passed, details (or a plain string)',
    );
    const boundary = { whatIKnow: ["2GB"], whatIWonder: ["why"] };
    expect(refusal(() => validateOutput("design", { ...DESIGN_OUTPUT, knowledgeBoundary: boundary }, RULESET)).message).toContain(
      'output.knowledgeBoundary.whatIWonder: unknown field; accepted fields: whatIKnow, whatIAssume, whatIDontKnow, whatNeedsVerification',
    );
  });

  it("refuses an output that is not an object, and an empty summary", () => {
    expect(refusal(() => validateOutput("design", "a design", RULESET)).message).toContain("output: must be an object");
    expect(refusal(() => validateOutput("design", { ...DESIGN_OUTPUT, summary: "   " }, RULESET)).message).toContain(
      "output.summary: expected at least 1 character, got 0",
    );
  });
});

describe("the council seed's shapes", () => {
  it("accepts knowledgeBoundary.whatNeedsVerification, the seed's name", () => {
    const knowledgeBoundary = {
      whatIKnow: ["Data volume is 2GB"],
      whatIAssume: ["ENUM ordering is not relied on"],
      whatIDontKnow: ["The write rate during the window"],
      whatNeedsVerification: ["JSON function usage, from the slow-query log"],
    };
    const out = validateOutput("decompile", { ...DECOMPILE_OUTPUT, knowledgeBoundary }, RULESET);
    expect(out.knowledgeBoundary).toEqual(knowledgeBoundary);
  });

  it("reads the old name needsVerification as whatNeedsVerification, and refuses both at once", () => {
    const old = { whatIKnow: ["Data volume is 2GB"], needsVerification: ["Binlog format on the production server"] };
    const out = validateOutput("design", { ...DESIGN_OUTPUT, knowledgeBoundary: old }, RULESET);
    expect(out.knowledgeBoundary).toEqual({
      whatIKnow: ["Data volume is 2GB"],
      whatIAssume: [],
      whatIDontKnow: [],
      whatNeedsVerification: ["Binlog format on the production server"],
    });
    const both = { ...old, whatNeedsVerification: ["Peak write rate"] };
    expect(refusal(() => validateOutput("design", { ...DESIGN_OUTPUT, knowledgeBoundary: both }, RULESET)).message).toContain(
      'output.knowledgeBoundary.needsVerification: unknown field; accepted fields: whatIKnow, whatIAssume, whatIDontKnow, whatNeedsVerification',
    );
  });

  it("takes a plain-string approach as {name, description} with no pros or cons", () => {
    const out = validateOutput(
      "design",
      { ...DESIGN_OUTPUT, approaches: ["pgloader dump and restore", DESIGN_OUTPUT.approaches[0]], recommended: "pgloader dump and restore" },
      RULESET,
    );
    expect(out.approaches).toEqual([
      { name: "pgloader dump and restore", description: "pgloader dump and restore", pros: [], cons: [] },
      DESIGN_OUTPUT.approaches[0],
    ]);
  });

  it("takes a plain-string vulnerability as {description} at the critique's riskLevel", () => {
    const out = validateOutput("critique", { ...CRITIQUE_OUTPUT, vulnerabilities: ["Replication lag at cutover", "Invalid JSON rows"] }, RULESET);
    expect(out.vulnerabilities).toEqual([
      { description: "Replication lag at cutover", severity: "high" },
      { description: "Invalid JSON rows", severity: "high" },
    ]);
  });

  it("takes a plain-string check as passed only when the verify reports no failed check", () => {
    const checks = ["Row counts match", "JSON queries return the same results"];
    const passing = validateOutput("verify", { ...VERIFY_OUTPUT, checks, passedCount: 2, failedCount: 0 }, RULESET);
    expect(passing.checks).toEqual([
      { name: "Row counts match", passed: true },
      { name: "JSON queries return the same results", passed: true },
    ]);
    const failing = validateOutput("verify", { ...VERIFY_OUTPUT, checks, passedCount: 1, failedCount: 1, decision: "reject" }, RULESET);
    expect(failing.checks?.map((c) => c.passed)).toEqual([false, false]);
  });

  it("takes a plain-string claim as {text} of unknown certainty, and mixes strings with objects", () => {
    const out = validateOutput("decompile", { ...DECOMPILE_OUTPUT, claims: ["pg_dump suits 2GB", DECOMPILE_OUTPUT.claims[0]] }, RULESET);
    expect(out.claims).toEqual([{ text: "pg_dump suits 2GB", certainty: "unknown" }, DECOMPILE_OUTPUT.claims[0]]);
  });

  it("still names the field of an empty plain-string item", () => {
    expect(refusal(() => validateOutput("design", { ...DESIGN_OUTPUT, approaches: ["  ", "Offline dump"] }, RULESET)).message).toContain(
      "output.approaches[0].name: expected at least 1 character, got 0",
    );
  });

  it("takes the seed's decision words APPROVED and REJECTED, and approve or reject in any case", () => {
    const decide = (decision: string) => validateOutput("verify", { ...VERIFY_OUTPUT, decision }, RULESET).decision;
    expect(["APPROVED", "Approved", "approved", "APPROVE", "approve"].map(decide)).toEqual(Array(5).fill("approve"));
    expect(["REJECTED", "Rejected", "rejected", "REJECT", " reject "].map(decide)).toEqual(Array(5).fill("reject"));
    expect(refusal(() => decide("maybe")).message).toContain(
      'output.decision: expected one of "approve", "approved", "reject", "rejected" (any case), got "maybe"',
    );
  });

  it("takes riskLevel, severity and certainty in any case and stores them in lower case", () => {
    const critique = validateOutput(
      "critique",
      {
        ...CRITIQUE_OUTPUT,
        riskLevel: "HIGH",
        vulnerabilities: [{ ...CRITIQUE_OUTPUT.vulnerabilities[0], severity: "High" }, "Invalid JSON rows"],
        claims: [{ text: "Peak write load may delay the catch-up", certainty: "Uncertain" }],
      },
      RULESET,
    );
    expect(critique.riskLevel).toBe("high");
    expect(critique.vulnerabilities?.map((v) => v.severity)).toEqual(["high", "high"]);
    expect(critique.claims?.[0]?.certainty).toBe("uncertain");
    expect(refusal(() => validateOutput("critique", { ...CRITIQUE_OUTPUT, riskLevel: "severe" }, RULESET)).message).toContain(
      'output.riskLevel: expected one of "low", "medium", "high", "critical" (any case), got "severe"',
    );
  });
});
