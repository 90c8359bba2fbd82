import { mostSpecificMatch } from "./capability-match.js";
import { defaultApprovalChannels, type ApprovalChannel, type ApprovalChannelsJson } from "./approval-channels.js";
import type { PolicyDocumentJson } from "./policy-document.js";
import { effectiveRisk, type Risk, type RiskLevel } from "./risk.js";

/** What needs an approval, as far as the choice of channels goes. */
export type ApprovalSubject =
  /** A capability step that policy answered with REQUIRE_APPROVAL. */
  | { readonly kind: "capability"; readonly name: string; readonly risk: Risk }
  /**
   * A spend or finance approval: `spendPolicy` is the ledger's spend policy (`equity`, `wire`,
   * an operator's name); `tool` the finance tool that asked, absent for a plain spend-gate spend.
   */
  | { readonly kind: "spend"; readonly spendPolicy: string; readonly tool?: string | undefined }
  /** A governance tool-approval receipt (`issue_approval_receipt`) at the tool policy's risk. */
  | { readonly kind: "tool"; readonly tool: string; readonly risk: Risk };

/** The path of the document entry that chose the channels, e.g. `approvalChannels.byRisk.high`. */
export type ChannelsRule = `approvalChannels.${string}`;

/** The channels that may answer an approval and the entry of the document that says so. */
export interface ApprovalChannelsDecision {
  readonly channels: readonly ApprovalChannel[];
  readonly matchedRule: ChannelsRule;
}

/**
 * A key of an operator-written map, looked up as an own property only: names such as
 * `constructor` are valid capability names and must not find `Object.prototype`'s.
 */
function entry(
  map: Readonly<Record<string, readonly ApprovalChannel[]>>,
  key: string | undefined,
): readonly ApprovalChannel[] | undefined {
  return key !== undefined && key !== "" && Object.hasOwn(map, key) ? map[key] : undefined;
}

function byRisk(section: ApprovalChannelsJson, risk: Risk): ApprovalChannelsDecision {
  // Unspecified risk counts as critical, as in the risk rules: unknown never means safe.
  const level: RiskLevel = effectiveRisk(risk);
  return { channels: section.byRisk[level], matchedRule: `approvalChannels.byRisk.${level}` };
}

/**
 * Which channels may answer an approval of `subject` under `doc`: a pure function, first match
 * wins.
 *
 * - capability: `capabilities[name]`, else `byRisk[risk]`;
 * - tool receipt: `byRisk[risk]`;
 * - spend: `spend.tools[tool]`, else `spend.policies[spendPolicy]`, else `spend.default`.
 *
 * An unspecified risk counts as critical.
 */
export function approvalChannelsFor(subject: ApprovalSubject, doc: PolicyDocumentJson): ApprovalChannelsDecision {
  const section = doc.approvalChannels;
  switch (subject.kind) {
    case "capability": {
      // The exact name beats a pattern, the longer prefix a shorter one (capability-match.ts).
      const match = mostSpecificMatch(Object.keys(section.capabilities), subject.name);
      const listed = match && entry(section.capabilities, match.entry);
      if (match && listed) return { channels: listed, matchedRule: `approvalChannels.capabilities.${match.entry}` };
      return byRisk(section, subject.risk);
    }
    case "tool":
      return byRisk(section, subject.risk);
    case "spend": {
      const forTool = entry(section.spend.tools, subject.tool);
      if (forTool) return { channels: forTool, matchedRule: `approvalChannels.spend.tools.${subject.tool}` };
      const forPolicy = entry(section.spend.policies, subject.spendPolicy);
      if (forPolicy) return { channels: forPolicy, matchedRule: `approvalChannels.spend.policies.${subject.spendPolicy}` };
      return { channels: section.spend.default, matchedRule: "approvalChannels.spend.default" };
    }
  }
}

/**
 * Every entry of the document that lists `client_elicitation` where the default leaves it out:
 * the operator's opt-in to let the requesting client's own form answer count. Accepted, but said
 * out loud (logged once per version, listed by GetPolicy and inspect). A `capabilities` entry is
 * always listed: policy does not know the capability's risk, and a per-capability opt-in is
 * exactly how a high-risk capability gets it.
 */
export function clientElicitationOptIns(doc: PolicyDocumentJson): Array<ChannelsRule | `rules[${number}].channels`> {
  const section = doc.approvalChannels;
  const defaults = defaultApprovalChannels();
  const paths: Array<ChannelsRule | `rules[${number}].channels`> = [];
  const check = (path: ChannelsRule | `rules[${number}].channels`, list: readonly ApprovalChannel[], byDefault: readonly ApprovalChannel[]) => {
    if (list.includes("client_elicitation") && !byDefault.includes("client_elicitation")) paths.push(path);
  };
  for (const level of ["low", "medium", "high", "critical"] as const) {
    check(`approvalChannels.byRisk.${level}`, section.byRisk[level], defaults.byRisk[level]);
  }
  for (const [name, list] of Object.entries(section.capabilities)) check(`approvalChannels.capabilities.${name}`, list, []);
  check("approvalChannels.spend.default", section.spend.default, defaults.spend.default);
  for (const [name, list] of Object.entries(section.spend.policies)) check(`approvalChannels.spend.policies.${name}`, list, []);
  for (const [name, list] of Object.entries(section.spend.tools)) check(`approvalChannels.spend.tools.${name}`, list, []);
  // A rule's channels, like a capabilities entry: policy does not know the risk of what it names.
  doc.rules.forEach((rule, i) => {
    if (rule.channels) check(`rules[${i}].channels`, rule.channels, []);
  });
  return paths;
}

/**
 * One sentence per {@link clientElicitationOptIns} entry, for logs, GetPolicy and inspect:
 * `approvalChannels.byRisk.high lists client_elicitation: ...`.
 */
export function approvalChannelWarnings(doc: PolicyDocumentJson): string[] {
  return clientElicitationOptIns(doc).map(
    (path) =>
      `${path} lists client_elicitation: the requesting client's own form answer approves these decisions, ` +
      `and an agent's host can give that answer without a person. Remove it unless that is intended.`,
  );
}

/**
 * Every `allow` rule, which waives the risk threshold's approval for the calls its condition holds
 * for (docs/policy-conditions.md §4): said out loud beside the channel opt-ins, in GetPolicy and
 * inspect, so a reviewer sees each place a person is no longer asked.
 */
export function allowRuleWarnings(doc: PolicyDocumentJson): string[] {
  return doc.rules.flatMap((rule, i) =>
    rule.effect === "allow"
      ? [
          `rules[${i}] allows ${rule.capability}${rule.when !== undefined ? ` when ${rule.when}` : ""}: it waives the ` +
            `approval riskRules.requireApprovalAtOrAbove would ask for those calls (never a denial or requireConfirmationFor).`,
        ]
      : [],
  );
}
