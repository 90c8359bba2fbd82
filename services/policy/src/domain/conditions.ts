/**
 * Conditions of policy rules in CEL (docs/policy-conditions.md, issue 33): compiled once, when a
 * document is loaded, against the declared environment below, and evaluated per decision.
 *
 * The document schema (policy-document.ts) refuses a rule whose `when` does not compile, and the
 * engine (engine.ts) runs the compiled conditions. Compiled conditions are kept per process by
 * their text ({@link MAX_CACHED_CONDITIONS}), so a document read again per decision (the SQL store
 * validates what it reads) or delivered again by a watch compiles nothing new.
 *
 * Compiling refuses, naming the rule, the expression and the position (`rules[2].when: unknown
 * field "rolez" at 1:11 in "principal.rolez"`): a parse error, a type error, an unknown variable or
 * field of the declared environment, a result that is not a bool, an expression over the size
 * bounds (characters, syntax-tree nodes, nesting depth), comprehensions nested deeper than the
 * bound, and a `matches` whose pattern is not a string literal that V8 can run in linear time.
 * Evaluating never throws: it answers true, false, or an error the caller must treat as
 * fail-closed (docs/policy-conditions.md §4). Timestamp accessors given a time zone run on a
 * cached formatter per zone (zoned-time.ts), not the library's `toLocaleString` per call.
 */
import v8 from "node:v8";
import { ChaosError } from "@chaos-core/kit";
import { Environment, type ASTNode } from "@marcbachmann/cel-js";
import type { ArgsFields } from "./args-schema.js";
import { registerZonedAccessors, useZonedAccessors, writtenNames, zonedAccessorCalls } from "./zoned-time.js";

/** The bounds a condition must keep; neither JavaScript CEL library estimates cost, so size is bounded instead. */
export const CONDITION_BOUNDS = {
  /** Characters of the expression's text. */
  maxChars: 1_024,
  /** Nodes of its syntax tree. */
  maxAstNodes: 256,
  /** Nesting depth of its syntax tree. */
  maxDepth: 32,
  /** Comprehensions (`all`, `exists`, `exists_one`, `map`, `filter`) inside one another. */
  maxComprehensionNesting: 2,
  /** Elements of a list literal, entries of a map literal. */
  maxLiteralEntries: 64,
} as const;

/** The variables a condition reads (docs/policy-conditions.md §3). */
export const CONDITION_VARIABLES = ["args", "capability", "principal", "tenant", "now", "http"] as const;

/** MCP tool annotations, as a condition reads them; the caller fills the MCP defaults for omitted hints. */
export interface ConditionAnnotations {
  readonly title: string;
  readonly readOnlyHint: boolean;
  readonly destructiveHint: boolean;
  readonly idempotentHint: boolean;
  readonly openWorldHint: boolean;
}

/** What one decision's conditions read: the environment of docs/policy-conditions.md §3. */
export interface ConditionInput {
  /** The step's validated arguments, nested values included (JSON: numbers are CEL doubles). */
  readonly args: Readonly<Record<string, unknown>>;
  readonly capability: {
    readonly name: string;
    /** `low`, `medium`, `high`, `critical` or `unspecified`. */
    readonly risk: string;
    readonly annotations: ConditionAnnotations;
    /** The upstream a capability comes from; "" for a built-in capability. */
    readonly upstream: string;
  };
  readonly principal: { readonly id: string; readonly roles: readonly string[] };
  readonly tenant: string;
  /** The decision's time: the service's clock, injected in tests and recorded with the decision. */
  readonly now: Date;
  /** The host an outbound HTTP call would reach; "" when it reaches none. */
  readonly http: { readonly host: string };
}

/** Distinct condition texts whose compiled form a process keeps; past it the oldest is dropped (and compiled again when next seen). */
export const MAX_CACHED_CONDITIONS = 4_096;

/** A condition compiled against the environment, for one rule. */
export interface CompiledCondition {
  /** The rule's index in the document's `rules`. */
  readonly rule: number;
  readonly expression: string;
  /** `rules[2].when`: where the expression is, for messages. */
  readonly field: string;
  readonly run: (input: ConditionInput) => unknown;
}

/** A condition's answer: its value, or why it has none (the caller fails closed). */
export type ConditionOutcome = { readonly ok: true; readonly value: boolean } | { readonly ok: false; readonly error: string };

/** The macros that loop over a list or map. */
const COMPREHENSIONS = new Set(["all", "exists", "exists_one", "map", "filter"]);

/** How much of an expression a message quotes. */
const QUOTED_CHARS = 160;

let environment: Environment | undefined;

/**
 * CEL's `matches` runs a JavaScript RegExp in @marcbachmann/cel-js, which backtracks: a pattern like
 * `^(a+)+$` against an argument a model chose could hold the event loop for minutes. With these V8
 * flags a RegExp that backtracks too much falls back to V8's linear-time engine, and the `l` flag
 * lets the compiler check at load that each pattern is one that engine can run (no back-references,
 * no look-around: what RE2, CEL's regex dialect, leaves out too). Process-wide and idempotent; if a
 * Node release drops the flags, `new RegExp(p, "l")` refuses every pattern: closed, not open.
 */
function enableLinearRegExp(): void {
  v8.setFlagsFromString("--enable-experimental-regexp-engine");
  v8.setFlagsFromString("--enable-experimental-regexp-engine-on-excessive-backtracks");
}

/**
 * Everything a condition may read but `args`, with the zoned accessors (zoned-time.ts): built once
 * per process (building one is the expensive part) and cloned for each type of `args`.
 */
let base: Environment | undefined;

function baseEnvironment(): Environment {
  if (base) return base;
  enableLinearRegExp();
  base = declareContextVariables(
    new Environment({
      unlistedVariablesAreDyn: false,
      limits: {
        maxAstNodes: CONDITION_BOUNDS.maxAstNodes,
        maxDepth: CONDITION_BOUNDS.maxDepth,
        maxListElements: CONDITION_BOUNDS.maxLiteralEntries,
        maxMapEntries: CONDITION_BOUNDS.maxLiteralEntries,
        maxCallArguments: 8,
      },
    }),
  );
  // Timestamp accessors with a time zone, without a new Intl formatter per call (zoned-time.ts).
  registerZonedAccessors(base);
  return base;
}

/** The declared environment with `args` a dynamic map: what a document is checked against when it is loaded. */
function conditionEnvironment(): Environment {
  return (environment ??= baseEnvironment().clone().registerVariable("args", "map"));
}

/** Declares the typed variables a condition may read (docs/policy-conditions.md) on `env`: the one list, for the policy engine and the benchmark alike. */
export function declareConditionVariables(env: Environment): Environment {
  return declareContextVariables(env.registerVariable("args", "map"));
}

/** The variables but `args`, whose type depends on the tool a call is for. */
function declareContextVariables(env: Environment): Environment {
  return env
    .registerVariable({
      name: "capability",
      schema: {
        name: "string",
        risk: "string",
        upstream: "string",
        annotations: { title: "string", readOnlyHint: "bool", destructiveHint: "bool", idempotentHint: "bool", openWorldHint: "bool" },
      },
    })
    .registerVariable({ name: "principal", schema: { id: "string", roles: "list<string>" } })
    .registerVariable("tenant", "string")
    .registerVariable("now", "google.protobuf.Timestamp")
    .registerVariable({ name: "http", schema: { host: "string" } });
}

/** `line:column` (1-based) of an offset in `text`. */
function position(text: string, offset: number): string {
  const before = text.slice(0, Math.max(0, Math.min(offset, text.length))).split("\n");
  return `${before.length}:${before.at(-1)!.length + 1}`;
}

function quoted(expression: string): string {
  const flat = expression.replace(/\s+/g, " ");
  return JSON.stringify(flat.length > QUOTED_CHARS ? `${flat.slice(0, QUOTED_CHARS)}…` : flat);
}

/** The library's error, as one clause: what is wrong, in our words where the library's are terse. */
function describe(err: { code?: string; summary?: string; message?: string }, atCallTime = false): string {
  const summary = writtenNames(err.summary ?? err.message ?? String(err));
  switch (err.code) {
    case "no_such_key": {
      const key = summary.replace(/^No such key: /, "");
      return atCallTime ? `the value has no field "${key}"` : `unknown field "${key}"`;
    }
    case "unknown_variable":
      return `unknown variable "${summary.replace(/^Unknown variable: /, "")}" (the variables are ${CONDITION_VARIABLES.join(", ")})`;
    case "limit_exceeded":
      return `the expression is over the size bound (${summary})`;
    default:
      return summary.charAt(0).toLowerCase() + summary.slice(1);
  }
}

function offsetOf(err: unknown): number {
  const e = err as { range?: { start?: number }; node?: { pos?: number } };
  return e.range?.start ?? e.node?.pos ?? 0;
}

/** The child nodes of a syntax-tree node, whatever its operator's argument shape. */
function children(node: ASTNode): ASTNode[] {
  const found: ASTNode[] = [];
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(visit);
    else if (typeof value === "object" && value !== null && typeof (value as { op?: unknown }).op === "string") found.push(value as ASTNode);
  };
  if (node.op !== "value") visit(node.args);
  return found;
}

/** The first problem the library's checker does not look for: comprehension nesting, `matches` patterns. */
function structuralProblem(root: ASTNode): { problem: string; offset: number } | undefined {
  const walk = (node: ASTNode, nesting: number): { problem: string; offset: number } | undefined => {
    let inner = nesting;
    if (node.op === "rcall" && COMPREHENSIONS.has(node.args[0])) {
      inner = nesting + 1;
      if (inner > CONDITION_BOUNDS.maxComprehensionNesting) {
        return {
          problem: `comprehensions are nested ${inner} deep, over the bound of ${CONDITION_BOUNDS.maxComprehensionNesting}`,
          offset: node.start,
        };
      }
    }
    if ((node.op === "rcall" || node.op === "call") && node.args[0] === "matches") {
      const callArgs = node.op === "rcall" ? node.args[2] : node.args[1];
      const pattern = callArgs.at(-1);
      if (pattern?.op !== "value" || typeof pattern.args !== "string") {
        return { problem: "the pattern of matches must be a string literal, so it is checked when the policy is loaded", offset: pattern?.start ?? node.start };
      }
      try {
        // eslint-disable-next-line no-invalid-regexp -- "l" is V8's linear-time engine, turned on by enableLinearRegExp.
        new RegExp(pattern.args, "l");
      } catch (err) {
        const why = err instanceof Error ? err.message.replace(/^Invalid regular expression: \/.*\/l: /, "") : String(err);
        return { problem: `the pattern ${JSON.stringify(pattern.args)} is not a regular expression that runs in linear time (${why})`, offset: pattern.start };
      }
    }
    // The receiver of a comprehension is outside its loop; only the loop's arguments are inside it.
    for (const child of children(node)) {
      const receiver = node.op === "rcall" && child === node.args[1];
      const problem = walk(child, receiver ? nesting : inner);
      if (problem) return problem;
    }
    return undefined;
  };
  return walk(root, 0);
}

/** An expression compiled, or why it does not compile (the problem, with its position and the expression quoted). */
type Compiled = { readonly run: (input: ConditionInput) => unknown } | { readonly problem: string };

const compiled = new Map<string, Compiled>();

function problemAt(expression: string, problem: string, offset: number): { problem: string } {
  return { problem: `${problem} at ${position(expression, offset)} in ${quoted(expression)}` };
}

function compile(expression: string, env: Environment = conditionEnvironment()): Compiled {
  if (expression.trim() === "") return { problem: "must not be empty; omit when for a rule without a condition" };
  if (expression.length > CONDITION_BOUNDS.maxChars) {
    return problemAt(expression, `the expression is ${expression.length} characters, over the bound of ${CONDITION_BOUNDS.maxChars}`, CONDITION_BOUNDS.maxChars);
  }
  let parsed: ReturnType<Environment["parse"]>;
  try {
    parsed = env.parse(expression);
  } catch (err) {
    return problemAt(expression, describe(err as object), offsetOf(err));
  }
  const checked = parsed.check();
  if (!checked.valid) return problemAt(expression, describe(checked.error ?? {}), offsetOf(checked.error));
  if (checked.type !== "bool" && checked.type !== "dyn") return problemAt(expression, `the condition yields ${checked.type}; it must yield bool`, 0);
  const structural = structuralProblem(parsed.ast);
  if (structural) return problemAt(expression, structural.problem, structural.offset);
  // Checked as written, so refusals name the library's own functions; then run with the zoned
  // accessors on a timestamp renamed to the cached-formatter ones (zoned-time.ts), parsed afresh
  // because the checker keeps what it resolved on each node. Should that not check, the library's run.
  let runnable = parsed;
  const calls = zonedAccessorCalls(parsed.ast);
  if (calls.size > 0) {
    const fresh = env.parse(expression);
    if (useZonedAccessors(fresh.ast, calls) === calls.size && fresh.check().valid) runnable = fresh;
  }
  return { run: (input) => runnable(input as unknown as Record<string, unknown>) };
}

/** The expression compiled, from the process's cache when it was compiled before. */
function compiledOf(expression: string): Compiled {
  let entry = compiled.get(expression);
  if (entry) return entry;
  entry = compile(expression);
  if (compiled.size >= MAX_CACHED_CONDITIONS) compiled.delete(compiled.keys().next().value!);
  compiled.set(expression, entry);
  return entry;
}

/**
 * Why `expression` is not an acceptable condition — the problem, its `line:column` and the
 * expression quoted — or undefined when it compiles. What the document schema reports at
 * `rules[i].when`.
 */
export function conditionProblem(expression: string): string | undefined {
  const entry = compiledOf(expression);
  return "problem" in entry ? entry.problem : undefined;
}

/**
 * Compiles rule `rule`'s `when` against the declared environment.
 * @throws ChaosError invalid_argument naming `rules[rule].when`, the problem, its position and the expression.
 */
export function compileCondition(expression: string, rule: number): CompiledCondition {
  const field = `rules[${rule}].when`;
  const entry = compiledOf(expression);
  if ("problem" in entry) throw new ChaosError("invalid_argument", `${field}: ${entry.problem}`);
  return { rule, expression, field, run: entry.run };
}

/** Conditions compiled with `args` typed by one set of declared fields, keyed by the fields' JSON. */
const typed = new Map<string, { readonly env: Environment; readonly compiled: Map<string, Compiled> }>();

/** Distinct `args` types whose compiled conditions a process keeps; past it the oldest is dropped. */
export const MAX_CACHED_ARGS_TYPES = 256;

/**
 * Why `expression` does not compile with `args` typed by `fields` (args-schema.ts: the fields the
 * pinned input schemas of the tools a rule names declare) — an argument none declares is an
 * unknown field, named with its position and the expression — or undefined when it compiles.
 */
export function typedConditionProblem(expression: string, fields: ArgsFields): string | undefined {
  const key = JSON.stringify(fields);
  let entry = typed.get(key);
  if (!entry) {
    entry = { env: baseEnvironment().clone().registerVariable({ name: "args", schema: fields }), compiled: new Map() };
    if (typed.size >= MAX_CACHED_ARGS_TYPES) typed.delete(typed.keys().next().value!);
    typed.set(key, entry);
  }
  let result = entry.compiled.get(expression);
  if (!result) entry.compiled.set(expression, (result = compile(expression, entry.env)));
  return "problem" in result ? result.problem : undefined;
}

/**
 * Evaluates a compiled condition. Never throws: an error in the data (a missing argument, a value
 * of another type) is answered `{ok: false, error}` naming the rule and the position, and the
 * caller fails closed (docs/policy-conditions.md §4).
 */
export function evaluateCondition(condition: CompiledCondition, input: ConditionInput): ConditionOutcome {
  let value: unknown;
  try {
    value = condition.run(input);
  } catch (err) {
    return { ok: false, error: `${condition.field}: ${describe(err as object, true)} at ${position(condition.expression, offsetOf(err))}` };
  }
  if (typeof value !== "boolean") {
    const what = value === null ? "null" : Array.isArray(value) ? "a list" : typeof value;
    return { ok: false, error: `${condition.field}: the condition yielded ${what}, not a bool` };
  }
  return { ok: true, value };
}
