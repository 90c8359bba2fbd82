import { timestampDate } from "@bufbuild/protobuf/wkt";
import { ATTR, ChaosError, withSpan } from "@chaos-core/kit";
import { ApprovalChannel as PolicyChannel, Decision, Risk } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { Capability, CapabilityFacts, CapabilityRisk } from "../capabilities/capability.js";
import { LEGACY_CHANNELS } from "./approvals.js";
import { driftRefusal } from "./capability-guards.js";
import type { ExecutorDeps } from "./executor-deps.js";
import type { ApprovalChannel, ImpliedDecision, PolicyVerdict } from "./step-types.js";

// Asking policy about a step: the policy service's answer as a verdict, and for a capability
// that implies others, the strictest of its own and theirs.

const RISK: Record<CapabilityRisk, Risk> = {
  low: Risk.LOW,
  medium: Risk.MEDIUM,
  high: Risk.HIGH,
  critical: Risk.CRITICAL,
};

const VERDICT: Partial<Record<Decision, PolicyVerdict["decision"]>> = {
  [Decision.ALLOW]: "ALLOW",
  [Decision.DENY]: "DENY",
  [Decision.REQUIRE_APPROVAL]: "REQUIRE_APPROVAL",
};

const CHANNEL: Partial<Record<PolicyChannel, ApprovalChannel>> = {
  [PolicyChannel.CLIENT_ELICITATION]: "client_elicitation",
  [PolicyChannel.APPROVER]: "approver",
  [PolicyChannel.OPERATOR]: "operator",
  [PolicyChannel.CONSOLE]: "console",
};

/**
 * Policy's channels for a REQUIRE_APPROVAL, as names. A channel this build cannot read is
 * dropped (it could not be answered through anyway); a list that ends up empty (a policy service
 * older than channels) takes {@link LEGACY_CHANNELS}: never the client's own answer by default.
 */
function channelsFrom(channels: readonly PolicyChannel[]): readonly ApprovalChannel[] {
  const named = [...new Set(channels.map((c) => CHANNEL[c]).filter((c): c is ApprovalChannel => c !== undefined))];
  return named.length > 0 ? named : LEGACY_CHANNELS;
}

/**
 * Policy's decision for one capability at its risk, with what rules' conditions read about it:
 * the step's canonical arguments, its upstream and its annotations (the caller and the tenant
 * travel in the signed call context).
 */
async function evaluate(capability: Capability, facts: CapabilityFacts, argumentsJson: string, deps: ExecutorDeps): Promise<PolicyVerdict> {
  const res = await deps.policy.evaluate(
    {
      capability: capability.name,
      risk: RISK[capability.risk],
      facts: { httpHost: facts.httpHost ?? "", attributes: { ...facts.attributes } },
      argumentsJson,
      upstream: capability.upstream?.name ?? "",
      annotations: { ...capability.annotations, title: capability.upstream?.title ?? "" },
    },
    { ctx: deps.call, ...(deps.signal ? { signal: deps.signal } : {}) },
  );
  const decision = VERDICT[res.decision];
  // An answer this build cannot read is not permission: fail closed.
  if (!decision) throw new ChaosError("internal", `policy answered an unknown decision (${res.decision})`);
  const verdict: PolicyVerdict = {
    decision,
    matchedRule: res.matchedRule,
    reason: res.reason,
    policyVersion: Number(res.policyVersion),
    // What a rule's condition said, recorded with the decision (docs/policy-conditions.md §6).
    ...(res.condition ? { condition: res.condition } : {}),
    ...(res.conditionError ? { conditionError: res.conditionError } : {}),
    ...(res.evaluatedAt ? { evaluatedAt: timestampDate(res.evaluatedAt).toISOString() } : {}),
  };
  if (decision !== "REQUIRE_APPROVAL") return verdict;
  return { ...verdict, approvalChannels: channelsFrom(res.approvalChannels), channelsRule: res.channelsRule };
}

const STRICTNESS: Record<PolicyVerdict["decision"], number> = { ALLOW: 0, REQUIRE_APPROVAL: 1, DENY: 2 };

/**
 * The strictest of a capability's own verdict and its implied ones (the capability's own wins a
 * tie). Verdicts under different policy versions fail closed: they were not one decision. When
 * several require approval, only channels every one of them accepts count.
 */
function strictest(capability: Capability, own: PolicyVerdict, implied: readonly ImpliedDecision[]): PolicyVerdict {
  for (const i of implied) {
    if (i.verdict.policyVersion !== own.policyVersion) {
      throw new ChaosError(
        "conflict",
        `policy changed while ${capability.name} was being decided (version ${own.policyVersion} for it, ` +
          `${i.verdict.policyVersion} for ${i.capability}, which it implies); nothing ran, retry`,
      );
    }
  }
  const top = implied.reduce<ImpliedDecision | undefined>(
    (best, i) => (STRICTNESS[i.verdict.decision] > STRICTNESS[(best?.verdict ?? own).decision] ? i : best),
    undefined,
  );
  const held = top?.verdict ?? own;
  const base: PolicyVerdict = {
    decision: held.decision,
    matchedRule: top ? `${top.capability}: ${held.matchedRule}` : held.matchedRule,
    reason: held.reason,
    policyVersion: own.policyVersion,
    implied,
    ...(top ? { decidedBy: top.capability } : {}),
  };
  if (held.decision !== "REQUIRE_APPROVAL") return base;
  const asking = [own, ...implied.map((i) => i.verdict)].filter((v) => v.decision === "REQUIRE_APPROVAL");
  const channels = (held.approvalChannels ?? LEGACY_CHANNELS).filter((c) =>
    asking.every((v) => (v.approvalChannels ?? LEGACY_CHANNELS).includes(c)),
  );
  if (channels.length === 0) {
    throw new ChaosError(
      "failed_precondition",
      `policy's approval channels for ${capability.name} and what it implies (${implied.map((i) => i.capability).join(", ")}) ` +
        "have none in common, so no approval could satisfy them all; nothing ran",
    );
  }
  return { ...base, approvalChannels: channels, ...(held.channelsRule ? { channelsRule: held.channelsRule } : {}) };
}

/**
 * Policy's verdict for a call: the capability's own decision, and for one that implies others,
 * the strictest of its own and theirs, each implied capability evaluated at its registered risk
 * with the same facts and arguments (docs/approvals.md §7).
 */
export function askPolicy(capability: Capability, facts: CapabilityFacts, argumentsJson: string, deps: ExecutorDeps): Promise<PolicyVerdict> {
  // The loop's policy stage: its own span, whichever step (plan, explicit, bookkeeping) asks.
  return withSpan("chaoscore.cognition.policy", { [ATTR.capability]: capability.name }, async (span) => {
    const verdict = await decideStrictest(capability, facts, argumentsJson, deps);
    span.setAttributes({ [ATTR.decision]: verdict.decision, [ATTR.policyVersion]: verdict.policyVersion });
    return verdict;
  });
}

async function decideStrictest(capability: Capability, facts: CapabilityFacts, argumentsJson: string, deps: ExecutorDeps): Promise<PolicyVerdict> {
  const decided = await evaluate(capability, facts, argumentsJson, deps);
  // A rule the served pins leave unable to govern this tool denies it (docs/policy-conditions.md §5).
  const own = (await deps.ruleArgs?.refusal(capability, decided, deps)) ?? decided;
  if (own.decision === "DENY") return own;
  if (!capability.implies || capability.implies.length === 0) return own;
  const implied: ImpliedDecision[] = [];
  for (const name of capability.implies) {
    const target = deps.registry.get(name);
    // The registry refuses this at build time; a registry built some other way still fails closed.
    if (!target) throw new ChaosError("failed_precondition", `${capability.name} implies "${name}", which is not registered; nothing ran`);
    // Its policy is asked at its registered risk: a definition that drifted from its contract is not one to trust for that.
    const drifted = driftRefusal(name, deps);
    if (drifted) throw drifted;
    // With the step's own arguments: the implied capability's conditions read the call that implies it.
    implied.push({ capability: name, risk: target.risk, verdict: await evaluate(target, facts, argumentsJson, deps) });
  }
  return strictest(capability, own, implied);
}
