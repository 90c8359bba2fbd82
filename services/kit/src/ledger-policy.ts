import { z } from "zod";
import { describeZodIssues } from "./zod-issues.js";

/**
 * The operator's ledger policy documents of one tenant: its named spend policies and its
 * tool-approval policy. Their shapes live here, not in the ledger, because two services read
 * them: the ledger enforces them, and the policy service's tenant registry checks them when an
 * operator stores them (docs/tenants.md, "Which service owns which per-tenant document"), so a
 * typo fails the operator's command, never a tenant's call.
 */

/** The risk classes a receipt and a tool rule name. */
export const RISKS = ["low", "medium", "high", "critical"] as const;
export type Risk = (typeof RISKS)[number];

/**
 * Words that name a set instead of one thing. An approval must be for exactly one tool, one
 * resource, one actor and one policy version, so these are never read as literal names.
 */
const SET_WORDS = new Set(["any", "all"]);

/**
 * Why `value` is not one concrete name, or undefined when it is: empty, padded with whitespace
 * (two spellings of one name), a `*` wildcard anywhere, or `any` / `all` in any case.
 */
export function ambiguityProblem(value: string): string | undefined {
  if (value.trim() === "") return "is empty";
  if (value.trim() !== value) return `"${value}" has surrounding whitespace`;
  if (value.includes("*")) return `"${value}" is a wildcard; name exactly one`;
  if (SET_WORDS.has(value.toLowerCase())) return `"${value}" names a set; name exactly one`;
  return undefined;
}

/** A zod string that must be one concrete name (see {@link ambiguityProblem}), at most `max` long. */
export function concreteName(max: number): z.ZodString {
  return z
    .string()
    .max(max, `must be at most ${max} characters`)
    .superRefine((value, ctx) => {
      const problem = ambiguityProblem(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });
}

const amount = z.number().finite().nonnegative();

/** One operator spend policy. Strict, so a misspelt key fails instead of dropping a limit. */
export const spendPolicySchema = z
  .object({
    /** Concrete version; receipts and ledger entries name it. */
    version: z.string().trim().min(1, "must name a concrete version"),
    max_notional: amount,
    daily_cap: amount,
    /** Inclusive; 0 sends every spend to a human. */
    hitl_threshold: amount,
    min_confidence: z.number().min(0).max(1),
    /** Empty means any action. */
    allowed_actions: z
      .array(z.string().min(1))
      .refine((a) => new Set(a).size === a.length, "must not repeat an action"),
    per_asset_limits: z.record(z.string().min(1), amount),
    /**
     * A Chaos Core check in front of the CHP gate, not a gate rule: true refuses an evaluation
     * whose action has no confidence (the gate alone would skip `min-confidence`). Absent is false.
     */
    require_confidence: z.boolean().optional(),
  })
  .strict();

/** An operator spend policy after validation. */
export type SpendPolicyConfig = z.output<typeof spendPolicySchema>;

/** Operator spend policies by name (`equity`, `wire`, …). */
export const spendPoliciesSchema = z.record(
  z.string().regex(/^[a-z][a-z0-9_-]{0,62}$/, "a policy name is lower-case letters, digits, '-' or '_'"),
  spendPolicySchema,
);


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

/** Validates an untrusted value as a tool-approval policy; `problem` names each bad field. */
export function parseToolPolicy(value: unknown): { ok: true; policy: ToolPolicy } | { ok: false; problem: string } {
  const result = toolPolicySchema.safeParse(value, { reportInput: true });
  return result.success ? { ok: true, policy: result.data } : { ok: false, problem: describeZodIssues(result.error, toolPolicySchema, "").join("; ") };
}

/** Why `field` has no usable host value in `hostContext`, or undefined when it has one. */
export function hostValueProblem(hostContext: Readonly<Record<string, unknown>> | undefined, field: string): string | undefined {
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

/** One tenant's section of the ledger policy: what the operator set, each key optional. */
export const ledgerPolicySectionSchema = z.strictObject({
  spend_policies: spendPoliciesSchema.optional(),
  tool_approval: z.unknown().optional(),
});

/** A tenant's ledger policy section as the operator wrote it (`tool_approval` as written, checked). */
export interface LedgerPolicySection {
  readonly spend_policies?: Readonly<Record<string, SpendPolicyConfig>>;
  readonly tool_approval?: ToolPolicyDocument;
}

/**
 * Checks a tenant's ledger policy section — `{"spend_policies": {...}, "tool_approval": {...}}`,
 * both optional — and names the first bad field under `where` (`settings.ledgerPolicy.spend_policies.wire.daily_cap: …`).
 */
export function parseLedgerPolicySection(value: unknown, where: string): { ok: true; section: LedgerPolicySection } | { ok: false; problem: string } {
  const parsed = ledgerPolicySectionSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { ok: false, problem: `${[where, ...issue.path.map(String)].join(".")}: ${issue.message}` };
  }
  const { spend_policies, tool_approval } = parsed.data;
  if (tool_approval !== undefined) {
    const tool = parseToolPolicy(tool_approval);
    if (!tool.ok) return { ok: false, problem: `${where}.tool_approval: ${tool.problem}` };
  }
  return {
    ok: true,
    section: { ...(spend_policies ? { spend_policies } : {}), ...(tool_approval !== undefined ? { tool_approval: tool_approval as ToolPolicyDocument } : {}) },
  };
}
