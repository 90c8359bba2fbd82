import { z } from "zod";
import { approvalChannelOptions, wayLines } from "../../approvals/channels.js";
import { evaluateChannels } from "../../approvals/policy-channels.js";
import { channelPlace } from "../approval.js";
import { defineTool } from "../../definitions/tool.js";
import { ledgerCall, ledgerOf, oneOf, seqNumber } from "../../definitions/ledger-access.js";
import { approvalChannelsOutput } from "./spend-approval-channels.js";
import { toolCallInput, toProtoCall } from "./shapes.js";

/** How to ask for a receipt for a recorded request, as an agent would type it. */
export function issueReceiptCall(requestSeq: number, decision: "allow" | "deny" = "allow"): string {
  return `issue_approval_receipt {"request_seq": ${requestSeq}, "call": <the same call>, "decision": "${decision}"}`;
}

/** `evaluate_tool_approval`: inspects a call against the tenant's tool-approval policy and records the request. */
export const evaluateToolApprovalTool = defineTool({
  name: "evaluate_tool_approval",
  toolset: "governance",
  title: "Evaluate tool approval",
  description:
    "Check a tool call against the operator's tool-approval policy. An allowlist is not an authorization: an allowed " +
    "call comes back RECEIPT_REQUIRED (a person must issue a signed receipt bound to this exact call), anything else " +
    "DENIED with a stable code (tool_not_allowlisted, resource_not_allowlisted, host_bound_override, ambiguous_call, " +
    "ambiguous_policy). args_hash covers your arguments plus the operator's host-bound fields. Recorded in the audit " +
    "ledger; issue_approval_receipt takes its request_seq. Runs nothing.",
  input: z.strictObject({ call: toolCallInput }),
  output: z.object({
    status: z.enum(["RECEIPT_REQUIRED", "DENIED"]),
    code: z.string().describe("allowlist_is_not_authorization when a receipt is required, else the denial code"),
    args_hash: z.string().describe("content_hash of the host-bound ∪ model arguments"),
    policy_version: z.string(),
    risk: z.string(),
    request_seq: z.number().int().describe("The ledger entry recording the request"),
    message: z.string().optional().describe("DENIED: what is wrong"),
    approval_channels: approvalChannelsOutput.optional().describe("RECEIPT_REQUIRED: every way a person can issue the receipt here"),
    next_step: z.string(),
  }),
  annotations: {
    readOnlyHint: false,
    // It appends the request to the ledger; nothing else changes.
    destructiveHint: false,
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const res = await ledgerOf(ctx).evaluateToolApproval({ call: toProtoCall(args.call) }, ledgerCall(ctx));
    const seq = seqNumber(res.ledgerSeq);
    const status = oneOf(res.status, ["RECEIPT_REQUIRED", "DENIED"], "status");
    const recorded = { status, code: res.code, args_hash: res.argsHash, policy_version: res.policyVersion, risk: res.risk, request_seq: seq };
    if (status === "DENIED") {
      return {
        ...recorded,
        ...(res.problem ? { message: res.problem } : {}),
        next_step: `Denied (${res.code})${res.problem ? `: ${res.problem}` : ""}. Recorded in ledger entry ${seq}. No receipt can be issued for this call as it stands.`,
      };
    }
    // Who may issue it is policy's choice, by the risk the tool-approval rule gives the call.
    const allowed = await evaluateChannels(ctx, { kind: "tool", tool: args.call.tool, risk: res.risk });
    const options = approvalChannelOptions({ kind: "receipt", call: issueReceiptCall(seq) }, allowed.channels, channelPlace(ctx));
    return {
      ...recorded,
      approval_channels: options,
      next_step:
        `An allowlist is not an authorization. A person issues a receipt for exactly this call (recorded in ledger entry ${seq}); ` +
        `you cannot issue it yourself. Who can here:\n${wayLines(options, allowed.channels)}\nThen pass it whole to ` +
        'authorize_tool_call {"call": <the same call>, "receipt": <the receipt>}.',
    };
  },
});
