import { ambiguityProblem, canonicalJson, contentHash, isPlainObject } from "@chaos-core/kit";
import { mergeHostBound, type ToolArguments, type ToolPolicy, type ToolRule } from "./tool-policy.js";

/** The call a receipt is bound to, as the caller proposes it. Host values are never part of it. */
export interface ToolCall {
  readonly tool: string;
  readonly resource: string;
  /** The model's arguments; `{}` when the tool takes none, never absent. */
  readonly arguments: ToolArguments;
}

/** Codes call inspection can deny with, in the order it checks them. */
export type InspectionCode =
  | "ambiguous_call"
  | "tool_not_allowlisted"
  | "resource_not_allowlisted"
  | "host_bound_override"
  | "ambiguous_policy";

/** A call that passed inspection: allowlisted, concrete, host-bound values merged and hashed. */
export interface InspectedCall {
  readonly ok: true;
  readonly call: ToolCall;
  readonly rule: ToolRule;
  /** Host-bound ∪ model arguments: what the receipt's `args_hash` covers. */
  readonly merged: ToolArguments;
  readonly argsHash: string;
}

/** Why inspection denied a call. */
export interface InspectionFailure {
  readonly ok: false;
  readonly code: InspectionCode;
  readonly problem: string;
}

const CALL_FIELDS = new Set(["tool", "resource", "arguments"]);

/**
 * Inspects an untrusted call against a validated policy. Order: the call's own shape
 * (`ambiguous_call`: not an object, an unknown field, a tool or resource that is empty or a
 * wildcard, missing or non-JSON arguments) → `tool_not_allowlisted` → `resource_not_allowlisted`
 * → host-bound merge (`host_bound_override`). Shape comes first because `"*"` is ambiguous
 * before it is unlisted. Passing inspection is a pre-filter, never an authorization.
 */
export function inspectCall(call: unknown, policy: ToolPolicy): InspectedCall | InspectionFailure {
  const ambiguous = (problem: string): InspectionFailure => ({ ok: false, code: "ambiguous_call", problem });
  if (!isPlainObject(call)) return ambiguous("the call must be an object with tool, resource and arguments");
  const unknown = Object.keys(call).filter((k) => !CALL_FIELDS.has(k));
  // A host_bound or _meta field here would suggest the caller can supply host values; it cannot.
  if (unknown.length > 0) return ambiguous(`unknown field(s) ${unknown.join(", ")}; host values come from the operator's policy`);
  const { tool, resource, arguments: args } = call;
  if (typeof tool !== "string") return ambiguous("tool: must be a string");
  const toolProblem = ambiguityProblem(tool);
  if (toolProblem) return ambiguous(`tool: ${toolProblem}`);
  if (typeof resource !== "string") return ambiguous("resource: must be a string");
  const resourceProblem = ambiguityProblem(resource);
  if (resourceProblem) return ambiguous(`resource: ${resourceProblem}`);
  if (args === undefined) return ambiguous("arguments: missing; pass {} for a call without arguments");
  if (!isPlainObject(args)) return ambiguous("arguments: must be a JSON object");
  try {
    canonicalJson(args);
  } catch (err) {
    return ambiguous(`arguments: ${(err as Error).message}`);
  }

  // hasOwn: a tool named "constructor" must not find Object.prototype's.
  if (!Object.hasOwn(policy.tools, tool)) {
    return { ok: false, code: "tool_not_allowlisted", problem: `tool "${tool}" is not in policy ${policy.version}` };
  }
  const rule = policy.tools[tool]!;
  if (!rule.resources.includes(resource)) {
    return {
      ok: false,
      code: "resource_not_allowlisted",
      problem: `resource "${resource}" is not allowed for tool "${tool}" in policy ${policy.version}`,
    };
  }
  const merged = mergeHostBound(args, policy.host_context, rule.host_bound_fields ?? []);
  if (!merged.ok) return { ok: false, code: merged.code, problem: merged.problem };
  return {
    ok: true,
    call: { tool, resource, arguments: args },
    rule,
    merged: merged.merged,
    argsHash: contentHash(merged.merged),
  };
}
