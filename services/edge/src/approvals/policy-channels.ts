import { ApprovalChannel, Risk } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { ToolContext } from "../definitions/tool.js";

/** Policy's channels (its `ApprovalChannel` enum) as policy.json names them (`CLIENT_ELICITATION` → `client_elicitation`). */
export function policyChannelNames(channels: readonly ApprovalChannel[]): string[] {
  return channels.map((c) => (ApprovalChannel[c] ?? String(c)).toLowerCase());
}

/** A risk level as policy's enum; anything else is UNSPECIFIED, which policy treats as critical. */
export function policyRisk(name: string): Risk {
  switch (name) {
    case "low":
      return Risk.LOW;
    case "medium":
      return Risk.MEDIUM;
    case "high":
      return Risk.HIGH;
    case "critical":
      return Risk.CRITICAL;
    default:
      return Risk.UNSPECIFIED;
  }
}

/** What asks for a person's answer outside cognition's steps: a spend, or a tool-approval receipt at its risk. */
export type ChannelQuestion =
  | { readonly kind: "spend"; readonly spendPolicy: string; readonly tool?: string | undefined }
  | { readonly kind: "tool"; readonly tool: string; readonly risk: string };

/** Policy's answer: the channels as names, the rule that chose them, the policy version. */
export interface PolicyChannels {
  readonly channels: string[];
  readonly matchedRule: string;
  readonly policyVersion: number;
}

/**
 * Which channels policy allows for `question` in the caller's tenant (`EvaluateApprovalChannels`).
 * The edge reads them to say what a person can do and whether to ask the client's form; the
 * ledger checks the answer against policy itself.
 */
export async function evaluateChannels(ctx: ToolContext, question: ChannelQuestion): Promise<PolicyChannels> {
  const res = await ctx.deps.policy.evaluateApprovalChannels(
    question.kind === "spend"
      ? { subject: { case: "spend", value: { spendPolicy: question.spendPolicy, tool: question.tool ?? "" } } }
      : { subject: { case: "tool", value: { tool: question.tool, risk: policyRisk(question.risk) } } },
    { ctx: ctx.call, signal: ctx.signal },
  );
  return { channels: policyChannelNames(res.channels), matchedRule: res.matchedRule, policyVersion: Number(res.policyVersion) };
}
