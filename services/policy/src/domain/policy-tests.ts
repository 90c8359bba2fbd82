/**
 * Policies tested like code (docs/policy-conditions.md §7): `policy explain` answers what a call
 * would be decided, with every rule that names the capability and what its condition said;
 * `policy test` runs a file of cases (caller, capability, arguments → expected effect and rule)
 * against a document and says, for each that fails, what was expected and what came.
 *
 * Pure: what a capability is (its risk, annotations, upstream) comes from the caller, who asks the
 * capability registry; the time is each case's or the caller's.
 */
import { zodProblems } from "@chaos-core/kit";
import { z } from "zod";
import type { ConditionAnnotations } from "./conditions.js";
import { evaluatePolicy, type Decision, type PolicyDecision } from "./engine.js";
import { effectForm, PolicyDocumentError, RULE_EFFECTS, type PolicyDocumentJson } from "./policy-document.js";
import { RISK_LEVELS, type Risk } from "./risk.js";
import { conditionInput, traceRules, type CallFacts, type RuleTrace } from "./rules.js";

/** What the registry says about a capability: what policy decides it at. */
export interface CapabilityFacts {
  readonly risk: Risk;
  readonly annotations?: Partial<ConditionAnnotations>;
  readonly upstream?: string;
}

/** One call to explain. */
export interface ExplainRequest {
  readonly capability: string;
  readonly facts: CapabilityFacts;
  readonly call: CallFacts;
  /** The host an HTTP call would reach, for `httpAllowedDomains` and `http.host`. */
  readonly httpHost?: string;
}

/** A decision with every rule that names the capability and what its condition said. */
export interface Explanation {
  readonly decision: PolicyDecision;
  readonly trace: readonly RuleTrace[];
}

/** What policy would decide for one call, and why: nothing runs. */
export function explainDecision(request: ExplainRequest, document: PolicyDocumentJson, version: number): Explanation {
  const { capability, facts, call, httpHost } = request;
  const withFacts: CallFacts = { ...call, ...(facts.upstream ? { upstream: facts.upstream } : {}), ...(facts.annotations ? { annotations: facts.annotations } : {}) };
  const decision = evaluatePolicy({ capability, risk: facts.risk, facts: { httpHost }, call: withFacts }, document, version);
  return { decision, trace: traceRules(document, capability, conditionInput(capability, facts.risk, httpHost, withFacts)) };
}

/** The loose forms of an effect (`requireApproval`, `Deny`) as a decision (`REQUIRE_APPROVAL`). */
function decisionForm(value: unknown): unknown {
  const effect = effectForm(value);
  return (RULE_EFFECTS as readonly unknown[]).includes(effect) ? (effect as string).toUpperCase() : value;
}

const caseSchema = z
  .object({
    name: z.string().min(1).max(200),
    capability: z.string().min(1).max(256),
    principal: z.object({ id: z.string().min(1).default("policy-test"), roles: z.array(z.string()).default([]) }).strict().default({ id: "policy-test", roles: [] }),
    args: z.record(z.string(), z.unknown()).default({}),
    /** ISO 8601; default: the run's time. */
    now: z.iso.datetime({ offset: true }).optional(),
    tenant: z.string().min(1).optional(),
    /** The host an HTTP call would reach. */
    http: z.object({ host: z.string() }).strict().optional(),
    /** Overrides, or stands in for, what the capability registry says (required for a capability it does not know). */
    risk: z.enum(RISK_LEVELS).optional(),
    expect: z
      .object({
        effect: z.preprocess(decisionForm, z.enum(["ALLOW", "DENY", "REQUIRE_APPROVAL"])),
        /** The rule expected to decide: `rules[1]`, `riskRules.requireApprovalAtOrAbove`, `default`, … */
        rule: z.string().min(1).optional(),
      })
      .strict(),
  })
  .strict();

/** A file of policy test cases: `{cases: [...]}` or the list alone. */
const testsFileSchema = z.union([z.object({ cases: z.array(caseSchema).min(1) }).strict(), z.array(caseSchema).min(1)]);

export type PolicyTestCase = z.output<typeof caseSchema>;

/**
 * Reads a tests file's parsed JSON.
 * @throws PolicyDocumentError naming `source` and each bad field (`cases[2].expect.effect`).
 */
export function parsePolicyTests(value: unknown, source: string): PolicyTestCase[] {
  const result = testsFileSchema.safeParse(value, { reportInput: true });
  if (!result.success) {
    // The object form is the documented one: its problems read best.
    const objectForm = Array.isArray(value) ? z.array(caseSchema).min(1) : z.object({ cases: z.array(caseSchema).min(1) }).strict();
    const detailed = objectForm.safeParse(value, { reportInput: true });
    throw new PolicyDocumentError(source, detailed.success ? [{ path: "", message: "not a tests file" }] : zodProblems(detailed.error, objectForm, "", { suggest: true }));
  }
  return Array.isArray(result.data) ? result.data : result.data.cases;
}

/** One case's outcome. */
export interface PolicyTestResult {
  readonly name: string;
  readonly passed: boolean;
  readonly expected: { readonly effect: Decision; readonly rule?: string };
  /** Absent when the case could not be decided (`problem`). */
  readonly got?: { readonly effect: Decision; readonly rule: string; readonly reason: string; readonly conditionError?: string };
  /** Why the case could not be decided (an unknown capability without a risk). */
  readonly problem?: string;
  /** A line a person reads: `case "x": expected ALLOW by rules[1], got REQUIRE_APPROVAL by riskRules.requireApprovalAtOrAbove`. */
  readonly line: string;
}

/** What a run needs beyond the cases and the document. */
export interface PolicyTestRun {
  readonly document: PolicyDocumentJson;
  readonly version: number;
  /** What the registry says about a capability, or undefined when it knows none by that name. */
  readonly lookup: (capability: string) => CapabilityFacts | undefined;
  /** The tenant a case without one is for. */
  readonly tenant: string;
  /** The time a case without `now` is decided at. */
  readonly now: Date;
}

const by = (effect: string, rule: string | undefined) => (rule ? `${effect} by ${rule}` : effect);

/** Runs every case; nothing runs but the decision. */
export function runPolicyTests(cases: readonly PolicyTestCase[], run: PolicyTestRun): PolicyTestResult[] {
  return cases.map((c) => {
    const expected = { effect: c.expect.effect, ...(c.expect.rule ? { rule: c.expect.rule } : {}) };
    const known = run.lookup(c.capability);
    if (!known && !c.risk) {
      const problem = `"${c.capability}" is not a capability the registry knows; give the case a risk (low, medium, high, critical)`;
      return { name: c.name, passed: false, expected, problem, line: `case "${c.name}": ${problem}` };
    }
    const facts: CapabilityFacts = { ...known, risk: c.risk ?? known!.risk };
    const { decision } = explainDecision(
      {
        capability: c.capability,
        facts,
        call: { args: c.args, principal: c.principal.id, roles: c.principal.roles, tenant: c.tenant ?? run.tenant, now: c.now ? new Date(c.now) : run.now },
        ...(c.http ? { httpHost: c.http.host } : {}),
      },
      run.document,
      run.version,
    );
    const got = {
      effect: decision.decision,
      rule: decision.matchedRule,
      reason: decision.reason,
      ...(decision.conditionError ? { conditionError: decision.conditionError } : {}),
    };
    const passed = got.effect === expected.effect && (expected.rule === undefined || expected.rule === got.rule);
    const line = passed
      ? `ok   case "${c.name}": ${by(got.effect, got.rule)}`
      : `FAIL case "${c.name}": expected ${by(expected.effect, expected.rule)}, got ${by(got.effect, got.rule)}${got.conditionError ? ` (${got.conditionError})` : ""}`;
    return { name: c.name, passed, expected, got, line };
  });
}
