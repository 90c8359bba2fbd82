import { ChaosError, type CallContext } from "@chaos-core/kit";
import type { SpendPolicyConfig } from "../domain/spend-policies.js";
import type { LedgerCore } from "./ledger-core.js";

/**
 * The operator's spend policy `name` in the caller's tenant (an agent may only tighten it);
 * `not_found`, naming the policies there are, when the tenant has none of that name.
 */
export async function spendPolicyFor(core: LedgerCore, call: CallContext, name: string): Promise<SpendPolicyConfig> {
  const policies = (await core.policies.forTenant(call.tenant)).spendPolicies;
  if (!Object.hasOwn(policies, name)) {
    throw new ChaosError("not_found", `no spend policy "${name}" for this tenant; the operator configured: ${Object.keys(policies).join(", ") || "none"}`);
  }
  return policies[name]!;
}

/**
 * The operator's `require_confidence`, checked before the CHP gate: a spend without a
 * confidence is refused, and the refusal recorded, instead of the gate skipping
 * `min-confidence`. `problem` is domain `missingConfidence`'s answer; undefined passes.
 */
export async function requireConfidence(core: LedgerCore, call: CallContext, about: { policy: string; version: string; tool?: string }, problem: string | undefined): Promise<void> {
  if (problem === undefined) return;
  const entry = await core.record(call, {
    type: "spend_gate.refused",
    policy: about.policy,
    policy_version: about.version,
    ...(about.tool ? { tool: about.tool } : {}),
    code: "confidence_required",
    problem,
  });
  throw new ChaosError("policy_denied", `confidence_required: ${problem} (spend policy "${about.policy}"; refusal recorded as ledger entry ${entry.seq})`);
}
