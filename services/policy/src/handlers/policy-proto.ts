import { create } from "@bufbuild/protobuf";
import {
  ApprovalChannel as ProtoApprovalChannel,
  ApprovalChannelRulesSchema,
  ChannelSetSchema,
  Decision as ProtoDecision,
  PolicyDocumentSchema,
  Risk as ProtoRisk,
  type ApprovalChannelRules,
  type ChannelSet,
  type PolicyDocument,
  type PolicyRule,
} from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { ApprovalChannel, ApprovalChannelsJson } from "../domain/approval-channels.js";
import type { Decision } from "../domain/engine.js";
import { validatePolicyDocument, type PolicyDocumentJson, type PolicyRuleJson, type RuleEffect } from "../domain/policy-document.js";
import type { Risk, RiskThreshold } from "../domain/risk.js";

const RISK_FROM_PROTO: Partial<Record<number, Exclude<Risk, "unspecified">>> = {
  [ProtoRisk.LOW]: "low",
  [ProtoRisk.MEDIUM]: "medium",
  [ProtoRisk.HIGH]: "high",
  [ProtoRisk.CRITICAL]: "critical",
};

const RISK_TO_PROTO: Record<Risk, ProtoRisk> = {
  unspecified: ProtoRisk.UNSPECIFIED,
  low: ProtoRisk.LOW,
  medium: ProtoRisk.MEDIUM,
  high: ProtoRisk.HIGH,
  critical: ProtoRisk.CRITICAL,
};

/**
 * The domain risk of a proto risk. An enum value this build does not know (a newer client)
 * becomes `unspecified`, which the engine counts as critical: unknown never means safe.
 */
export function riskFromProto(risk: ProtoRisk): Risk {
  return RISK_FROM_PROTO[risk] ?? "unspecified";
}

/** The proto risk of a domain risk. */
export function riskToProto(risk: Risk): ProtoRisk {
  return RISK_TO_PROTO[risk];
}

const DECISION_TO_PROTO: Record<Decision, ProtoDecision> = {
  ALLOW: ProtoDecision.ALLOW,
  DENY: ProtoDecision.DENY,
  REQUIRE_APPROVAL: ProtoDecision.REQUIRE_APPROVAL,
};

/** The proto decision of a domain decision. */
export function decisionToProto(decision: Decision): ProtoDecision {
  return DECISION_TO_PROTO[decision];
}

/**
 * The domain decision of a proto decision. `DECISION_UNSPECIFIED` (or an unknown value) becomes
 * DENY, so a caller that receives something it cannot read fails closed.
 */
export function decisionFromProto(decision: ProtoDecision): Decision {
  if (decision === ProtoDecision.ALLOW) return "ALLOW";
  if (decision === ProtoDecision.REQUIRE_APPROVAL) return "REQUIRE_APPROVAL";
  return "DENY";
}

/** In a proto document, `RISK_UNSPECIFIED` switches a risk rule off (see policy.proto). */
function thresholdToProto(threshold: RiskThreshold): ProtoRisk {
  return threshold === "never" ? ProtoRisk.UNSPECIFIED : RISK_TO_PROTO[threshold];
}

function thresholdFromProto(risk: ProtoRisk): RiskThreshold | number {
  if (risk === ProtoRisk.UNSPECIFIED) return "never";
  // An unknown number is passed through so validation rejects it and names the field.
  return RISK_FROM_PROTO[risk] ?? risk;
}

const CHANNEL_TO_PROTO: Record<ApprovalChannel, ProtoApprovalChannel> = {
  client_elicitation: ProtoApprovalChannel.CLIENT_ELICITATION,
  approver: ProtoApprovalChannel.APPROVER,
  operator: ProtoApprovalChannel.OPERATOR,
  console: ProtoApprovalChannel.CONSOLE,
};

const CHANNEL_FROM_PROTO: Partial<Record<number, ApprovalChannel>> = {
  [ProtoApprovalChannel.CLIENT_ELICITATION]: "client_elicitation",
  [ProtoApprovalChannel.APPROVER]: "approver",
  [ProtoApprovalChannel.OPERATOR]: "operator",
  [ProtoApprovalChannel.CONSOLE]: "console",
};

/** The proto channels of domain channels, in the same order. */
export function approvalChannelsToProto(channels: readonly ApprovalChannel[]): ProtoApprovalChannel[] {
  return channels.map((channel) => CHANNEL_TO_PROTO[channel]);
}

/**
 * The domain channels of proto channels. `APPROVAL_CHANNEL_UNSPECIFIED` and values this build
 * does not know are dropped: a caller never counts an answer on a channel it cannot name.
 */
export function approvalChannelsFromProto(channels: readonly ProtoApprovalChannel[]): ApprovalChannel[] {
  return channels.flatMap((channel) => {
    const name = CHANNEL_FROM_PROTO[channel];
    return name ? [name] : [];
  });
}

function channelSetToProto(channels: readonly ApprovalChannel[]): ChannelSet {
  return create(ChannelSetSchema, { channels: approvalChannelsToProto(channels) });
}

function channelMapToProto(map: Readonly<Record<string, readonly ApprovalChannel[]>>): Record<string, ChannelSet> {
  return Object.fromEntries(Object.entries(map).map(([key, list]) => [key, channelSetToProto(list)]));
}

function approvalChannelRulesToProto(section: ApprovalChannelsJson): ApprovalChannelRules {
  return create(ApprovalChannelRulesSchema, {
    low: channelSetToProto(section.byRisk.low),
    medium: channelSetToProto(section.byRisk.medium),
    high: channelSetToProto(section.byRisk.high),
    critical: channelSetToProto(section.byRisk.critical),
    capabilities: channelMapToProto(section.capabilities),
    spendDefault: channelSetToProto(section.spend.default),
    spendPolicies: channelMapToProto(section.spend.policies),
    spendTools: channelMapToProto(section.spend.tools),
  });
}

/**
 * A proto channel set in the document's vocabulary, for validation. Unlike
 * {@link approvalChannelsFromProto}, an unknown value is kept (as "unspecified" or its number)
 * so validation rejects the list and names the element, instead of silently narrowing it.
 */
function channelSetFromProto(set: ChannelSet): string[] {
  return channelNamesFromProto(set.channels);
}

function channelNamesFromProto(channels: readonly ProtoApprovalChannel[]): string[] {
  return channels.map((channel) =>
    channel === ProtoApprovalChannel.UNSPECIFIED ? "unspecified" : (CHANNEL_FROM_PROTO[channel] ?? String(channel)),
  );
}

function channelMapFromProto(map: Readonly<Record<string, ChannelSet>>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(map).map(([key, set]) => [key, channelSetFromProto(set)]));
}

/** The `approvalChannels` JSON of a proto section: unset sets are left out, so they take the defaults. */
function approvalChannelRulesFromProto(rules: ApprovalChannelRules): Record<string, unknown> {
  const risk = (["low", "medium", "high", "critical"] as const).flatMap((level) => {
    const set = rules[level];
    return set ? [[level, channelSetFromProto(set)] as const] : [];
  });
  return {
    byRisk: Object.fromEntries(risk),
    capabilities: channelMapFromProto(rules.capabilities),
    spend: {
      ...(rules.spendDefault ? { default: channelSetFromProto(rules.spendDefault) } : {}),
      policies: channelMapFromProto(rules.spendPolicies),
      tools: channelMapFromProto(rules.spendTools),
    },
  };
}

/** The proto form of a policy document. */
export function policyDocumentToProto(doc: PolicyDocumentJson): PolicyDocument {
  return create(PolicyDocumentSchema, {
    allowedCapabilities: [...doc.allowedCapabilities],
    deniedCapabilities: [...doc.deniedCapabilities],
    requireConfirmationFor: [...doc.requireConfirmationFor],
    httpAllowedDomains: [...doc.httpAllowedDomains],
    riskRules: {
      requireApprovalAtOrAbove: thresholdToProto(doc.riskRules.requireApprovalAtOrAbove),
      denyAtOrAbove: thresholdToProto(doc.riskRules.denyAtOrAbove),
    },
    approvalChannels: approvalChannelRulesToProto(doc.approvalChannels),
    rules: doc.rules.map(ruleToProto),
  });
}

const EFFECT_TO_PROTO: Record<RuleEffect, ProtoDecision> = {
  allow: ProtoDecision.ALLOW,
  deny: ProtoDecision.DENY,
  require_approval: ProtoDecision.REQUIRE_APPROVAL,
};

function ruleToProto(rule: PolicyRuleJson) {
  return {
    capability: rule.capability,
    effect: EFFECT_TO_PROTO[rule.effect],
    channels: approvalChannelsToProto(rule.channels ?? []),
    when: rule.when ?? "",
    description: rule.description ?? "",
  };
}

/** A proto rule as the document's JSON; an unset or unknown effect is left for the schema to refuse by name. */
function ruleFromProto(rule: PolicyRule): Record<string, unknown> {
  const effect = (Object.keys(EFFECT_TO_PROTO) as RuleEffect[]).find((e) => EFFECT_TO_PROTO[e] === rule.effect) ?? ProtoDecision[rule.effect] ?? String(rule.effect);
  return {
    capability: rule.capability,
    effect,
    ...(rule.channels.length > 0 ? { channels: channelNamesFromProto(rule.channels) } : {}),
    ...(rule.when !== "" ? { when: rule.when } : {}),
    ...(rule.description !== "" ? { description: rule.description } : {}),
  };
}

/**
 * Validates a proto policy document through the same schema as a `policy.json` file. An absent
 * `risk_rules` takes the default rules (approval at high and above); a present one maps
 * `RISK_UNSPECIFIED` to `never`, as policy.proto documents. An absent `approval_channels`, or an
 * unset channel set in it, takes the default channels; a set but empty one is refused.
 * @throws PolicyDocumentError naming `source` and each bad field.
 */
export function policyDocumentFromProto(doc: PolicyDocument, source: string): PolicyDocumentJson {
  return validatePolicyDocument(
    {
      allowedCapabilities: doc.allowedCapabilities,
      deniedCapabilities: doc.deniedCapabilities,
      requireConfirmationFor: doc.requireConfirmationFor,
      httpAllowedDomains: doc.httpAllowedDomains,
      ...(doc.riskRules
        ? {
            riskRules: {
              requireApprovalAtOrAbove: thresholdFromProto(doc.riskRules.requireApprovalAtOrAbove),
              denyAtOrAbove: thresholdFromProto(doc.riskRules.denyAtOrAbove),
            },
          }
        : {}),
      ...(doc.approvalChannels ? { approvalChannels: approvalChannelRulesFromProto(doc.approvalChannels) } : {}),
      rules: doc.rules.map(ruleFromProto),
    },
    source,
  );
}
