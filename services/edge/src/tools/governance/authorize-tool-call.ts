import { z } from "zod";
import { defineTool } from "../../definitions/tool.js";
import { ledgerCall, ledgerOf, seqNumber } from "../../definitions/ledger-access.js";
import { receiptInput, toolCallInput, toProtoCall } from "./shapes.js";

/** What to do after a denial, for the codes an agent can act on. */
function deniedNextStep(code: string, step: string, problem: string, seq: number): string {
  const recorded = `Denied (${code}) at the ${step} check${problem ? `: ${problem}` : ""}. Recorded in ledger entry ${seq}. Do not run the call.`;
  switch (code) {
    case "allowlist_is_not_authorization":
      return `${recorded} No receipt was presented: call evaluate_tool_approval {"call": ...} and have a person issue one with issue_approval_receipt.`;
    case "replayed_receipt":
      return `${recorded} This receipt was already used; a receipt works once. Ask for a new one.`;
    case "expired_receipt":
      return `${recorded} This receipt expired (and is now used up). Ask for a new one.`;
    case "changed_arguments":
      return `${recorded} The arguments differ from those the person approved; the receipt still fits the approved ones. New arguments need a new receipt.`;
    case "human_denied":
      return `${recorded} A person refused this call. Do not retry it; tell the user.`;
    default:
      return recorded;
  }
}

/** `authorize_tool_call`: checks a receipt against the call and consumes it once. */
export const authorizeToolCallTool = defineTool({
  name: "authorize_tool_call",
  toolset: "governance",
  title: "Authorize tool call",
  description:
    "Check a signed receipt against the call about to run, and consume it: AUTHORIZED once, or DENIED with a stable " +
    "code and the check that decided (missing receipt → allowlist_is_not_authorization, then malformed_receipt, " +
    "unknown_key, bad_signature, replayed_receipt, receipt_not_yet_valid, expired_receipt, human_denied, " +
    "policy_version_mismatch, tenant_mismatch, binding_mismatch, changed_arguments, risk_mismatch). Every outcome is " +
    "recorded in the audit ledger first. A receipt for other arguments is refused.",
  input: z.strictObject({
    call: toolCallInput,
    // Optional on purpose: a call without a receipt is a recorded denial, not a schema error.
    receipt: receiptInput.optional(),
  }),
  output: z.object({
    status: z.enum(["AUTHORIZED", "DENIED"]),
    authorized: z.boolean(),
    code: z.string().describe("AUTHORIZED or the stable denial code"),
    step: z.string().describe("The check that decided"),
    args_hash: z.string(),
    ledger_seq: z.number().int().describe("The ledger entry recording the outcome"),
    message: z.string().optional().describe("DENIED: what happened"),
    next_step: z.string(),
  }),
  annotations: {
    readOnlyHint: false,
    // An AUTHORIZED (or expired) receipt is consumed for good: it can never be used again.
    destructiveHint: true,
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const res = await ledgerOf(ctx).authorize(
      { call: toProtoCall(args.call), ...(args.receipt ? { receipt: args.receipt } : {}) },
      ledgerCall(ctx),
    );
    const seq = seqNumber(res.ledgerSeq);
    return {
      status: res.authorized ? ("AUTHORIZED" as const) : ("DENIED" as const),
      authorized: res.authorized,
      code: res.code,
      step: res.step,
      args_hash: res.argsHash,
      ledger_seq: seq,
      ...(!res.authorized && res.problem ? { message: res.problem } : {}),
      next_step: res.authorized
        ? `Authorized once (ledger entry ${seq}): run the call now with exactly these arguments. The receipt is used up.`
        : deniedNextStep(res.code, res.step, res.problem, seq),
    };
  },
});
