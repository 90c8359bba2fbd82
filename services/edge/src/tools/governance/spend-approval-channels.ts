import { z } from "zod";
import {
  acceptedChannels,
  approvalChannelOptions,
  approvalChannelOutput,
  approveSpendCall,
  type ApprovalChannelOption,
  type ChannelPlace,
} from "../../approvals/channels.js";
import { channelPlace } from "../approval.js";
import type { ToolContext } from "../../definitions/tool.js";

/** `approval_channels` in a tool's output: the same shape as a step approval's channel list. */
export const approvalChannelsOutput = z.array(approvalChannelOutput).describe("Every way a person can approve it here; none of them is you");

/**
 * Every way a person can approve the spend request at `requestSeq` from here: the channels
 * policy allows for it (`channels`, as the ledger stored them with the request; none means a
 * request older than channels, which only a person with their own credential answers) that
 * exist in this call (`place`, this call's by default), built by the one channel list.
 */
export function spendApprovalChannels(ctx: ToolContext, requestSeq: number, channels: readonly string[], place: ChannelPlace = channelPlace(ctx)): ApprovalChannelOption[] {
  return approvalChannelOptions({ kind: "spend", requestSeq }, channels, place);
}

/**
 * What an agent reads when a spend waits for a person: that it cannot approve it, every way a
 * person can (or, when none exists here, which channels policy accepts), and that its own next
 * call (`approve_spend`, or `tool` with the same arguments) receives the approval.
 */
export function spendApprovalNextStep(
  ctx: ToolContext,
  requestSeq: number,
  channels: readonly string[],
  tool?: string,
  place: ChannelPlace = channelPlace(ctx),
): string {
  const ways = spendApprovalChannels(ctx, requestSeq, channels, place).map((c) => `- ${c.channel}: ${c.how}`);
  const pickUp = tool ? `${approveSpendCall(requestSeq)} (or ${tool} with exactly the same arguments)` : approveSpendCall(requestSeq);
  const held = `A person must approve this spend (ledger entry ${requestSeq}); you cannot approve it yourself.`;
  if (ways.length === 0) {
    return `${held} No way to approve it is available here: policy accepts only ${acceptedChannels(channels).join(", ")} for it. Ask the operator of this Chaos Core.`;
  }
  return [
    `${held} Ways to approve it here:`,
    ...ways,
    `Once a person approved it, your next ${pickUp} receives ${tool ? "the receipt" : "the approval"}.`,
  ].join("\n");
}
