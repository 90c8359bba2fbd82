import { describe, expect, it } from "vitest";
import { validatePolicyDocument } from "./policy-document.js";
import { explainDecision, parsePolicyTests, runPolicyTests, type CapabilityFacts } from "./policy-tests.js";

const document = validatePolicyDocument(
  {
    rules: [
      { capability: "github.merge_pull_request", effect: "allow", when: 'args.repository.matches("^sandbox/")' },
      { capability: "github.*", effect: "deny", when: '"intern" in principal.roles' },
    ],
  },
  "policy.json",
);
const catalogue = new Map<string, CapabilityFacts>([["github.merge_pull_request", { risk: "high", upstream: "github" }]]);
const run = { document, version: 4, lookup: (c: string) => catalogue.get(c), tenant: "acme", now: new Date("2026-12-07T12:00:00Z") };

describe("policy tests", () => {
  it("passes matching cases, and fails others with expected and got in one line", () => {
    const cases = parsePolicyTests(
      {
        cases: [
          { name: "sandbox", capability: "github.merge_pull_request", args: { repository: "sandbox/a" }, expect: { effect: "allow", rule: "rules[0]" } },
          { name: "prod", capability: "github.merge_pull_request", args: { repository: "acme/a" }, expect: { effect: "ALLOW", rule: "rules[0]" } },
          { name: "intern", capability: "github.merge_pull_request", principal: { id: "bob", roles: ["intern"] }, args: { repository: "sandbox/a" }, expect: { effect: "Deny" } },
        ],
      },
      "t.json",
    );
    const results = runPolicyTests(cases, run);
    expect(results.map((r) => r.passed)).toEqual([true, false, true]);
    expect(results[1]!.line).toBe('FAIL case "prod": expected ALLOW by rules[0], got REQUIRE_APPROVAL by riskRules.requireApprovalAtOrAbove');
  });

  it("cannot decide a capability the registry does not know without a risk, and can with one", () => {
    const cases = parsePolicyTests([{ name: "new tool", capability: "github.close_issue", expect: { effect: "allow" } }], "t.json");
    expect(runPolicyTests(cases, run)[0]).toMatchObject({ passed: false, problem: expect.stringContaining("give the case a risk") });
    const withRisk = parsePolicyTests([{ name: "new tool", capability: "github.close_issue", risk: "medium", expect: { effect: "allow" } }], "t.json");
    expect(runPolicyTests(withRisk, run)[0]).toMatchObject({ passed: true });
  });

  it("refuses a malformed tests file naming each field", () => {
    expect(() => parsePolicyTests({ cases: [{ name: "x", capability: "a.b", expect: { effect: "permit" }, agrs: {} }] }, "t.json")).toThrow(
      /^t\.json: cases\[0\]\.expect\.effect: .*; cases\[0\]\.agrs: unknown field \(did you mean "args"\?\)/,
    );
    expect(() => parsePolicyTests({ cases: [] }, "t.json")).toThrow(/^t\.json: cases: /);
  });

  it("explains every rule naming the capability, true, false or errored", () => {
    const e = explainDecision(
      { capability: "github.merge_pull_request", facts: { risk: "high" }, call: { principal: "p", roles: [], tenant: "acme", now: new Date(), args: {} } },
      document,
      4,
    );
    expect(e.decision).toMatchObject({ decision: "REQUIRE_APPROVAL", matchedRule: "riskRules.requireApprovalAtOrAbove" });
    expect(e.trace).toEqual([
      { rule: "rules[0]", effect: "allow", when: 'args.repository.matches("^sandbox/")', result: "error", error: expect.stringContaining('no field "repository"') },
      { rule: "rules[1]", effect: "deny", when: '"intern" in principal.roles', result: "false" },
    ]);
  });
});
