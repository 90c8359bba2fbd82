import { ChaosError, ChpFloat, contentHash, spendPoliciesSchema, type SpendPolicyConfig } from "@chaos-core/kit";
import { z } from "zod";

// The policy's shape is kit's: the policy service checks a tenant's policies when they are stored.
export { spendPoliciesSchema, spendPolicySchema } from "@chaos-core/kit";
export type { SpendPolicyConfig } from "@chaos-core/kit";

/**
 * Named spend policies: operator configuration per tenant (DESIGN.md "Governance rules": the
 * agent does not set its own limits). An agent may hand in a policy of its own only to
 * tighten one of these, through {@link tighten}.
 */

/**
 * The policy as the CHP gate reads it: the gate's own fields only. Options Chaos Core checks
 * before the gate (`require_confidence`) are not the gate's, so its claims and hashes stay
 * those of CHP Profile B.
 */
export function gatePolicy(policy: SpendPolicyConfig): Omit<SpendPolicyConfig, "require_confidence"> {
  const { require_confidence: _checkedBeforeTheGate, ...gate } = policy;
  return gate;
}

/**
 * Why `confidence` does not satisfy the policy's `require_confidence`, or undefined when it
 * does (or the policy does not require one). Null and absent are both "no confidence".
 */
export function missingConfidence(policy: SpendPolicyConfig, confidence: unknown, field: string): string | undefined {
  if (policy.require_confidence !== true || (confidence !== undefined && confidence !== null)) return undefined;
  return `the spend policy (version ${policy.version}) requires ${field}, a number from 0 to 1, and none was given; the gate did not run`;
}

/** The reference set (DESIGN.md; `ledger.md` "Spend gate"), used when an operator names none. */
export const REFERENCE_SPEND_POLICIES: Readonly<Record<"equity" | "wire" | "rebalance", SpendPolicyConfig>> = Object.freeze({
  equity: Object.freeze({
    version: "equity-1",
    max_notional: 500,
    daily_cap: 2500,
    hitl_threshold: 250,
    min_confidence: 0.55,
    allowed_actions: ["BUY", "SELL"],
    per_asset_limits: {},
  }),
  // Every wire goes to a human (threshold 0); any action.
  wire: Object.freeze({
    version: "wire-1",
    max_notional: 10_000,
    daily_cap: 25_000,
    hitl_threshold: 0,
    min_confidence: 0.7,
    allowed_actions: [],
    per_asset_limits: {},
  }),
  rebalance: Object.freeze({
    version: "rebalance-1",
    max_notional: 50_000,
    daily_cap: 100_000,
    hitl_threshold: 1000,
    min_confidence: 0.6,
    allowed_actions: [],
    per_asset_limits: {},
  }),
});

function issuePath(prefix: string, issue: z.core.$ZodIssue): string {
  return [prefix, ...issue.path.map(String)].join(".");
}

/**
 * Validates operator spend-policy configuration (a record of name → policy); throws
 * `invalid_argument` naming the first bad field, e.g. `spend_policies.equity.daily_cap: …`.
 */
export function parseSpendPolicies(raw: unknown): Record<string, SpendPolicyConfig> {
  const result = spendPoliciesSchema.safeParse(raw);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new ChaosError("invalid_argument", `${issuePath("spend_policies", issue)}: ${issue.message}`);
}

// What an agent may send: any subset of the policy's limits (an absent field keeps the
// operator's value). Numbers may be CHP floats or exact integers from parseChpJson.
// `version` is accepted and ignored: the agent does not name the policy in force.
const agentNumber = z
  .union([z.number(), z.instanceof(ChpFloat), z.bigint()])
  .transform((v) => Number(v))
  .refine((v) => Number.isFinite(v), "must be a finite number");
const agentPolicySchema = z
  .object({
    version: z.string().optional(),
    max_notional: agentNumber.optional(),
    daily_cap: agentNumber.optional(),
    hitl_threshold: agentNumber.optional(),
    min_confidence: agentNumber.optional(),
    allowed_actions: z.array(z.string()).optional(),
    per_asset_limits: z.record(z.string(), agentNumber).optional(),
    require_confidence: z.boolean().optional(),
  })
  .strict();

function looser(field: string, detail: string): ChaosError {
  return new ChaosError("policy_denied", `policy.${field}: ${detail}; an agent may only tighten the operator's spend policy`);
}

/**
 * Applies an agent-supplied spend policy on top of the operator's, accepting it only if it is
 * at least as strict on every field: `max_notional`, `daily_cap`, `hitl_threshold` and each
 * per-asset limit lower or equal (a new per-asset limit no higher than the operator's cap for
 * that asset); `min_confidence` higher or equal; `allowed_actions` a subset (when the operator
 * lists actions the agent cannot widen them to "any" with an empty list); no operator per-asset
 * limit removed; `require_confidence` kept when the operator sets it (an agent may add it). A field
 * the agent leaves out keeps the operator's value. A looser field throws
 * `policy_denied` naming it; a malformed one `invalid_argument`.
 *
 * The result keeps the operator's version with a suffix: `<version>+agent-<12 hex>`, the hex
 * being the start of the content hash of the effective limits. So a decision shows that an
 * agent-tightened policy was in force, and two different tightenings never share a version
 * (a receipt approved under one does not match the other).
 */
export function tighten(operatorPolicy: SpendPolicyConfig, agentPolicy: unknown): SpendPolicyConfig {
  const parsed = agentPolicySchema.safeParse(agentPolicy);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ChaosError("invalid_argument", `${issuePath("policy", issue)}: ${issue.message}`);
  }
  const agent = parsed.data;
  const op = operatorPolicy;

  const atMost = (field: "max_notional" | "daily_cap" | "hitl_threshold"): number => {
    const v = agent[field];
    if (v === undefined) return op[field];
    if (v > op[field]) throw looser(field, `${v} is above the operator's ${op[field]}`);
    return v;
  };
  const max_notional = atMost("max_notional");
  const daily_cap = atMost("daily_cap");
  const hitl_threshold = atMost("hitl_threshold");

  let min_confidence = op.min_confidence;
  if (agent.min_confidence !== undefined) {
    if (agent.min_confidence < op.min_confidence) {
      throw looser("min_confidence", `${agent.min_confidence} is below the operator's ${op.min_confidence}`);
    }
    min_confidence = agent.min_confidence;
  }

  let allowed_actions = [...op.allowed_actions];
  if (agent.allowed_actions !== undefined) {
    if (op.allowed_actions.length > 0) {
      // An empty list means "any action" to the gate: wider than any non-empty list.
      if (agent.allowed_actions.length === 0) throw looser("allowed_actions", `an empty list allows any action, the operator allows only ${op.allowed_actions.join(", ")}`);
      const extra = agent.allowed_actions.filter((a) => !op.allowed_actions.includes(a));
      if (extra.length > 0) throw looser("allowed_actions", `${extra.join(", ")} is not allowed by the operator`);
    }
    allowed_actions = [...new Set(agent.allowed_actions)];
  }

  let per_asset_limits: Record<string, number> = { ...op.per_asset_limits };
  if (agent.per_asset_limits !== undefined) {
    const limits = agent.per_asset_limits;
    for (const asset of Object.keys(op.per_asset_limits)) {
      if (!Object.hasOwn(limits, asset)) throw looser(`per_asset_limits.${asset}`, "removes the operator's limit");
    }
    per_asset_limits = {};
    for (const [asset, limit] of Object.entries(limits)) {
      const cap = Object.hasOwn(op.per_asset_limits, asset) ? op.per_asset_limits[asset]! : op.max_notional;
      if (limit > cap) throw looser(`per_asset_limits.${asset}`, `${limit} is above the operator's cap ${cap} for ${asset}`);
      per_asset_limits[asset] = limit;
    }
  }

  // Required stays required; an agent may add the requirement, never drop the operator's.
  if (op.require_confidence === true && agent.require_confidence === false) {
    throw looser("require_confidence", "false drops the operator's requirement of a confidence");
  }
  const requireConfidence = op.require_confidence === true || agent.require_confidence === true;

  // Only a requirement is part of the limits: a policy without one hashes (and is versioned) as before.
  const limits = { max_notional, daily_cap, hitl_threshold, min_confidence, allowed_actions, per_asset_limits, ...(requireConfidence ? { require_confidence: true } : {}) };
  return { version: `${op.version}+agent-${contentHash(limits).slice(0, 12)}`, ...limits };
}
