import { z } from "zod";
import { approvalChannelOutput, operatorCommand, type ApprovalChannelOption } from "../../approvals/channels.js";
import type { ToolContext } from "../define.js";

/** How to call approve_spend for a recorded request, as an agent would type it. */
export function approveSpendCall(requestSeq: number): string {
  return `approve_spend {"request_seq": ${requestSeq}}`;
}

/** `approval_channels` in a tool's output: the same shape as a step approval's channel list. */
export const approvalChannelsOutput = z.array(approvalChannelOutput).describe("Every way a person can approve it here; none of them is you");

/**
 * The operator's command line for a spend request, exact for this process: the tenant and the
 * data directory are named when `chaos-core approvals` would not find them by itself.
 */
export function operatorSpendCommand(ctx: ToolContext, verb: "approve-spend" | "reject-spend", requestSeq: number): string | undefined {
  const operator = ctx.deps.operator;
  return operator ? operatorCommand(verb, requestSeq, ctx.call.tenant, operator) : undefined;
}

/**
 * Every way a person can approve the spend request at `requestSeq` from here — the one place
 * the list is built, so channels policy names (approvals.md §9 #5) and the console (§2) are
 * added here: an approver's own key; the operator's command where this process has the local
 * admin endpoint (standalone); the client's user when this client can be asked.
 */
export function spendApprovalChannels(ctx: ToolContext, requestSeq: number): ApprovalChannelOption[] {
  const call = approveSpendCall(requestSeq);
  const channels: ApprovalChannelOption[] = [
    { channel: "approver", how: `someone holding the approver role calls ${call} with their own API key`, call },
  ];
  const command = operatorSpendCommand(ctx, "approve-spend", requestSeq);
  if (command) channels.push({ channel: "operator", how: `the operator of this server runs ${command}`, command });
  if (ctx.canElicit()) channels.push({ channel: "client_elicitation", how: `you call ${call} and this client's user confirms when asked`, call });
  return channels;
}

/**
 * What an agent reads when a spend waits for a person: that it cannot approve it, every way a
 * person can, and that its own next call (`approve_spend`, or `tool` with the same arguments)
 * receives the approval.
 */
export function spendApprovalNextStep(ctx: ToolContext, requestSeq: number, tool?: string): string {
  const ways = spendApprovalChannels(ctx, requestSeq).map((c) => `- ${c.channel}: ${c.how}`);
  const pickUp = tool ? `${approveSpendCall(requestSeq)} (or ${tool} with exactly the same arguments)` : approveSpendCall(requestSeq);
  return [
    `A person must approve this spend (ledger entry ${requestSeq}); you cannot approve it yourself. Ways to approve it here:`,
    ...ways,
    `Once a person approved it, your next ${pickUp} receives ${tool ? "the receipt" : "the approval"}.`,
  ].join("\n");
}
