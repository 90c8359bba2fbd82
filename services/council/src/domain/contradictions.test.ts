import { describe, expect, it } from "vitest";
import { detectContradictions, extractQuantities } from "./contradictions.js";
import { MIGRATION_OUTPUTS, MIGRATION_TASK } from "./examples.js";
import { type Phase, PHASES } from "./phases.js";
import { RULESET, type Ruleset } from "./ruleset.js";
import { type Segment, segmentsOf, taskSegments } from "./text.js";

const seg = (origin: Segment["origin"], text: string, kind: Segment["kind"] = "text", location = `${origin}.summary`): Segment => ({
  origin,
  location,
  kind,
  text,
});

describe("quantities", () => {
  it("reads bounds, units and negated bounds", () => {
    const [q] = extractQuantities(seg("task", "Downtime < 30 minutes.", "task"), RULESET);
    expect(q).toMatchObject({ name: "downtime", kind: "upper", max: 1800 });
    const [flipped] = extractQuantities(seg("decompile", "No downtime longer than 30 minutes", "constraint"), RULESET);
    expect(flipped).toMatchObject({ name: "downtime", kind: "upper", max: 1800 });
    const [window] = extractQuantities(seg("design", "Plan a 2 hour maintenance window."), RULESET);
    expect(window).toMatchObject({ name: "downtime", kind: "exact", min: 7200 });
    const [size] = extractQuantities(seg("task", "2GB data", "task"), RULESET);
    expect(size).toMatchObject({ name: "data size", min: 2e9 });
  });

  it("does not tie a number to a subject that another noun or number owns", () => {
    expect(extractQuantities(seg("synthesis", "Restore a 200 MB sample of the data first."), RULESET)).toEqual([]);
    const lag = extractQuantities(seg("synthesis", "Wait until replication lag stays below 5 seconds for 10 minutes."), RULESET);
    expect(lag.map((q) => [q.name, q.kind, q.max])).toEqual([["replication lag", "upper", 5]]);
  });
});

describe("detectContradictions", () => {
  it("finds a numerical contradiction: the same quantity with different values, units normalised", () => {
    const found = detectContradictions(
      [seg("decompile", "The current downtime of 30 minutes per release is accepted.")],
      [seg("design", "The downtime of 2 hours per release stays.")],
      RULESET,
    );
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ type: "numerical", quantity: "downtime" });
    expect(found[0]?.explanation).toContain("decompile.summary");
  });

  it("finds a constraint violation against an earlier numeric constraint", () => {
    const found = detectContradictions(
      [seg("decompile", "No downtime longer than 30 minutes", "constraint", "decompile.constraints[0]")],
      [seg("design", "The cutover uses a 2 hour maintenance window.")],
      RULESET,
    );
    expect(found.map((c) => c.type)).toEqual(["constraint"]);
    expect(found[0]?.explanation).toMatch(/Constraint violated on downtime.*exceeds the earlier limit/);
  });

  it("finds a constraint violation against the task itself", () => {
    const found = detectContradictions(taskSegments(MIGRATION_TASK, undefined), [seg("synthesis", "Expect a downtime of 3 hours.")], RULESET);
    expect(found.map((c) => [c.type, c.earlier.location])).toEqual([["constraint", "task"]]);
  });

  it("finds a breached prohibition", () => {
    const found = detectContradictions(
      [seg("decompile", "No triggers on the production database", "constraint", "decompile.constraints[1]")],
      [seg("synthesis", "Create triggers on the production database to capture changes.", "text", "synthesis.implementation[2]")],
      RULESET,
    );
    expect(found.map((c) => c.type)).toEqual(["constraint"]);
  });

  it("finds a polarity contradiction: a statement and its negation", () => {
    const found = detectContradictions(
      [seg("design", "We will use logical replication for the catch-up.")],
      [seg("synthesis", "We won't use logical replication for the catch-up.")],
      RULESET,
    );
    expect(found.map((c) => c.type)).toEqual(["polarity"]);
  });

  it("finds contradictions within one new output too", () => {
    const found = detectContradictions(
      [],
      [seg("design", "Downtime stays under 30 minutes."), seg("design", "Downtime of 90 minutes is planned.", "text", "design.justification")],
      RULESET,
    );
    expect(found).toHaveLength(1);
  });

  it("raises nothing on consistent statements: stricter limits, estimates, hypotheticals, alternatives, questions", () => {
    const earlier = [
      ...taskSegments(MIGRATION_TASK, undefined),
      seg("decompile", "Downtime must not exceed 30 minutes", "constraint", "decompile.constraints[0]"),
      seg("design", "The expected write freeze is about 10 minutes."),
    ];
    const added = [
      seg("synthesis", "Keep downtime under 20 minutes."),
      seg("synthesis", "The rehearsed write freeze took 12 minutes.", "text", "synthesis.testing[0]"),
      seg("synthesis", "If the drain fails, downtime could reach 2 hours.", "text", "synthesis.implementation[3]"),
      seg("synthesis", "Offline restore with a 2 hour maintenance window.", "alternative", "synthesis.approaches[1].description"),
      seg("synthesis", "Is a downtime of 2 hours acceptable?", "question", "synthesis.criticalQuestions[0]"),
      seg("synthesis", "The 2 hour outage of last year is a risk.", "text", "synthesis.warnings[0]"),
    ];
    expect(detectContradictions(earlier, added, RULESET)).toEqual([]);
  });

  it("raises nothing across the whole example session", () => {
    const stored: Segment[] = taskSegments(MIGRATION_TASK, undefined);
    for (const phase of PHASES) {
      const added = segmentsOf(phase, MIGRATION_OUTPUTS[phase as Phase]);
      expect(detectContradictions(stored, added, RULESET), phase).toEqual([]);
      stored.push(...added);
    }
  });

  it("follows the ruleset: a wider tolerance accepts what the default flags", () => {
    const earlier = [seg("decompile", "Downtime of 30 minutes is the norm.")];
    const added = [seg("design", "Downtime of 40 minutes is the norm.")];
    expect(detectContradictions(earlier, added, RULESET)).toHaveLength(1);
    const lenient: Ruleset = { ...RULESET, contradictions: { ...RULESET.contradictions, numericTolerance: 0.5 } };
    expect(detectContradictions(earlier, added, lenient)).toEqual([]);
  });
});
