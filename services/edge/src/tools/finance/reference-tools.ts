import { z } from "zod";
import type { JsonObject } from "@bufbuild/protobuf";
import { defineTool, type ToolContext, type ToolDefinition } from "../../definitions/tool.js";
import { ledgerCall, ledgerOf, seqNumber } from "../../definitions/ledger-access.js";
import { jsonObjectOutput, receiptInput } from "../governance/shapes.js";
import { spendApprovalNextStep } from "../governance/spend-approval-channels.js";
import { REFERENCE_TOOL_SPECS, type ReferenceToolName } from "./arguments.js";

/** Longest argument list repeated in a next step; a longer one is referred to, not copied. */
const MAX_ECHOED_ARGS = 1000;

/** Detail codes of a receipt that was presented but cannot be verified: to the seed's table, no receipt. */
const UNVERIFIABLE_RECEIPT = new Set(["malformed_receipt", "unknown_key", "bad_signature"]);

/**
 * What the call's stored spend request says about the next step, when it had one; `channels`
 * are policy's for a request still waiting.
 */
function approvalNextStep(
  ctx: ToolContext,
  name: ReferenceToolName,
  detail: string,
  recorded: number,
  approvalSeq: number,
  channels: readonly string[],
): string | undefined {
  switch (detail) {
    case "AUTHORIZED":
      return `Executed, synthetically: no real venue or bank was reached. A person's approval of spend request ${approvalSeq} was used by this call, once. Recorded in ledger entry ${recorded}.`;
    case "approval_pending":
      return `Not executed: no person has approved spend request ${approvalSeq} for this exact call yet. Recorded in ledger entry ${recorded}.\n${spendApprovalNextStep(ctx, approvalSeq, channels, name)}`;
    case "approval_declined":
      return `Not executed: a person declined spend request ${approvalSeq} for this exact call, so it never runs. Recorded in ledger entry ${recorded}. Do not retry it; tell the user or change the plan.`;
    case "already_collected":
      return `Not executed: the approval of spend request ${approvalSeq} was already used by another call, and an approval runs its call once. Recorded in ledger entry ${recorded}; a new call needs a new request (request_authorization).`;
    default:
      return undefined;
  }
}

function nextStep(
  name: ReferenceToolName,
  code: string,
  detail: string,
  message: string,
  seq: number,
  toolArgs: Record<string, unknown>,
  gateBlocks: boolean,
): string {
  const json = JSON.stringify(toolArgs);
  const requestCall = `request_authorization {"tool": "${name}", "args": ${json.length <= MAX_ECHOED_ARGS ? json : "<these arguments, without receipt>"}}`;
  const what = `${code}${detail && detail !== code ? `, detail ${detail}` : ""}`;
  const recorded = `Not executed (${what})${message ? `: ${message}` : ""}. Recorded in ledger entry ${seq}.`;
  // The code is the first check that failed (CHP's order); when the spend policy blocks the call
  // anyway, asking for a receipt would only be refused, so the advice is the caps, not a receipt.
  if (code !== "EXECUTED" && gateBlocks) {
    return `${recorded} The spend policy blocks this call as it stands (the caps are named above), so no receipt or approval can make it run now: change the call to fit them, or ask the operator.`;
  }
  // The short code is the seed's; where it would mislead (a bad signature is not an absent
  // receipt, another tenant's receipt is not changed arguments), the detail decides the advice.
  if (UNVERIFIABLE_RECEIPT.has(detail)) {
    return `${recorded} The receipt presented cannot be verified, so it counts as none; a receipt cannot be repaired. Get a new one with ${requestCall} and pass it back unchanged.`;
  }
  if (detail === "tenant_mismatch") {
    return `${recorded} A receipt is valid only in the tenant it was issued in; get one in this tenant with ${requestCall}.`;
  }
  switch (code) {
    case "EXECUTED":
      return `Executed, synthetically: no real venue or bank was reached. Recorded in ledger entry ${seq}; the receipt is used up.`;
    case "missing_receipt":
      return `${recorded} This tool runs only with a receipt bound to its exact arguments: get one with ${requestCall}, then call ${name} again with the same arguments plus "receipt".`;
    case "policy_deny":
      return `${recorded} The spend policy's hard rules refuse this call; no approval can override them.`;
    case "expired":
      return `${recorded} The receipt expired; get a new one with ${requestCall}.`;
    case "replay":
      return `${recorded} This receipt was already used, and a receipt works once; a new call needs a new one (${requestCall}).`;
    case "args_changed":
      return `${recorded} The tool, scope or arguments differ from what the receipt authorized: call with the authorized arguments, or get a receipt for these with ${requestCall}.`;
    case "ambiguous_policy":
      return `${recorded} The tool's scope or spend policy is not configured concretely; ask the operator.`;
    default:
      return recorded;
  }
}

function referenceTool(name: ReferenceToolName): ToolDefinition {
  const spec = REFERENCE_TOOL_SPECS[name];
  return defineTool({
    name,
    toolset: "finance-reference",
    title: spec.title,
    description:
      `${spec.summary}. Synthetic: it reaches no real venue or bank, and exists to exercise the receipt-gated path. ` +
      "It runs only with a receipt bound to this tool, its scope and these exact arguments: get one with " +
      "request_authorization. A call that needs a person (a wire always) and comes without a receipt is held as a " +
      "request for one (approval_pending, with the ways to approve it); once a person approved it, calling this tool " +
      "with the same arguments and no receipt runs it, once. Without one (or with an expired, used or mismatched one) nothing runs and the denial is " +
      "recorded with a short code (policy_deny, expired, replay, args_changed, missing_receipt or ambiguous_policy), " +
      "a detail_code that says what happened (bad_signature, tenant_mismatch, ...) and a message in words.",
    input: z.strictObject({
      ...spec.shape,
      // Optional on purpose: a call without a receipt is a recorded missing_receipt denial, not a schema error.
      receipt: receiptInput.optional(),
    }),
    output: z.object({
      executed: z.boolean(),
      code: z.string().describe("EXECUTED or policy_deny, expired, replay, args_changed, missing_receipt, ambiguous_policy"),
      detail_code: z
        .string()
        .describe("What happened, behind the short code: bad_signature, tenant_mismatch, daily_cap_exceeded, ... (docs/ledger.md maps each to its code); AUTHORIZED when executed"),
      message: z.string().optional().describe("Only when not executed: what happened, in words"),
      result: jsonObjectOutput.optional().describe("The synthetic result (ids marked -sim-, synthetic: true)"),
      ledger_seq: z.number().int().describe("The ledger entry that records the outcome"),
      approval_request_seq: z
        .number()
        .int()
        .optional()
        .describe("Called without a receipt: the stored spend request for this exact call whose approval ran it, or that holds it"),
      synthetic: z.literal(true).describe("Always true: no real venue or bank is involved"),
      next_step: z.string(),
    }),
    annotations: {
      readOnlyHint: false,
      // It consumes the receipt for good and commits the spend to the day's total.
      destructiveHint: true,
      // A receipt works once: the same call again is a replay.
      idempotentHint: false,
      // Synthetic: nothing outside Chaos Core is reached.
      openWorldHint: false,
    },
    async run(args, ctx) {
      // Every field passed the strict schema of JSON-RPC input, so each value is JSON.
      const { receipt, ...toolArgs } = args as { receipt?: JsonObject } & JsonObject;
      const res = await ledgerOf(ctx).executeReferenceTool(
        { tool: name, arguments: toolArgs, ...(receipt ? { receipt } : {}) },
        ledgerCall(ctx),
      );
      const seq = seqNumber(res.ledgerSeq);
      const approvalSeq = seqNumber(res.approvalRequestSeq);
      return {
        executed: res.executed,
        code: res.code,
        detail_code: res.detailCode,
        ...(res.problem ? { message: res.problem } : {}),
        ...(res.executed && res.result ? { result: res.result } : {}),
        ledger_seq: seq,
        ...(approvalSeq > 0 ? { approval_request_seq: approvalSeq } : {}),
        synthetic: true as const,
        next_step:
          (approvalSeq > 0 ? approvalNextStep(ctx, name, res.detailCode, seq, approvalSeq, res.approvalChannels) : undefined) ??
          nextStep(name, res.code, res.detailCode, res.problem, seq, toolArgs, res.gateBlocks),
      };
    },
  });
}

/** The finance-reference toolset: synthetic tools gated by signed receipts. */
export const FINANCE_REFERENCE_TOOLS: readonly ToolDefinition[] = [
  referenceTool("place_equity_order"),
  referenceTool("wire_treasury_transfer"),
  referenceTool("rebalance_portfolio"),
];
