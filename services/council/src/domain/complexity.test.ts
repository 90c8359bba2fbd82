import { describe, expect, it } from "vitest";
import { assessComplexity } from "./complexity.js";
import { MIGRATION_TASK } from "./examples.js";
import { RULESET, type Ruleset } from "./ruleset.js";

describe("assessComplexity", () => {
  it("rates the seed's migration task moderate with a standard five-phase pipeline and says why", () => {
    const a = assessComplexity(MIGRATION_TASK, RULESET);
    expect(a.level).toBe("moderate");
    expect(a.score).toBe(46);
    expect(a.depth).toBe("standard");
    expect(a.pipeline).toEqual(["decompile", "design", "critique", "synthesis", "verify"]);
    expect(a.reasons.keywords.matched).toEqual(["migrat", "downtime"]);
    expect(a.reasons.domains.matched).toEqual(["migration"]);
    expect(a.reasons.numbers.matched).toEqual(["2GB", "30 minutes"]);
    expect(a.explanation).toContain("46/100 (moderate)");
  });

  it("gives a simple task the light pipeline", () => {
    const a = assessComplexity("Rename the helper function in the README example.", RULESET);
    expect(a.level).toBe("simple");
    expect(a.depth).toBe("light");
    expect(a.pipeline).toEqual(["decompile", "synthesis", "verify"]);
  });

  it("gives a complex task the full pipeline, capped at 100", () => {
    const a = assessComplexity(
      "Migrate a multi-tenant MySQL cluster to PostgreSQL on Kubernetes: 2GB data, downtime < 30 minutes, encryption in transit, replication lag under 5 seconds.",
      RULESET,
    );
    expect(a.level).toBe("complex");
    expect(a.depth).toBe("full");
    expect(a.score).toBeLessThanOrEqual(100);
    expect(a.reasons.domains.matched).toEqual(["infrastructure", "migration", "security"]);
  });

  it("follows the ruleset: a heavier keyword weight raises the score", () => {
    const heavier: Ruleset = { ...RULESET, complexity: { ...RULESET.complexity, keywordWeight: 20 } };
    expect(assessComplexity(MIGRATION_TASK, heavier).score).toBe(70);
    expect(assessComplexity(MIGRATION_TASK, heavier).level).toBe("complex");
  });
});
