import { z } from "zod";
import { defineTool } from "../define.js";
import { approveSpendCall, gateOutput, toGateOutput } from "./gate-result.js";
import { askHuman, describeEntry, readEntry, recordDecline, type HumanQuestion } from "./human-approval.js";
import { ledgerCall, ledgerOf, seqNumber } from "./ledger-access.js";
import { jsonObjectOutput, requestSeq, ttlSeconds } from "./shapes.js";

/** Who answered and how; shared by the tools that need a person. */
export const humanOutput = z
  .object({
    answer: z.enum(["confirmed", "declined", "cancelled"]).describe("confirmed is the only answer that approves or issues anything"),
    via: z.enum(["approver_role", "elicitation"]).describe("An approver's API key, or the client's user asked through elicitation"),
  })
  .describe("The person's answer");

const output = gateOutput.partial().extend({
  human: humanOutput,
  receipt: jsonObjectOutput
    .optional()
    .describe("For an approved finance tool request: the signed receipt, to pass back whole to that tool"),
  decline_seq: z.number().int().optional().describe("The ledger entry that records a decline"),
  next_step: z.string().describe("What happens next, in plain words"),
});

function approvedNextStep(state: string, via: string, seq: number, reason: string, receipt?: Record<string, unknown>): string {
  if (state !== "LOCKED") {
    return `The approval (via ${via}) is recorded in ledger entry ${seq}, but an approval cannot override a hard rule: the spend is ${state} (${reason}). Nothing may run.`;
  }
  const base = `Approved by a person (via ${via}) and locked in ledger entry ${seq}.`;
  if (!receipt) return base;
  const tool = typeof receipt["tool"] === "string" ? receipt["tool"] : "the tool";
  const expiry = typeof receipt["expiry"] === "string" ? ` before ${receipt["expiry"]}` : "";
  return `${base} A receipt bound to the exact call was issued: pass it whole as "receipt" to ${tool} with the same arguments${expiry}. It works once.`;
}

/**
 * `approve_spend`: a person's approval of a HITL_REQUIRED spend. The action is read by the
 * ledger from the recorded request (request_seq), never restated by the agent; the person
 * asked through elicitation is shown that same record.
 */
export const approveSpendTool = defineTool({
  name: "approve_spend",
  toolset: "governance",
  title: "Approve spend",
  description:
    "Have a person approve a spend the gate held for approval (HITL_REQUIRED), by the request_seq that " +
    "evaluate_spend_gate or request_authorization returned. Someone holding the approver role (granted by the operator " +
    "to an API key) approves by calling it; otherwise, when this client supports elicitation, its user is shown the " +
    "recorded request and asked to confirm. No argument can approve. An approval never overrides a hard rule. For a " +
    "finance tool request, the approval returns the signed receipt that tool needs.",
  input: z.strictObject({
    request_seq: requestSeq.describe("The ledger_seq of the HITL_REQUIRED evaluation or request_authorization"),
    ttl_seconds: ttlSeconds,
  }),
  output,
  annotations: {
    readOnlyHint: false,
    // It records an approval and may issue a receipt; nothing is replaced or run.
    destructiveHint: false,
    // A request is approved once; asking again is refused by the ledger.
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const seq = args.request_seq;
    const question: HumanQuestion = {
      tool: "approve_spend",
      requestSeq: seq,
      retryCall: approveSpendCall(seq),
      confirmTitle: "Approve this spend?",
      question: async () =>
        [
          "An AI agent asks you to approve a spend that policy holds for a person (CHP spend gate: HITL_REQUIRED).",
          "This is the request exactly as the audit ledger recorded it; your approval applies to it and nothing else:",
          describeEntry(await readEntry(ctx, seq)),
          "Approving lets this one action past its approval threshold. It cannot override a hard rule: a blocked spend stays blocked.",
        ].join("\n\n"),
    };
    const human = await askHuman(ctx, question);
    if (human.answer === "cancelled") {
      return {
        human,
        next_step: `The person dismissed the question without answering: nothing was approved or issued. Call ${approveSpendCall(seq)} to ask again.`,
      };
    }
    if (human.answer === "declined") {
      const declineSeq = await recordDecline(ctx, question);
      return {
        human,
        decline_seq: declineSeq,
        next_step: `The person declined: nothing was approved or issued (recorded in ledger entry ${declineSeq}). Do not retry it; tell the user or change the plan.`,
      };
    }
    const res = await ledgerOf(ctx).approveSpend(
      { requestSeq: BigInt(seq), approvedVia: human.via, ttlSeconds: args.ttl_seconds ?? 0 },
      ledgerCall(ctx),
    );
    const gate = toGateOutput(res, seqNumber(res.ledgerSeq));
    return {
      ...gate,
      human,
      ...(res.receipt ? { receipt: res.receipt } : {}),
      next_step: approvedNextStep(gate.state, human.via, gate.ledger_seq, gate.reason, res.receipt),
    };
  },
});
