import { z } from "zod";
import {
  Decision,
  Risk,
  type ApprovalChannelRules,
  type ChannelSet,
  type GetPolicyResponse,
  type PolicyDocument,
  type PolicyRule,
} from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { Capability } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { evaluateChannels, policyChannelNames, policyRisk } from "../approvals/policy-channels.js";
import type { ToolContext } from "../definitions/tool.js";
import { isoTime } from "../clients/timestamps.js";

// `chaoscore_inspect {what: policy}` and the `chaoscore://policy` resource: the tenant's policy
// document in policy.json's vocabulary, and what it would decide for a call (docs/policy-conditions.md §7).

const decisionOutput = z.object({
  capability: z.string(),
  risk: z.string().describe("The risk the capability was evaluated at"),
  decision: z.enum(["ALLOW", "DENY", "REQUIRE_APPROVAL", "UNSPECIFIED"]),
  matched_rule: z.string(),
  reason: z.string(),
  policy_version: z.number(),
  approval_channels: z
    .array(z.string())
    .optional()
    .describe("With REQUIRE_APPROVAL: the channels that may give the approval (client_elicitation, approver, operator, console)"),
  channels_rule: z.string().optional().describe("The approvalChannels entry (or rules[i].channels) that chose them"),
  condition: z.string().optional().describe("When a rule decided (matched_rule rules[i]): its CEL condition"),
  condition_error: z
    .string()
    .optional()
    .describe("Why a condition errored: the deciding rule's (it applied, failing closed) or an allow rule's that was not applied"),
  evaluated_at: z.string().optional().describe("When a condition was evaluated: the time it saw"),
  note: z.string().optional(),
});

export const policyOutput = z.object({
  document: z.record(z.string(), z.unknown()).describe("The tenant's policy document, in policy.json's vocabulary"),
  version: z.number(),
  updated_at: z.string().optional(),
  source: z.string(),
  last_error: z.string().optional().describe("Why the latest edit was not loaded; the document above stays in force"),
  warnings: z
    .array(z.string())
    .optional()
    .describe("Choices in the document that weaken a default, e.g. client_elicitation opted in for high risk"),
  decision: decisionOutput.optional().describe("The decision for `capability`, when one was given"),
  spend_decision: z
    .object({
      spend_policy: z.string(),
      tool: z.string().optional(),
      approval_channels: z.array(z.string()).describe("The channels that may approve a spend under it (client_elicitation, approver, operator, console)"),
      matched_rule: z.string().describe("The approvalChannels entry that chose them, e.g. approvalChannels.spend.policies.wire"),
      policy_version: z.number(),
    })
    .optional()
    .describe("Who may approve a spend under `spend_policy` (by `tool`, when given), when one was given"),
});

/** A risk threshold as operators write it in policy.json; an unset threshold is "never". */
function thresholdName(risk: Risk): string {
  return risk === Risk.UNSPECIFIED ? "never" : Risk[risk].toLowerCase();
}

function channelMapView(map: Readonly<Record<string, ChannelSet>>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(map).map(([key, set]) => [key, policyChannelNames(set.channels)]));
}

/** The approvalChannels section as policy.json writes it; the policy service fills in every default. */
function approvalChannelsView(rules: ApprovalChannelRules): Record<string, unknown> {
  return {
    byRisk: {
      low: policyChannelNames(rules.low?.channels ?? []),
      medium: policyChannelNames(rules.medium?.channels ?? []),
      high: policyChannelNames(rules.high?.channels ?? []),
      critical: policyChannelNames(rules.critical?.channels ?? []),
    },
    capabilities: channelMapView(rules.capabilities),
    spend: {
      default: policyChannelNames(rules.spendDefault?.channels ?? []),
      policies: channelMapView(rules.spendPolicies),
      tools: channelMapView(rules.spendTools),
    },
  };
}

const EFFECT_NAMES: Partial<Record<Decision, string>> = {
  [Decision.ALLOW]: "allow",
  [Decision.DENY]: "deny",
  [Decision.REQUIRE_APPROVAL]: "require_approval",
};

/** A conditional rule as policy.json writes it. */
function ruleView(rule: PolicyRule): Record<string, unknown> {
  return {
    capability: rule.capability,
    effect: EFFECT_NAMES[rule.effect] ?? Decision[rule.effect],
    ...(rule.channels.length > 0 ? { channels: policyChannelNames(rule.channels) } : {}),
    ...(rule.when ? { when: rule.when } : {}),
    ...(rule.description ? { description: rule.description } : {}),
  };
}

/** The policy document in the vocabulary of policy.json, so what inspect shows can be pasted back. */
function documentView(doc: PolicyDocument): Record<string, unknown> {
  return {
    allowedCapabilities: doc.allowedCapabilities,
    deniedCapabilities: doc.deniedCapabilities,
    requireConfirmationFor: doc.requireConfirmationFor,
    httpAllowedDomains: doc.httpAllowedDomains,
    ...(doc.riskRules
      ? {
          riskRules: {
            requireApprovalAtOrAbove: thresholdName(doc.riskRules.requireApprovalAtOrAbove),
            denyAtOrAbove: thresholdName(doc.riskRules.denyAtOrAbove),
          },
        }
      : {}),
    ...(doc.approvalChannels ? { approvalChannels: approvalChannelsView(doc.approvalChannels) } : {}),
    rules: doc.rules.map(ruleView),
  };
}

/** The tenant's policy as `what=policy` and the `chaoscore://policy` resource show it. */
export function policyView(res: GetPolicyResponse): z.output<typeof policyOutput> {
  const updated = isoTime(res.updatedAt);
  return {
    document: res.document ? documentView(res.document) : {},
    version: Number(res.version),
    ...(updated ? { updated_at: updated } : {}),
    source: res.source,
    ...(res.lastError ? { last_error: res.lastError } : {}),
    ...(res.warnings.length > 0 ? { warnings: [...res.warnings] } : {}),
  };
}

/** The capability as the registry has it (the source of its risk, annotations and upstream), or undefined. */
async function registered(ctx: ToolContext, capability: string): Promise<Capability | undefined> {
  const res = await ctx.deps.cognition.listCapabilities({}, { ctx: ctx.call, signal: ctx.signal });
  return res.capabilities.find((c) => c.name === capability);
}

/** What policy would decide for `capability` called with `args` by this caller, now: nothing runs. */
async function decisionFor(ctx: ToolContext, capability: string, args: Record<string, unknown> | undefined): Promise<z.output<typeof decisionOutput>> {
  const opts = { ctx: ctx.call, signal: ctx.signal };
  const found = await registered(ctx, capability);
  const risk = found ? policyRisk(found.risk) : Risk.UNSPECIFIED;
  const a = found?.annotations;
  const decision = await ctx.deps.policy.evaluate(
    {
      capability,
      risk,
      argumentsJson: args ? JSON.stringify(args) : "",
      upstream: found?.upstream?.upstream ?? "",
      ...(a
        ? {
            annotations: {
              title: found?.upstream?.title ?? "",
              readOnlyHint: a.readOnlyHint,
              destructiveHint: a.destructiveHint,
              idempotentHint: a.idempotentHint,
              openWorldHint: a.openWorldHint,
            },
          }
        : {}),
    },
    opts,
  );
  const evaluatedAt = isoTime(decision.evaluatedAt);
  return {
    capability,
    risk: Risk[risk],
    decision: Decision[decision.decision] as z.output<typeof decisionOutput>["decision"],
    matched_rule: decision.matchedRule,
    reason: decision.reason,
    policy_version: Number(decision.policyVersion),
    ...(decision.decision === Decision.REQUIRE_APPROVAL
      ? { approval_channels: policyChannelNames(decision.approvalChannels), channels_rule: decision.channelsRule }
      : {}),
    ...(decision.condition ? { condition: decision.condition } : {}),
    ...(decision.conditionError ? { condition_error: decision.conditionError } : {}),
    ...(evaluatedAt ? { evaluated_at: evaluatedAt } : {}),
    ...(found === undefined
      ? {
          note:
            "This is not a registered capability (what=capabilities lists them), so it was evaluated with " +
            "risk UNSPECIFIED, which risk rules count as critical.",
        }
      : {}),
  };
}

/**
 * `chaoscore_inspect {what: policy}`: the tenant's document; with `capability` (and `args`), what
 * policy would decide for this caller; with `spend`, who may approve such a spend.
 */
export async function inspectPolicy(
  ctx: ToolContext,
  capability: string | undefined,
  args: Record<string, unknown> | undefined,
  spend?: { policy: string; tool?: string | undefined },
): Promise<z.output<typeof policyOutput>> {
  const total = 1 + (capability ? 1 : 0) + (spend ? 1 : 0);
  const res = await ctx.deps.policy.getPolicy({}, { ctx: ctx.call, signal: ctx.signal });
  await ctx.progress(1, total, "read the policy document");
  const policy: z.output<typeof policyOutput> = policyView(res);
  if (capability) {
    policy.decision = await decisionFor(ctx, capability, args);
    await ctx.progress(2, total, "evaluated the capability");
  }
  if (spend) {
    const channels = await evaluateChannels(ctx, { kind: "spend", spendPolicy: spend.policy, tool: spend.tool });
    await ctx.progress(total, total, "evaluated the spend's approval channels");
    policy.spend_decision = {
      spend_policy: spend.policy,
      ...(spend.tool ? { tool: spend.tool } : {}),
      approval_channels: channels.channels,
      matched_rule: channels.matchedRule,
      policy_version: channels.policyVersion,
    };
  }
  return policy;
}
