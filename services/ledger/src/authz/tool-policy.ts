import { canonicalJson, hostValueProblem, parseToolPolicy, type Risk, type ToolPolicy, type ToolPolicyDocument } from "@chaos-core/kit";

// The policy's shape is kit's: the policy service checks a tenant's policy when it is stored.
export { parseToolPolicy, toolPolicySchema } from "@chaos-core/kit";
export type { ToolPolicy, ToolPolicyDocument, ToolRule } from "@chaos-core/kit";

/** A JSON object of call arguments (model-chosen, or merged with host values). */
export type ToolArguments = Readonly<Record<string, unknown>>;

/** What a check answers when the operator configured no tool-approval policy for the tenant. */
export const NO_TOOL_POLICY_PROBLEM =
  "no tool-approval policy is configured for this tenant, so no tool call can be approved; the operator sets one in " +
  "the tenant registry (chaos-core tenants settings <tenant> --ledger-policy FILE, key tool_approval) or the ledger policy file " +
  "(CHAOS_CORE_LEDGER_POLICY_FILE, under defaults.tool_approval or tenants.<tenant>.tool_approval)";

/**
 * The policy a check runs under: none at all (undefined or null) is `missing` in words —
 * {@link NO_TOOL_POLICY_PROBLEM} unless the caller names what is missing — and anything else is
 * validated, its problem prefixed with `policy:`.
 */
export function policyInForce(value: unknown, missing: string = NO_TOOL_POLICY_PROBLEM): { ok: true; policy: ToolPolicy } | { ok: false; problem: string } {
  if (value === undefined || value === null) return { ok: false, problem: missing };
  const parsed = parseToolPolicy(value);
  return parsed.ok ? parsed : { ok: false, problem: `policy: ${parsed.problem}` };
}

/**
 * The policy a cognition step's receipt is checked against: the policy service already decided
 * the step's risk and version, so the capability is the one tool and the tenant its one resource.
 */
export function stepToolPolicy(step: { capability: string; tenant: string; policyVersion: string; risk: Risk }): ToolPolicyDocument {
  return { version: step.policyVersion, tools: { [step.capability]: { risk: step.risk, resources: [step.tenant] } } };
}

function sameJson(a: unknown, b: unknown): boolean {
  try {
    // Canonical form, so {"a":1,"b":2} and {"b":2,"a":1} are the same value.
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

/** Why host-bound merging failed. */
export type HostBoundFailure =
  | { ok: false; code: "host_bound_override"; field: string; problem: string }
  | { ok: false; code: "ambiguous_policy"; field: string; problem: string };

/**
 * The arguments a receipt binds: the model's arguments with every host-bound field set to the
 * operator's value. A model value for a host-bound field that differs from the host value is
 * `host_bound_override` (the model tried to choose what only the host may); an equal value is
 * not an override. A declared field without a host value is `ambiguous_policy`.
 */
export function mergeHostBound(
  modelArgs: ToolArguments,
  hostContext: Readonly<Record<string, unknown>> | undefined,
  fields: readonly string[],
): { ok: true; merged: ToolArguments } | HostBoundFailure {
  const host: [string, unknown][] = [];
  for (const field of fields) {
    const problem = hostValueProblem(hostContext, field);
    if (problem) return { ok: false, code: "ambiguous_policy", field, problem };
    const value = hostContext![field];
    if (Object.hasOwn(modelArgs, field) && !sameJson(modelArgs[field], value)) {
      return { ok: false, code: "host_bound_override", field, problem: `the model set host-bound argument "${field}" to another value than the host's` };
    }
    host.push([field, value]);
  }
  // fromEntries defines own properties, so a "__proto__" argument stays data and cannot
  // reach the prototype.
  return { ok: true, merged: Object.fromEntries([...Object.entries(modelArgs), ...host]) };
}
