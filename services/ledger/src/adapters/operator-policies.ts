import { readFile } from "node:fs/promises";
import { ChaosError, ledgerPolicySectionSchema, parseToolPolicy, type SpendPolicyConfig, type ToolPolicyDocument } from "@chaos-core/kit";
import { z } from "zod";
import { REFERENCE_SPEND_POLICIES } from "../domain/spend-policies.js";

/** One tenant's governance configuration, as the operator wrote it. */
export interface TenantPolicies {
  /** Named spend policies (`equity`, `wire`, `rebalance`, …). */
  readonly spendPolicies: Readonly<Record<string, SpendPolicyConfig>>;
  /**
   * The tool-approval policy, or undefined when the operator configured none: then every
   * tool-approval check is `ambiguous_policy` (nothing is allowlisted by default).
   */
  readonly toolPolicy: ToolPolicyDocument | undefined;
}

/**
 * The operator's governance configuration of every tenant. Asked on every call that needs it:
 * the registry's answer may change between two calls (docs/tenants.md). Rejects with
 * `unavailable` when the tenant's policies cannot be read — the call then fails closed.
 */
export interface OperatorPolicies {
  forTenant(tenant: string): Promise<TenantPolicies>;
  /** Where it came from, for the start-up line. */
  readonly source: string;
}

const fileSchema = z.strictObject({
  defaults: ledgerPolicySectionSchema.optional(),
  tenants: z.record(z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, "must be a tenant id"), ledgerPolicySectionSchema).optional(),
});

type TenantSection = z.infer<typeof ledgerPolicySectionSchema>;

function resolveSection(section: TenantSection | undefined, fallback: TenantPolicies, where: string): TenantPolicies {
  if (!section) return fallback;
  let toolPolicy = fallback.toolPolicy;
  if (section.tool_approval !== undefined) {
    // Checked at start so an operator's typo fails the deployment, not a tenant's call.
    const parsed = parseToolPolicy(section.tool_approval);
    if (!parsed.ok) throw new ChaosError("invalid_argument", `${where}.tool_approval: ${parsed.problem}`);
    toolPolicy = section.tool_approval as ToolPolicyDocument;
  }
  return { spendPolicies: section.spend_policies ?? fallback.spendPolicies, toolPolicy };
}

/**
 * The reference configuration: the three reference spend policies for every tenant and no
 * tool-approval policy. Used when the operator gives no file.
 */
export function referenceOperatorPolicies(): OperatorPolicies {
  const policies: TenantPolicies = { spendPolicies: REFERENCE_SPEND_POLICIES, toolPolicy: undefined };
  return { forTenant: async () => policies, source: "reference policies (no CHAOS_CORE_LEDGER_POLICY_FILE)" };
}

/**
 * Parses an operator policy document:
 * `{"defaults": {"spend_policies": {...}, "tool_approval": {...}}, "tenants": {"acme": {...}}}`.
 * A tenant section replaces the defaults key by key; `defaults` replaces the reference
 * policies key by key. Throws `invalid_argument` naming the bad field.
 */
export function parseOperatorPolicies(value: unknown, source: string): OperatorPolicies {
  const parsed = fileSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ChaosError("invalid_argument", `${source}: ${issue.path.join(".") || "(document)"}: ${issue.message}`);
  }
  const reference: TenantPolicies = { spendPolicies: REFERENCE_SPEND_POLICIES, toolPolicy: undefined };
  const defaults = resolveSection(parsed.data.defaults, reference, `${source}: defaults`);
  const tenants = new Map<string, TenantPolicies>();
  for (const [tenant, section] of Object.entries(parsed.data.tenants ?? {})) {
    tenants.set(tenant, resolveSection(section, defaults, `${source}: tenants.${tenant}`));
  }
  return { forTenant: async (tenant) => tenants.get(tenant) ?? defaults, source };
}

/** Reads and parses the operator policy file; errors name the file and the field. */
export async function loadOperatorPolicies(path: string | undefined): Promise<OperatorPolicies> {
  if (!path) return referenceOperatorPolicies();
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new ChaosError("invalid_argument", `ledger policy file ${path} cannot be read: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ChaosError("invalid_argument", `ledger policy file ${path} is not JSON: ${(err as Error).message}`);
  }
  return parseOperatorPolicies(json, path);
}
