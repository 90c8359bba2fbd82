import { z } from "zod";
import { defineTool } from "../../definitions/tool.js";
import { REFERENCE_TOOL_NAMES, REFERENCE_TOOL_SPECS, referenceArgs } from "../finance/arguments.js";
import { heldBecause } from "./gate-result.js";
import { decidedBy } from "../../approvals/view.js";
import { ledgerCall, ledgerOf, oneOf, seqNumber } from "../../definitions/ledger-access.js";
import { approvalChannelsOutput, spendApprovalChannels, spendApprovalNextStep } from "./spend-approval-channels.js";
import { boundedJsonObject, jsonObjectOutput, MAX_ARGUMENTS_BYTES, ttlSeconds } from "./shapes.js";

const STATUSES = ["AUTHORIZED", "HITL_REQUIRED", "DENIED"] as const;

/** `request_authorization`: the spend gate for a finance reference call, and a receipt bound to it when it passes. */
export const requestAuthorizationTool = defineTool({
  name: "request_authorization",
  toolset: "governance",
  title: "Request authorization",
  description:
    "Ask for a receipt for one call of a synthetic finance tool (toolset finance-reference: place_equity_order, " +
    "wire_treasury_transfer, rebalance_portfolio) with its exact arguments. The operator's spend policy decides: " +
    "AUTHORIZED under the approval threshold (the receipt: pass it whole to the tool with the same arguments), " +
    "HITL_REQUIRED (a person approves it, approval_channels says how; then your approve_spend {request_seq}, this " +
    "call again, or the tool called with the same arguments receives it; a wire always needs a person), or DENIED " +
    "with a code. Recorded in the audit ledger. Runs nothing.",
  input: z
    .strictObject({
      tool: z.enum(REFERENCE_TOOL_NAMES),
      args: boundedJsonObject(MAX_ARGUMENTS_BYTES).describe("Its arguments exactly as you will call it (no receipt); the receipt binds their hash"),
      ttl_seconds: ttlSeconds,
    })
    .superRefine((input, ctx) => {
      // Refused here with the field named, instead of a recorded ambiguity for a typo.
      const parsed = referenceArgs(input.tool).safeParse(input.args);
      for (const issue of parsed.success ? [] : parsed.error.issues) {
        // An unknown key is named in the path, so the error points at it.
        const keys = issue.code === "unrecognized_keys" ? issue.keys : [undefined];
        for (const key of keys) {
          ctx.addIssue({ code: "custom", path: ["args", ...issue.path, ...(key ? [key] : [])], message: issue.message });
        }
      }
    }),
  output: z.object({
    status: z.enum(STATUSES),
    code: z.string().describe("AUTHORIZED, HITL_REQUIRED or the stable denial code"),
    receipt: jsonObjectOutput.optional().describe("AUTHORIZED: signed, to pass back whole"),
    gate: jsonObjectOutput.optional().describe("The spend gate's result (state, reason, claims)"),
    request_seq: z.number().int().describe("The ledger entry recording the request (approve_spend takes it)"),
    approval_request_seq: z
      .number()
      .int()
      .optional()
      .describe("AUTHORIZED by a person's approval of your earlier request for this call: that request"),
    approval_channels: approvalChannelsOutput.optional().describe("HITL_REQUIRED: every way a person can approve it here; none of them is you"),
    next_step: z.string(),
  }),
  annotations: {
    readOnlyHint: false,
    // It records the request and may sign a receipt; nothing is replaced or run.
    destructiveHint: false,
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const res = await ledgerOf(ctx).requestAuthorization(
      { tool: args.tool, arguments: args.args, ttlSeconds: args.ttl_seconds ?? 0 },
      ledgerCall(ctx),
    );
    const seq = seqNumber(res.ledgerSeq);
    const status = oneOf(res.status, STATUSES, "status");
    const spec = REFERENCE_TOOL_SPECS[args.tool];
    const approvalSeq = seqNumber(res.approvalRequestSeq);
    const use = `Call ${spec.name} with exactly the same arguments plus "receipt": <the receipt, whole> before it expires; it works once.`;
    const why = decidedBy(res.gate);
    const reason = res.gate?.["reason"];
    const nextStep = {
      AUTHORIZED:
        approvalSeq > 0
          ? `A person approved your request ${approvalSeq} for this exact call; its receipt is handed over now (collected in ledger entry ${seq}). ${use}`
          : `Authorized under the approval threshold (ledger entry ${seq}). ${use}`,
      HITL_REQUIRED: `${heldBecause(res.gate)}${spendApprovalNextStep(ctx, seq, res.approvalChannels, spec.name)}`,
      DENIED:
        `Denied (${res.code}${typeof reason === "string" ? `; CHP: ${reason}` : ""})${why ? `: ${why}` : ""}. Recorded in ledger entry ${seq}. ` +
        `Do not call ${spec.name}; no approval can override this.`,
    }[status];
    return {
      status,
      code: res.code,
      ...(res.receipt ? { receipt: res.receipt } : {}),
      ...(res.gate ? { gate: res.gate } : {}),
      request_seq: approvalSeq > 0 ? approvalSeq : seq,
      ...(approvalSeq > 0 ? { approval_request_seq: approvalSeq } : {}),
      ...(status === "HITL_REQUIRED" ? { approval_channels: spendApprovalChannels(ctx, seq, res.approvalChannels) } : {}),
      next_step: nextStep,
    };
  },
});
