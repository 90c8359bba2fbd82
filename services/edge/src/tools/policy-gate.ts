import { ChaosError } from "@chaos-core/kit";
import { Decision, type EvaluateResponse, type Risk } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { ToolContext } from "./define.js";

/**
 * Asks policy whether `capability` may run for the caller, before anything else happens.
 * ALLOW returns the decision; DENY and REQUIRE_APPROVAL throw the typed errors a client can
 * branch on; anything else fails closed.
 */
export async function requireAllowed(ctx: ToolContext, capability: string, risk: Risk): Promise<EvaluateResponse> {
  const res = await ctx.deps.policy.evaluate({ capability, risk }, { ctx: ctx.call, signal: ctx.signal });
  const rule = `rule ${res.matchedRule || "(none)"}, policy version ${res.policyVersion}`;
  const fields = { capability, decision: Decision[res.decision], matchedRule: res.matchedRule, policyVersion: Number(res.policyVersion) };
  switch (res.decision) {
    case Decision.ALLOW:
      await ctx.log("debug", `policy allows ${capability}`, fields);
      return res;
    case Decision.DENY:
      await ctx.log("warning", `policy denies ${capability}`, fields);
      throw new ChaosError("policy_denied", `${capability} is denied by policy (${rule}): ${res.reason}`);
    case Decision.REQUIRE_APPROVAL:
      await ctx.log("warning", `policy requires approval for ${capability}`, fields);
      // Approvals (receipts, elicitation, the operator path) arrive with the ledger service;
      // until then the honest answer is that this call cannot run, not a flag to set.
      throw new ChaosError(
        "approval_required",
        `${capability} needs a human approval under policy (${rule}): ${res.reason}. ` +
          "No approval path exists yet for this tool, so it cannot run; an operator can change the policy.",
      );
    default:
      throw new ChaosError("internal", `policy returned no decision for ${capability}; refusing to run it`);
  }
}
