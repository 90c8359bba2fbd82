import { ChaosError, type CallContext, type Risk, type ServiceClient } from "@chaos-core/kit";
import { ApprovalChannel as PolicyChannel, Risk as PolicyRisk, type PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";

/**
 * The ways an answer can reach the ledger (docs/approvals.md §1), as the policy document names
 * them, in its fixed order.
 */
export const APPROVAL_CHANNELS = ["client_elicitation", "approver", "operator", "console"] as const;
export type ApprovalChannel = (typeof APPROVAL_CHANNELS)[number];

/**
 * What an answer accepts when policy names no channel this build can read (a policy service
 * older than channels): only a person with a credential of their own, never the client's form.
 */
export const PERSON_CHANNELS: readonly ApprovalChannel[] = ["approver", "operator", "console"];

/** What needs a person's answer, as far as the choice of channels goes. */
export type ChannelSubject =
  /** A spend or finance approval: the spend policy, and the finance tool when one asked. */
  | { readonly kind: "spend"; readonly spendPolicy: string; readonly tool?: string | undefined }
  /** A governance tool-approval receipt at the risk its tool-approval rule gives it. */
  | { readonly kind: "tool"; readonly tool: string; readonly risk: Risk };

/** Which channels may answer, and the policy document entry that says so. */
export interface ChannelDecision {
  readonly channels: readonly ApprovalChannel[];
  /** e.g. `approvalChannels.spend.policies.wire`. */
  readonly matchedRule: string;
  readonly policyVersion: number;
}

/**
 * Policy's answer to "who may approve this?". The ledger asks it for every spend, finance and
 * tool-receipt answer and refuses a channel it does not list; it never decides that itself.
 */
export interface ApprovalChannelSource {
  /** The channels policy allows for `subject` in the caller's tenant; `unavailable` when it cannot say. */
  channelsFor(call: CallContext, subject: ChannelSubject): Promise<ChannelDecision>;
}

const NAME_OF: Partial<Record<PolicyChannel, ApprovalChannel>> = {
  [PolicyChannel.CLIENT_ELICITATION]: "client_elicitation",
  [PolicyChannel.APPROVER]: "approver",
  [PolicyChannel.OPERATOR]: "operator",
  [PolicyChannel.CONSOLE]: "console",
};

const RISK: Readonly<Record<Risk, PolicyRisk>> = {
  low: PolicyRisk.LOW,
  medium: PolicyRisk.MEDIUM,
  high: PolicyRisk.HIGH,
  critical: PolicyRisk.CRITICAL,
};

/** How long the ledger waits for policy before it refuses to decide. */
const POLICY_TIMEOUT_MS = 5000;

/**
 * The policy service's `EvaluateApprovalChannels` behind {@link ApprovalChannelSource}: over
 * gRPC when the ledger runs alone (`POLICY_ADDR`), in-process in standalone. Called with the
 * caller's own context, so policy answers for the caller's tenant. Any failure is `unavailable`
 * (nothing is approved on a guess); a channel this build cannot read is dropped, and a list that
 * ends up empty is {@link PERSON_CHANNELS}.
 */
export function createPolicyChannelSource(policy: ServiceClient<typeof PolicyService>): ApprovalChannelSource {
  return {
    async channelsFor(call, subject) {
      const request =
        subject.kind === "spend"
          ? { subject: { case: "spend" as const, value: { spendPolicy: subject.spendPolicy, tool: subject.tool ?? "" } } }
          : { subject: { case: "tool" as const, value: { tool: subject.tool, risk: RISK[subject.risk] } } };
      let res;
      try {
        res = await policy.evaluateApprovalChannels(request, { ctx: call, timeoutMs: POLICY_TIMEOUT_MS });
      } catch (err) {
        const e = ChaosError.from(err);
        throw new ChaosError(
          "unavailable",
          `the policy service did not say which approval channels may answer, so nothing was approved or recorded as answered: ${e.code}: ${e.message}`,
          { cause: err },
        );
      }
      const named = APPROVAL_CHANNELS.filter((c) => res.channels.some((p) => NAME_OF[p] === c));
      return { channels: named.length > 0 ? named : PERSON_CHANNELS, matchedRule: res.matchedRule, policyVersion: Number(res.policyVersion) };
    },
  };
}

/** A channel refusal as recorded: who tried which channel, and what policy allows instead. */
export interface ChannelRefusal {
  readonly problem: string;
  /** The refusal entry's fields beside `code` and `problem`. */
  readonly recorded: Record<string, unknown>;
}

/** The fields an entry records about the channel decision an answer was checked against. */
export function channelFields(decision: ChannelDecision): Record<string, unknown> {
  return { allowed: [...decision.channels], channels_rule: decision.matchedRule, channels_policy_version: decision.policyVersion };
}

/**
 * Undefined when `channel` may answer under `decision`; otherwise why not, in words that name
 * what policy allows (`about` says what was answered, e.g. `spend request 12 (spend policy wire)`).
 */
export function channelRefusal(channel: ApprovalChannel, decision: ChannelDecision, about: string): ChannelRefusal | undefined {
  if (decision.channels.includes(channel)) return undefined;
  const why =
    channel === "client_elicitation"
      ? ": the requesting client answers its own forms, so its answer proves nothing about a person"
      : "";
  return {
    problem: `policy allows ${decision.channels.join(", ")} for ${about}, by rule ${decision.matchedRule}, not ${channel}${why}`,
    recorded: { channel, ...channelFields(decision) },
  };
}
