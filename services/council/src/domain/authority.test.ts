import { describe, expect, it } from "vitest";
import { findAuthorityViolations } from "./authority.js";
import { MIGRATION_OUTPUTS } from "./examples.js";
import { PHASES } from "./phases.js";
import { RULESET } from "./ruleset.js";
import { type Segment, segmentsOf } from "./text.js";

const text = (origin: Segment["origin"], t: string, location = `${origin}.summary`): Segment => ({ origin, location, kind: "text", text: t });

describe("findAuthorityViolations", () => {
  it("flags a decompile that proposes a solution and evaluates tools, naming the phrase", () => {
    const found = findAuthorityViolations("decompile", [text("decompile", "We recommend pgloader; it is the best tool for 2GB.")], RULESET);
    expect(found.map((v) => [v.rule, v.phrase])).toEqual([
      ["No solutions", "We recommend"],
      ["No tech evaluation", "best tool"],
    ]);
    expect(found[0]?.location).toBe("decompile.summary");
  });

  it("flags a verify that redesigns and a critique that implements", () => {
    expect(findAuthorityViolations("verify", [text("verify", "I redesigned the cutover to use two phases.")], RULESET)[0]).toMatchObject({
      rule: "No redesign",
      phrase: "redesigned",
    });
    expect(findAuthorityViolations("critique", [text("critique", "Fix: ALTER TABLE orders ADD CHECK (status <> '').")], RULESET)[0]).toMatchObject({
      rule: "No implementation",
      phrase: "ALTER TABLE",
    });
  });

  it("flags a synthesis that changes the requirements", () => {
    expect(findAuthorityViolations("synthesis", [text("synthesis", "Relax the downtime limit to one hour.")], RULESET)[0]).toMatchObject({
      rule: "No requirement changes",
    });
  });

  it("lets the analyst ask what it may not answer", () => {
    const q: Segment = { origin: "decompile", location: "decompile.criticalQuestions[0]", kind: "question", text: "Should we use logical replication?" };
    expect(findAuthorityViolations("decompile", [q, text("decompile", "Could we use pgloader here?")], RULESET)).toEqual([]);
  });

  it("raises nothing on the example session", () => {
    for (const phase of PHASES) expect(findAuthorityViolations(phase, segmentsOf(phase, MIGRATION_OUTPUTS[phase]), RULESET), phase).toEqual([]);
  });
});
