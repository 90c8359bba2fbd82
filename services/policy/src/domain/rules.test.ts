import { describe, expect, it } from "vitest";
import { allowRuleWarnings, clientElicitationOptIns } from "./channel-choice.js";
import { evaluatePolicy, type EvaluationInput } from "./engine.js";
import { formatPolicyDocument, parsePolicyDocument, PolicyDocumentError, validatePolicyDocument, type PolicyDocumentJson } from "./policy-document.js";
import type { CallFacts } from "./rules.js";
import type { Risk } from "./risk.js";
import { EVENING, POLICY_EXAMPLES as EXAMPLES, WORKING_HOURS } from "../../../../test/support/policy-examples.js";

/**
 * Conditional rules in the engine (docs/policy-conditions.md §4): how they combine with the seed's
 * keys, what an erroring condition yields per effect, and the refusals at load naming the rule.
 */

const policy = (doc: Record<string, unknown>): PolicyDocumentJson => validatePolicyDocument(doc, "policy.json");

function call(over: Partial<CallFacts> = {}): CallFacts {
  return { principal: "alice", roles: [], tenant: "acme", now: WORKING_HOURS, args: {}, ...over };
}

function decideFor(doc: PolicyDocumentJson, capability: string, risk: Risk, facts: Partial<CallFacts> | undefined, version = 3) {
  const input: EvaluationInput = { capability, risk, facts: {}, ...(facts ? { call: call(facts) } : {}) };
  return evaluatePolicy(input, doc, version);
}

function refusal(doc: Record<string, unknown>): string {
  try {
    validatePolicyDocument(doc, "policy.json");
  } catch (err) {
    expect(err).toBeInstanceOf(PolicyDocumentError);
    return (err as Error).message;
  }
  throw new Error("expected the document to be refused");
}

describe("the issue's four examples, decided", () => {
  const doc = policy(EXAMPLES);

  it("filesystem.write_file only under /srv/reports/", () => {
    const inside = decideFor(doc, "filesystem.write_file", "medium", { args: { path: "/srv/reports/q4.txt", content: "x" } });
    expect(inside).toMatchObject({ decision: "ALLOW", matchedRule: "default" });
    expect(inside.evaluatedAt).toEqual(WORKING_HOURS);

    const outside = decideFor(doc, "filesystem.write_file", "medium", { args: { path: "/etc/passwd", content: "x" } });
    expect(outside).toMatchObject({ decision: "DENY", matchedRule: "rules[0]", condition: EXAMPLES.rules[0]!.when, policyVersion: 3 });
    expect(outside.reason).toContain('rules[0] ("reports only") denies this "filesystem.write_file" call');

    const escaping = decideFor(doc, "filesystem.write_file", "medium", { args: { path: "/srv/reports/../../etc/passwd" } });
    expect(escaping).toMatchObject({ decision: "DENY", matchedRule: "rules[0]" });
  });

  it("github.merge_pull_request needs a person unless the repository is sandbox/*: the allow waives the risk threshold", () => {
    const sandbox = decideFor(doc, "github.merge_pull_request", "high", { args: { repository: "sandbox/demo", number: 4 } });
    expect(sandbox).toMatchObject({ decision: "ALLOW", matchedRule: "rules[1]", condition: 'args.repository.matches("^sandbox/")' });
    expect(sandbox.reason).toContain("is waived");

    const production = decideFor(doc, "github.merge_pull_request", "high", { args: { repository: "acme/api", number: 4 } });
    expect(production).toMatchObject({ decision: "REQUIRE_APPROVAL", matchedRule: "riskRules.requireApprovalAtOrAbove" });
  });

  it("jira.* for the support role only", () => {
    expect(decideFor(doc, "jira.create_issue", "low", { roles: ["support"] })).toMatchObject({ decision: "ALLOW", matchedRule: "default" });
    expect(decideFor(doc, "jira.create_issue", "low", { roles: ["developer"] })).toMatchObject({ decision: "DENY", matchedRule: "rules[2]" });
    // The pattern is the one matcher: `jira.*` does not name `jiraish.x`.
    expect(decideFor(doc, "jiraish.create_issue", "low", { roles: [] })).toMatchObject({ decision: "ALLOW", matchedRule: "default" });
  });

  it("jira.delete_issue outside business hours needs a person, through the rule's channels", () => {
    const day = decideFor(doc, "jira.delete_issue", "medium", { roles: ["support"], now: WORKING_HOURS });
    expect(day).toMatchObject({ decision: "ALLOW", matchedRule: "default" });
    const evening = decideFor(doc, "jira.delete_issue", "medium", { roles: ["support"], now: EVENING });
    expect(evening).toMatchObject({
      decision: "REQUIRE_APPROVAL",
      matchedRule: "rules[3]",
      approvalChannels: ["operator", "console"],
      channelsRule: "rules[3].channels",
      evaluatedAt: EVENING,
    });
    // Without the support role the deny rule wins, whatever the hour.
    expect(decideFor(doc, "jira.delete_issue", "medium", { roles: [], now: EVENING })).toMatchObject({ decision: "DENY", matchedRule: "rules[2]" });
  });
});

describe("how rules combine with the seed's keys", () => {
  it("never waives a seed denial, a deny rule or requireConfirmationFor with an allow rule", () => {
    const allowAll = { capability: "files.*", effect: "allow" };
    expect(decideFor(policy({ deniedCapabilities: ["files.write"], rules: [allowAll] }), "files.write", "low", {})).toMatchObject({
      decision: "DENY",
      matchedRule: "deniedCapabilities",
    });
    expect(decideFor(policy({ riskRules: { denyAtOrAbove: "high" }, rules: [allowAll] }), "files.write", "high", {})).toMatchObject({
      decision: "DENY",
      matchedRule: "riskRules.denyAtOrAbove",
    });
    expect(decideFor(policy({ requireConfirmationFor: ["files.write"], rules: [allowAll] }), "files.write", "low", {})).toMatchObject({
      decision: "REQUIRE_APPROVAL",
      matchedRule: "requireConfirmationFor",
    });
    expect(decideFor(policy({ rules: [allowAll, { capability: "files.write", effect: "deny" }] }), "files.write", "low", {})).toMatchObject({
      decision: "DENY",
      matchedRule: "rules[1]",
    });
    expect(decideFor(policy({ rules: [allowAll, { capability: "files.write", effect: "require_approval" }] }), "files.write", "high", {})).toMatchObject({
      decision: "REQUIRE_APPROVAL",
      matchedRule: "rules[1]",
    });
  });

  it("gives the strictest effect whatever the order of the rules; the order only picks the rule named among one effect", () => {
    const rules = [
      { capability: "files.*", effect: "allow" },
      { capability: "files.write", effect: "require_approval", when: "args.size > 10.0" },
      { capability: "files.write", effect: "deny", when: 'args.path.startsWith("/etc")' },
      { capability: "files.*", effect: "deny", when: 'args.path.endsWith(".key")' },
    ];
    const cases = [
      { path: "/etc/x", size: 1 },
      { path: "/home/a.key", size: 1 },
      { path: "/home/a", size: 20 },
      { path: "/home/a", size: 1 },
    ];
    const effects = (order: number[]) => {
      const doc = policy({ rules: order.map((i) => rules[i]) });
      return cases.map((args) => decideFor(doc, "files.write", "high", { args }).decision);
    };
    const expected = ["DENY", "DENY", "REQUIRE_APPROVAL", "ALLOW"];
    for (const order of [
      [0, 1, 2, 3],
      [3, 2, 1, 0],
      [1, 3, 0, 2],
      [2, 0, 3, 1],
    ]) {
      expect(effects(order)).toEqual(expected);
    }
  });

  it("fails closed on a condition that errors: deny and require_approval apply, allow waives nothing; the decision says so", () => {
    const when = 'args.repository.startsWith("sandbox/")';
    const errs = (effect: string) => decideFor(policy({ rules: [{ capability: "github.*", effect, when }] }), "github.merge", "high", { args: {} });

    const denied = errs("deny");
    expect(denied).toMatchObject({ decision: "DENY", matchedRule: "rules[0]", condition: when });
    expect(denied.conditionError).toMatch(/^rules\[0\]\.when: the value has no field "repository" at 1:\d+/);
    expect(denied.reason).toContain("could not be evaluated");

    const held = errs("require_approval");
    expect(held).toMatchObject({ decision: "REQUIRE_APPROVAL", matchedRule: "rules[0]" });
    expect(held.conditionError).toContain('no field "repository"');

    const notAllowed = errs("allow");
    expect(notAllowed).toMatchObject({ decision: "REQUIRE_APPROVAL", matchedRule: "riskRules.requireApprovalAtOrAbove" });
    expect(notAllowed.conditionError).toContain('rules[0].when: the value has no field "repository"');
    expect(notAllowed.reason).toContain("an allow rule whose condition errors waives nothing");
  });

  it("has CEL absorb an error inside one condition, and has() guard an optional argument", () => {
    const doc = policy({ rules: [{ capability: "files.write", effect: "deny", when: 'has(args.path) && args.path.startsWith("/etc")' }] });
    const d = decideFor(doc, "files.write", "low", { args: {} });
    expect(d).toMatchObject({ decision: "ALLOW", matchedRule: "default" });
    expect(d.conditionError).toBeUndefined();
  });

  it("fails closed when asked without the call's facts, but applies a rule without a condition", () => {
    const doc = policy({ rules: [{ capability: "files.write", effect: "deny", when: "args.path == \"/x\"" }, { capability: "files.read", effect: "require_approval" }] });
    const blind = decideFor(doc, "files.write", "low", undefined);
    expect(blind).toMatchObject({ decision: "DENY", matchedRule: "rules[0]" });
    expect(blind.conditionError).toContain("without the call's arguments");
    expect(blind.evaluatedAt).toBeUndefined();
    expect(decideFor(doc, "files.read", "low", undefined)).toMatchObject({ decision: "REQUIRE_APPROVAL", matchedRule: "rules[1]" });
  });

  it("reads capability, principal, tenant and http from the call, and fills the MCP defaults of absent annotations", () => {
    const doc = policy({
      rules: [
        {
          capability: "files.*",
          effect: "deny",
          when: 'capability.annotations.destructiveHint && capability.upstream == "files" && principal.id != "ops" && tenant == "acme" && http.host == ""',
        },
      ],
    });
    expect(decideFor(doc, "files.rm", "low", { upstream: "files" }).decision).toBe("DENY");
    expect(decideFor(doc, "files.rm", "low", { upstream: "files", annotations: { destructiveHint: false } }).decision).toBe("ALLOW");
    expect(decideFor(doc, "files.rm", "low", { upstream: "files", principal: "ops" }).decision).toBe("ALLOW");
    expect(decideFor(doc, "files.rm", "low", { upstream: "files", tenant: "other" }).decision).toBe("ALLOW");
  });
});

describe("rules in the document", () => {
  it("says out loud each allow rule (it waives the threshold's approval) and each rule whose channels let the client answer", () => {
    const doc = policy({
      rules: [
        { capability: "github.merge_pull_request", effect: "allow", when: 'args.repository.matches("^sandbox/")' },
        { capability: "jira.delete_issue", effect: "require_approval", channels: ["client_elicitation", "console"] },
        { capability: "jira.*", effect: "deny" },
      ],
    });
    expect(allowRuleWarnings(doc)).toEqual([
      'rules[0] allows github.merge_pull_request when args.repository.matches("^sandbox/"): it waives the approval riskRules.requireApprovalAtOrAbove would ask for those calls (never a denial or requireConfirmationFor).',
    ]);
    expect(clientElicitationOptIns(doc)).toEqual(["rules[1].channels"]);
  });


  it("takes the loose forms of an effect and stores the canonical one, keys in order", () => {
    const doc = policy({ rules: [{ when: "true", effect: "requireApproval", capability: "a.b", channels: ["console", "operator"] }, { capability: "a.*", effect: "DENY" }] });
    expect(doc.rules).toEqual([
      { capability: "a.b", effect: "require_approval", channels: ["operator", "console"], when: "true" },
      { capability: "a.*", effect: "deny" },
    ]);
    expect(parsePolicyDocument(formatPolicyDocument(doc), "p")).toEqual(doc);
  });

  it("refuses a parse error, a type error, an unknown field and an over-size expression, naming the rule and the position", () => {
    const at = (when: string) => refusal({ rules: [{ capability: "a.b", effect: "allow" }, { capability: "a.b", effect: "deny", when }] });
    expect(at('args.path.startsWith("/srv/"')).toBe('policy.json: rules[1].when: expected RPAREN, got EOF at 1:29 in "args.path.startsWith(\\"/srv/\\""');
    expect(at("capability.risk + 1")).toBe('policy.json: rules[1].when: no such overload: string + int at 1:1 in "capability.risk + 1"');
    expect(at('"support" in principal.rolez')).toBe('policy.json: rules[1].when: unknown field "rolez" at 1:24 in "\\"support\\" in principal.rolez"');
    expect(at(Array.from({ length: 200 }, (_, i) => `args.a${i} == 1.0`).join(" || "))).toMatch(/^policy\.json: rules\[1\]\.when: the expression is \d+ characters, over the bound of 1024 at /);
    expect(at("args.a.all(x, args.b.all(y, args.c.all(z, z == x)))")).toMatch(/^policy\.json: rules\[1\]\.when: comprehensions are nested 3 deep, over the bound of 2 at 1:\d+/);
  });

  it("refuses channels on a rule that is not require_approval, an unknown effect, an unknown key and a bad pattern, by path", () => {
    expect(refusal({ rules: [{ capability: "a.b", effect: "deny", channels: ["console"] }] })).toBe(
      "policy.json: rules[0].channels: only a require_approval rule names channels; this rule's effect is deny",
    );
    expect(refusal({ rules: [{ capability: "a.b", effect: "permit" }] })).toBe(
      'policy.json: rules[0].effect: expected one of "allow", "deny", "require_approval", got "permit"',
    );
    expect(refusal({ rules: [{ capability: "a.b", effect: "deny", whn: "true" }] })).toContain('rules[0].whn: unknown field (did you mean "when"?)');
    expect(refusal({ rules: [{ capability: "a*", effect: "deny" }] })).toContain("rules[0].capability:");
    expect(refusal({ rules: [{ capability: "a.b", effect: "require_approval", channels: [] }] })).toContain("rules[0].channels:");
  });
});
