import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import type { Entry } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { approvalChannelOptions, wayLines, whyClientNotAsked } from "../../approvals/channels.js";
import { evaluateChannels, type PolicyChannels } from "../../approvals/policy-channels.js";
import { renderText } from "../../approvals/render-text.js";
import { toolCallView } from "../../approvals/view.js";
import { channelPlace } from "../approval.js";
import { defineTool, type ToolContext } from "../../definitions/tool.js";
import { humanOutput } from "./approve-spend.js";
import { issueReceiptCall } from "./evaluate-tool-approval.js";
import { askHuman, describeEntry, readEntry, recordDecline, type HumanQuestion } from "./human-approval.js";
import { ledgerCall, ledgerOf, seqNumber } from "../../definitions/ledger-access.js";
import { jsonObjectOutput, requestSeq, toolCallInput, toProtoCall, ttlSeconds } from "./shapes.js";

/**
 * The channels policy allows for a receipt for the recorded request, at the risk its entry
 * recorded (the tool-approval rule's; none counts as critical). The ledger checks the answer
 * against policy again when it issues.
 */
function receiptChannels(ctx: ToolContext, request: Entry): Promise<PolicyChannels> {
  const ev = request.event ?? {};
  const tool = typeof ev["tool"] === "string" ? ev["tool"] : "";
  const risk = typeof ev["risk"] === "string" ? ev["risk"] : "unspecified";
  return evaluateChannels(ctx, { kind: "tool", tool: tool || "unknown", risk });
}

/**
 * `issue_approval_receipt`: a person's signed allow or deny for one recorded call. The ledger
 * binds the receipt to the call, checks it is the call recorded at request_seq, and refuses a
 * requester approving their own call through the approver role. Cognition's step binding is
 * never set here: it is the cognition service's alone.
 */
export const issueApprovalReceiptTool = defineTool({
  name: "issue_approval_receipt",
  toolset: "governance",
  title: "Issue approval receipt",
  description:
    "Have a person sign an allow or deny receipt for a call evaluate_tool_approval recorded as RECEIPT_REQUIRED (its " +
    "request_seq and the same call). An approver issues it by calling this; otherwise, where policy accepts this " +
    "client's own answer at the call's risk (by default below high) and the client can elicit, its user is shown the " +
    "call and asked to confirm. No argument can approve. The receipt is bound to tool, resource, argument hash, " +
    "policy version and risk, expires, and works once: pass it whole to authorize_tool_call.",
  input: z.strictObject({
    request_seq: requestSeq.describe("evaluate_tool_approval's, for this call"),
    call: toolCallInput,
    decision: z.enum(["allow", "deny"]).describe("deny records a signed refusal"),
    ttl_seconds: ttlSeconds,
    reason: z.string().max(500).optional().describe("Why; kept in the decision log"),
  }),
  output: z.object({
    human: humanOutput,
    receipt: jsonObjectOutput.optional().describe("Signed: pass it back whole, unchanged"),
    decision_log: jsonObjectOutput.optional().describe("Who decided what, for which argument hash, with which nonce"),
    ledger_seq: z.number().int().optional().describe("The ledger entry recording the receipt"),
    decline_seq: z.number().int().optional().describe("The ledger entry recording a decline"),
    next_step: z.string(),
  }),
  annotations: {
    readOnlyHint: false,
    // It signs and records a new receipt; nothing is replaced or run.
    destructiveHint: false,
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const seq = args.request_seq;
    const retry = issueReceiptCall(seq, args.decision);
    let otherWays = "";
    let request: Entry | undefined;
    if (!ctx.roles.has("approver")) {
      // Only a person's answer counts: this client's user is asked only where policy accepts the
      // client's own answer for this receipt (by default not at high risk and above).
      request = await readEntry(ctx, seq);
      const allowed = await receiptChannels(ctx, request);
      const place = { ...channelPlace(ctx), canElicit: false };
      otherWays = wayLines(approvalChannelOptions({ kind: "receipt", call: retry }, allowed.channels, place), allowed.channels);
      const ev = request.event ?? {};
      const about = `a receipt for ${String(ev["tool"] ?? "the call")} at risk ${String(ev["risk"] ?? "unspecified")}`;
      const why = whyClientNotAsked(allowed.channels, about, allowed.matchedRule, ctx.client.formElicitation);
      if (why) {
        throw new ChaosError(
          "approval_required",
          `No receipt was issued: ledger entry ${seq} needs a person's decision, and ${why}\nWho can decide it here:\n${otherWays}\nNothing was approved or issued.`,
        );
      }
    }
    const question: HumanQuestion = {
      tool: "issue_approval_receipt",
      requestSeq: seq,
      retryCall: retry,
      confirmTitle: args.decision === "allow" ? "Allow this exact call, once?" : "Sign a refusal (deny) for this call?",
      otherWays,
      question: async () => {
        const recorded = request ?? (await readEntry(ctx, seq));
        return [
          args.decision === "allow"
            ? "An AI agent asks you to ALLOW one tool call. Policy lists the tool, but an allowlist is not an authorization."
            : "An AI agent asks you to sign a DENY for one tool call: it will be refused with human_denied.",
          `The call the receipt binds (the ledger checks it is the recorded request's call):\n${renderText(toolCallView(args.call, recorded))}`,
          `The request as the audit ledger recorded it:\n${describeEntry(recorded)}`,
          `The receipt is valid for ${args.ttl_seconds ?? 300} seconds and works once, only with exactly these arguments.` +
            (args.reason ? `\nReason given: ${args.reason}` : ""),
        ].join("\n\n");
      },
    };
    const human = await askHuman(ctx, question);
    if (human.answer === "cancelled") {
      return {
        human,
        next_step: `The person dismissed the question without answering: no receipt was issued. Call ${retry} to ask again.`,
      };
    }
    if (human.answer === "declined") {
      const declineSeq = await recordDecline(ctx, question);
      return {
        human,
        decline_seq: declineSeq,
        next_step: `The person declined: no receipt was issued (recorded in ledger entry ${declineSeq}). Do not run the call; tell the user.`,
      };
    }
    const res = await ledgerOf(ctx).issueReceipt(
      {
        call: toProtoCall(args.call),
        decision: args.decision,
        ttlSeconds: args.ttl_seconds ?? 0,
        approvedVia: human.via,
        requestSeq: BigInt(seq),
        reason: args.reason ?? "",
      },
      ledgerCall(ctx),
    );
    const ledgerSeq = seqNumber(res.ledgerSeq);
    return {
      human,
      ...(res.receipt ? { receipt: res.receipt } : {}),
      ...(res.decisionLog ? { decision_log: res.decisionLog } : {}),
      ledger_seq: ledgerSeq,
      next_step:
        args.decision === "allow"
          ? `Receipt issued (ledger entry ${ledgerSeq}). Pass it whole, unchanged, to authorize_tool_call {"call": <the same call>, "receipt": <the receipt>} before it expires; it works once.`
          : `A signed deny was issued (ledger entry ${ledgerSeq}): authorizing the call with it is refused with human_denied. Do not run the call.`,
    };
  },
});
