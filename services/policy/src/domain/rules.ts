/**
 * The conditional rules of a policy document, as the engine consults them
 * (docs/policy-conditions.md §4): which rule of one effect applies to a call, and what its
 * condition said. Pure: the time a condition sees is the caller's (`CallFacts.now`).
 */
import { entryMatches } from "./capability-match.js";
import { compileCondition, evaluateCondition, type CompiledCondition, type ConditionAnnotations, type ConditionInput } from "./conditions.js";
import type { PolicyDocumentJson, PolicyRuleJson, RuleEffect } from "./policy-document.js";
import type { Risk } from "./risk.js";

/** What a condition reads about the call beyond the capability's name and risk (docs/policy-conditions.md §3). */
export interface CallFacts {
  /** The step's validated arguments; absent: the caller sent none (a condition reading one errors). */
  readonly args?: Readonly<Record<string, unknown>> | undefined;
  /** The upstream the capability comes from; absent or "" for a built-in capability. */
  readonly upstream?: string | undefined;
  /** The capability's annotations; absent ones take the MCP spec's defaults. */
  readonly annotations?: Partial<ConditionAnnotations> | undefined;
  /** From the signed call context, never from the arguments. */
  readonly principal: string;
  readonly roles: readonly string[];
  readonly tenant: string;
  /** The deciding service's clock, recorded with the decision. */
  readonly now: Date;
}

/** The MCP spec's defaults for hints a tool leaves out. */
const MCP_ANNOTATION_DEFAULTS: ConditionAnnotations = {
  title: "",
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: false,
  openWorldHint: true,
};

/** A rule that applies to a call: which one, and whether its condition errored (then it applies because conditions fail closed). */
export interface AppliedRule {
  readonly index: number;
  readonly rule: PolicyRuleJson;
  /** Set when the condition errored: why (the rule applies anyway for `deny` and `require_approval`). */
  readonly error?: string;
}

/** What consulting one effect's rules found. */
export interface RuleLookup {
  readonly applied?: AppliedRule;
  /** Conditions of rules that matched the capability but errored without applying (an `allow` rule's): each named. */
  readonly errors: readonly string[];
  /** Whether a condition was evaluated: the decision then records the `now` it saw. */
  readonly evaluated: boolean;
}

const compiledByRules = new WeakMap<readonly PolicyRuleJson[], ReadonlyArray<CompiledCondition | string | undefined>>();

/**
 * Each rule's compiled condition (undefined: the rule has none; a string: why it does not compile
 * here — a document that passed validation elsewhere under another library version), once per
 * document object.
 */
function compiledConditions(rules: readonly PolicyRuleJson[]): ReadonlyArray<CompiledCondition | string | undefined> {
  let compiled = compiledByRules.get(rules);
  if (compiled) return compiled;
  compiled = rules.map((rule, i) => {
    if (rule.when === undefined) return undefined;
    try {
      return compileCondition(rule.when, i);
    } catch (err) {
      return (err as Error).message;
    }
  });
  compiledByRules.set(rules, compiled);
  return compiled;
}

/** The environment a condition sees for one call. */
export function conditionInput(capability: string, risk: Risk, httpHost: string | undefined, call: CallFacts): ConditionInput {
  return {
    args: call.args ?? {},
    capability: { name: capability, risk, upstream: call.upstream ?? "", annotations: { ...MCP_ANNOTATION_DEFAULTS, ...call.annotations } },
    principal: { id: call.principal, roles: call.roles },
    tenant: call.tenant,
    now: call.now,
    http: { host: httpHost ?? "" },
  };
}

/**
 * The first rule of `effect` (in document order) whose pattern matches `capability` and that
 * applies: its condition holds, or — for `deny` and `require_approval`, failing closed — errors.
 * An `allow` rule whose condition errors does not apply; its error is reported in `errors`.
 * `input` is built only when a matching rule has a condition; without the call's facts every
 * condition errors (closed).
 */
export function findRule(
  document: PolicyDocumentJson,
  effect: RuleEffect,
  capability: string,
  input: () => ConditionInput | undefined,
): RuleLookup {
  const compiled = compiledConditions(document.rules);
  const errors: string[] = [];
  let evaluated = false;
  let env: ConditionInput | undefined;
  for (let index = 0; index < document.rules.length; index++) {
    const rule = document.rules[index]!;
    if (rule.effect !== effect || !entryMatches(rule.capability, capability)) continue;
    const condition = compiled[index];
    if (condition === undefined) return { applied: { index, rule }, errors, evaluated };
    let error: string;
    if (typeof condition === "string") {
      error = condition;
    } else {
      env ??= input();
      if (env) {
        evaluated = true;
        const outcome = evaluateCondition(condition, env);
        if (outcome.ok) {
          if (outcome.value) return { applied: { index, rule }, errors, evaluated };
          continue;
        }
        error = outcome.error;
      } else {
        error = `rules[${index}].when: the decision was asked without the call's arguments and caller, so the condition cannot be evaluated`;
      }
    }
    if (effect !== "allow") return { applied: { index, rule, error }, errors, evaluated };
    errors.push(error);
  }
  return { errors, evaluated };
}

/** One rule whose pattern names a capability, and what its condition said for one call. */
export interface RuleTrace {
  /** `rules[2]`. */
  readonly rule: `rules[${number}]`;
  readonly effect: RuleEffect;
  readonly when?: string;
  /** `always` for a rule without a condition. */
  readonly result: "true" | "false" | "error" | "always";
  readonly error?: string;
}

/**
 * Every rule whose pattern names `capability`, in document order, each condition evaluated for the
 * call (`policy explain`: what each rule said, not only the one that decided).
 */
export function traceRules(document: PolicyDocumentJson, capability: string, input: ConditionInput | undefined): RuleTrace[] {
  const compiled = compiledConditions(document.rules);
  const trace: RuleTrace[] = [];
  document.rules.forEach((rule, index) => {
    if (!entryMatches(rule.capability, capability)) return;
    const base = { rule: `rules[${index}]` as const, effect: rule.effect, ...(rule.when !== undefined ? { when: rule.when } : {}) };
    const condition = compiled[index];
    if (condition === undefined) return void trace.push({ ...base, result: "always" });
    if (typeof condition === "string") return void trace.push({ ...base, result: "error", error: condition });
    if (!input) return void trace.push({ ...base, result: "error", error: "the call's arguments and caller were not given" });
    const outcome = evaluateCondition(condition, input);
    trace.push(outcome.ok ? { ...base, result: outcome.value ? "true" : "false" } : { ...base, result: "error", error: outcome.error });
  });
  return trace;
}
