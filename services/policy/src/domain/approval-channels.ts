/**
 * The ways a REQUIRE_APPROVAL can be answered (docs/approvals.md §1), in their canonical order:
 * stored lists follow it, so a reordered list is the same document.
 *
 * - `client_elicitation`: the requesting session's client answers a form. Its own host answers
 *   it, so it proves nothing about a person; by default it counts only below high risk.
 * - `approver`: a principal holding the approver role, with its own credential.
 * - `operator`: the local admin endpoint (`chaos-core approvals …`).
 * - `console`: the approval web page, signed in with an approver credential.
 */
export const APPROVAL_CHANNELS = ["client_elicitation", "approver", "operator", "console"] as const;

/** One approval channel. */
export type ApprovalChannel = (typeof APPROVAL_CHANNELS)[number];

/** True when `value` names an approval channel. */
export function isApprovalChannel(value: unknown): value is ApprovalChannel {
  return typeof value === "string" && (APPROVAL_CHANNELS as readonly string[]).includes(value);
}

/** The channels of `list`, once each, in the canonical order. */
export function orderChannels(list: readonly ApprovalChannel[]): ApprovalChannel[] {
  return APPROVAL_CHANNELS.filter((channel) => list.includes(channel));
}

/** Channels where a person answers with a credential of their own. */
const PERSON_CHANNELS: readonly ApprovalChannel[] = ["approver", "operator", "console"];

/**
 * The default `approvalChannels` section: every channel below high risk; at high and critical
 * risk and for every spend only channels where a person answers with their own credential, so a
 * client that answers its own forms cannot approve what matters.
 */
export function defaultApprovalChannels(): ApprovalChannelsJson {
  return {
    byRisk: {
      low: [...APPROVAL_CHANNELS],
      medium: [...APPROVAL_CHANNELS],
      high: [...PERSON_CHANNELS],
      critical: [...PERSON_CHANNELS],
    },
    capabilities: {},
    spend: { default: [...PERSON_CHANNELS], policies: {}, tools: {} },
  };
}

/** The `approvalChannels` section of a policy document, every default applied. */
export interface ApprovalChannelsJson {
  readonly byRisk: Readonly<Record<"low" | "medium" | "high" | "critical", ApprovalChannel[]>>;
  readonly capabilities: Readonly<Record<string, ApprovalChannel[]>>;
  readonly spend: {
    readonly default: ApprovalChannel[];
    readonly policies: Readonly<Record<string, ApprovalChannel[]>>;
    readonly tools: Readonly<Record<string, ApprovalChannel[]>>;
  };
}
