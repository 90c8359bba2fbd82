import { canonicalJson, describeZodIssues } from "@chaos-core/kit";
import { z } from "zod";
import { ambiguityProblem, concreteName } from "./concrete.js";
import { RISKS, type Risk } from "./receipt.js";

/** Version words that point at whichever policy is current, not at the one a human saw. */
const FLOATING_VERSIONS = new Set(["latest", "current", "head"]);

const policyVersion = concreteName(128).superRefine((value, ctx) => {
  if (FLOATING_VERSIONS.has(value.toLowerCase())) {
    ctx.addIssue({ code: "custom", message: `"${value}" is not a concrete version; name the exact version` });
  }
});

const toolRuleSchema = z.strictObject({
  /** The risk a receipt for this tool must carry. */
  risk: z.enum(RISKS),
  /** Exact resources (tenants, accounts, scopes) a call may name; never a pattern. */
  resources: z.array(concreteName(512)).min(1, "lists no resource; name at least one exact resource"),
  /** Argument names whose values come from `host_context`, never from the model. */
  host_bound_fields: z
    .array(concreteName(128))
    .refine((fields) => new Set(fields).size === fields.length, "lists a field twice")
    .optional(),
});

/**
 * The operator's tool-approval policy of one tenant. Strict and concrete throughout: a policy
 * that could be read two ways is refused whole (`ambiguous_policy`) instead of being guessed.
 * `host_context` holds the trusted host values (tenant_id, index_name, …) that host-bound
 * arguments take; every declared host-bound field must have one there.
 */
export const toolPolicySchema = z
  .strictObject({
    version: policyVersion,
    tools: z.record(concreteName(256), toolRuleSchema),
    host_context: z.record(z.string().min(1, "must not be empty"), z.json()).optional(),
  })
  .superRefine((policy, ctx) => {
    for (const [tool, rule] of Object.entries(policy.tools)) {
      for (const [i, field] of (rule.host_bound_fields ?? []).entries()) {
        const problem = hostValueProblem(policy.host_context, field);
        if (problem) ctx.addIssue({ code: "custom", path: ["tools", tool, "host_bound_fields", i], message: problem });
      }
    }
  });

/** A validated tool-approval policy. */
export type ToolPolicy = z.infer<typeof toolPolicySchema>;

/** A tool-approval policy as written, before validation. */
export type ToolPolicyDocument = z.input<typeof toolPolicySchema>;

/** One tool's rule in a {@link ToolPolicy}. */
export type ToolRule = z.infer<typeof toolRuleSchema>;

/** A JSON object of call arguments (model-chosen, or merged with host values). */
export type ToolArguments = Readonly<Record<string, unknown>>;

/** Validates an untrusted value as a tool-approval policy; `problem` names each bad field. */
export function parseToolPolicy(value: unknown): { ok: true; policy: ToolPolicy } | { ok: false; problem: string } {
  const result = toolPolicySchema.safeParse(value, { reportInput: true });
  return result.success ? { ok: true, policy: result.data } : { ok: false, problem: describeZodIssues(result.error, toolPolicySchema, "").join("; ") };
}

/** What a check answers when the operator configured no tool-approval policy for the tenant. */
export const NO_TOOL_POLICY_PROBLEM =
  "no tool-approval policy is configured for this tenant, so no tool call can be approved; the operator sets one in " +
  "the ledger policy file (CHAOS_CORE_LEDGER_POLICY_FILE, under defaults.tool_approval or tenants.<tenant>.tool_approval)";

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

function hostValueProblem(hostContext: Readonly<Record<string, unknown>> | undefined, field: string): string | undefined {
  const has = hostContext !== undefined && Object.hasOwn(hostContext, field);
  const value = has ? hostContext[field] : undefined;
  if (value === undefined || value === null) {
    return `"${field}" is host-bound but host_context has no value for it`;
  }
  if (typeof value === "string") {
    const problem = ambiguityProblem(value);
    if (problem) return `host_context.${field} ${problem}`;
  }
  return undefined;
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
