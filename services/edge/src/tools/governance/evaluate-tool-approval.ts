import { z } from "zod";
import { defineTool } from "../define.js";
import { ledgerCall, ledgerOf, oneOf, seqNumber } from "./ledger-access.js";
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
    "ledger; its request_seq is what issue_approval_receipt needs. Runs nothing.",
  input: z.strictObject({ call: toolCallInput }),
  output: z.object({
    status: z.enum(["RECEIPT_REQUIRED", "DENIED"]),
    code: z.string().describe("allowlist_is_not_authorization when a receipt is required, else the denial code"),
    args_hash: z.string().describe("content_hash of the host-bound ∪ model arguments a receipt would bind"),
    policy_version: z.string(),
    risk: z.string(),
    request_seq: z.number().int().describe("The ledger entry that records this request"),
    message: z.string().optional().describe("Only when DENIED: what is wrong, in words"),
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
    return {
      status,
      code: res.code,
      args_hash: res.argsHash,
      policy_version: res.policyVersion,
      risk: res.risk,
      request_seq: seq,
      ...(res.problem ? { message: res.problem } : {}),
      next_step:
        status === "RECEIPT_REQUIRED"
          ? `An allowlist is not an authorization. A person issues a receipt for exactly this call with ${issueReceiptCall(seq)} ` +
            "(someone holding the approver role, or your user through elicitation); then pass it whole to " +
            'authorize_tool_call {"call": <the same call>, "receipt": <the receipt>}.'
          : `Denied (${res.code})${res.problem ? `: ${res.problem}` : ""}. Recorded in ledger entry ${seq}. No receipt can be issued for this call as it stands.`,
    };
  },
});
