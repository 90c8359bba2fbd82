/**
 * Rules' conditions checked against the pinned input schemas of the tools they name
 * (docs/policy-conditions.md §5, "args against the pins"): where the pins are known — the CLI on
 * this environment's upstreams.lock — a condition reading an argument that no pinned tool its
 * pattern names declares (`args.pth`) is a problem named with the rule, the position and the
 * tools, instead of a condition that errors (and fails closed) on every call.
 *
 * The check reads the union of the named tools' fields, so `files.*` may read `args.path` although
 * some files tools take none (`has(args.path) && …` is then the idiom); a tool whose schema
 * declares no fields accepts anything, and a rule naming one is not checked. At call time `args`
 * stays the call's own arguments, dynamic.
 */
import { argsSchemaOf, mergeArgsFields, type ArgsFields } from "./args-schema.js";
import { entryMatches } from "./capability-match.js";
import { typedConditionProblem } from "./conditions.js";
import type { PolicyDocumentJson, PolicyRuleJson } from "./policy-document.js";

/** A pinned tool a rule may name: its capability name and its pinned input schema (JSON Schema). */
export interface PinnedTool {
  readonly capability: string;
  readonly inputSchema: unknown;
}

/** A rule whose condition reads an argument none of the pinned tools it names declares. */
export interface RuleArgsProblem {
  readonly rule: number;
  /** `rules[1].when: unknown field "pth" at 1:6 in "…", against the pinned input schemas of files.write_file`. */
  readonly message: string;
  readonly tools: readonly string[];
}

/** How many tools a message lists before it says how many more. */
const LISTED_TOOLS = 5;

function listTools(tools: readonly string[]): string {
  const shown = tools.slice(0, LISTED_TOOLS).join(", ");
  return tools.length > LISTED_TOOLS ? `${shown} and ${tools.length - LISTED_TOOLS} more` : shown;
}

/** Whether a rule's condition reads the call's arguments at all (only those are checked against pins). */
export function readsArgs(rule: PolicyRuleJson): boolean {
  return rule.when !== undefined && /\bargs\b/.test(rule.when);
}

/**
 * The problem of rule `rules[index]` against the pinned tools it names, or undefined: it reads no
 * argument, names no pinned tool, names one that takes any argument, or reads only declared ones.
 */
export function ruleArgsProblem(rule: PolicyRuleJson, index: number, tools: readonly PinnedTool[]): RuleArgsProblem | undefined {
  if (!readsArgs(rule)) return undefined;
  const named = tools.filter((t) => entryMatches(rule.capability, t.capability));
  if (named.length === 0) return undefined;
  let fields: ArgsFields = {};
  for (const tool of named) {
    const declared = argsSchemaOf(tool.inputSchema);
    // A tool that declares no fields takes any argument: nothing to check the rule against.
    if (!declared) return undefined;
    fields = mergeArgsFields(fields, declared);
  }
  const problem = typedConditionProblem(rule.when!, fields);
  if (!problem) return undefined;
  const names = named.map((t) => t.capability).sort();
  return { rule: index, tools: names, message: `rules[${index}].when: ${problem}, against the pinned input schemas of ${listTools(names)}` };
}

/** Every rule whose condition reads an argument no pinned tool it names declares. */
export function ruleArgsProblems(document: PolicyDocumentJson, tools: readonly PinnedTool[]): RuleArgsProblem[] {
  return document.rules.flatMap((rule, index) => ruleArgsProblem(rule, index, tools) ?? []);
}
