import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import type { SpendRequest } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { defineTool, type ToolContext } from "../../definitions/tool.js";
import { gateOutput, toGateOutput, type GateOutput } from "./gate-result.js";
import { decidedBy } from "../../approvals/view.js";
import { askHuman, type HumanQuestion } from "./human-approval.js";
import { ledgerCall, ledgerOf, seqNumber } from "../../definitions/ledger-access.js";
import { jsonObjectOutput, requestSeq, ttlSeconds } from "./shapes.js";
import { APPROVAL_CHANNEL_NAMES, approvalChannelOptions, approveSpendCall, wayLines, whyClientNotAsked, type ApprovalChannelName } from "../../approvals/channels.js";
import { channelPlace } from "../approval.js";
import { spendApprovalNextStep } from "./spend-approval-channels.js";
import { describeSpendRequest } from "./spend-request-text.js";
import { consolePageFor, waitForSpendAnswer } from "../../approvals/url-elicitation.js";

/** Who answered and how; shared by the tools that need a person. */
export const humanOutput = z
  .object({
    answer: z.enum(["confirmed", "declined", "cancelled"]).describe("Only confirmed approves or issues anything"),
    via: z
      .enum(["approver_role", "elicitation", "operator", "console"])
      .describe("An approver's API key, the client's user asked through elicitation, the operator's command, or the approval console"),
  })
  .describe("The person's answer: {answer: confirmed | declined | cancelled, via}");

/** The ledger's `approved_via` for each channel, as `human.via` shows it. */
const VIA_OF_CHANNEL: Readonly<Record<string, z.output<typeof humanOutput>["via"]>> = {
  approver: "approver_role",
  client_elicitation: "elicitation",
  operator: "operator",
  console: "console",
};

const output = gateOutput.partial().extend({
  human: humanOutput,
  approved_by: z.string().optional().describe("As recorded: alice, console:alice, operator, elicitation:<you>"),
  channel: z.enum(APPROVAL_CHANNEL_NAMES).optional(),
  receipt: jsonObjectOutput.optional().describe("An approved finance request's signed receipt, for its requester to pass whole to the tool"),
  receipt_pending: z.boolean().optional().describe("Someone else approved it: the requester's next approve_spend (or finance call) receives it"),
  collect_seq: z.number().int().optional().describe("The ledger entry recording the requester's collection"),
  decline_seq: z.number().int().optional().describe("The ledger entry recording a decline"),
  next_step: z.string(),
});

/** An approval the gate still blocks: recorded, and nothing may run; the caps it broke named. */
function stillBlocked(gate: GateOutput, recorded: string): string {
  const why = decidedBy(gate.result);
  return `${recorded} in ledger entry ${gate.ledger_seq}, but an approval cannot override a hard rule: the spend is ${gate.state} (${gate.reason})${why ? `: ${why}` : ""}. Nothing may run.`;
}

/** After a LOCKED approval that reached the requester (collected, or answered in their own session). */
function handedOverNextStep(request: SpendRequest, via: string, seq: number, receipt?: Record<string, unknown>): string {
  const base = `Approved by a person (via ${via}) and locked in ledger entry ${seq}.`;
  if (!receipt) return request.tool ? base : `${base} The spend is committed; nothing else is needed.`;
  const expiry = typeof receipt["expiry"] === "string" ? ` before ${receipt["expiry"]}` : "";
  return `${base} A receipt bound to the exact call was issued: pass it whole as "receipt" to ${request.tool} with the same arguments${expiry}. It works once.`;
}

/**
 * `approve_spend`: a person's approval of a HITL_REQUIRED spend, and the requester's way to
 * receive it. The action and arguments are read by the ledger from the stored request
 * (request_seq), never restated by the agent. An approver (not the requester) approves by
 * calling it; the requester's call collects an approval any channel gave (an approver key, the
 * operator's command, the console) once, and while none has, sends the client's user to the
 * console page (URL mode) or asks them through a form, in docs/approvals.md §3's order, or
 * answers `approval_required` naming every way a person can approve it.
 */
export const approveSpendTool = defineTool({
  name: "approve_spend",
  toolset: "governance",
  title: "Approve spend",
  description:
    "Approve a spend the gate held for a person (HITL_REQUIRED), or receive that approval, by the request_seq " +
    "evaluate_spend_gate or request_authorization returned. A holder of the approver role (which the operator grants " +
    "an API key) approves another principal's request by calling it; the operator can with chaos-core approvals " +
    "approve-spend. The requester calls it to receive the approval, once (for a finance tool request, the signed " +
    "receipt). While no person has answered: a client with URL-mode elicitation has its user sent to the request's " +
    "console page (where policy accepts the console) and the call waits; otherwise, where policy accepts this " +
    "client's own answer (by default never: the operator opts a spend policy or tool in), a client that can elicit " +
    "has its user shown the stored request, every argument, to confirm; otherwise approval_required lists every way " +
    "a person can approve it. No argument can approve; no approval overrides a hard rule.",
  input: z.strictObject({
    request_seq: requestSeq.describe("Of the HITL_REQUIRED evaluation or request"),
    ttl_seconds: ttlSeconds,
  }),
  output,
  annotations: {
    readOnlyHint: false,
    // It records an approval and may hand over a receipt; nothing is replaced or run.
    destructiveHint: false,
    // A request is approved once and its approval collected once; asking again is refused.
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const seq = args.request_seq;
    const ledger = ledgerOf(ctx);
    const { request } = await ledger.getSpendRequest({ requestSeq: BigInt(seq) }, ledgerCall(ctx));
    if (!request) throw new ChaosError("internal", "the ledger answered GetSpendRequest without a request");
    const mine = request.requestedBy === ctx.call.principal;
    // An approver answers a request still waiting (the ledger refuses, and records, their own);
    // an answered request of theirs they collect like any requester.
    if (ctx.roles.has("approver") && (!mine || request.state === "PENDING")) return approveAsApprover(ctx, request, args.ttl_seconds);
    if (request.state !== "PENDING") return collect(ctx, request, args.ttl_seconds);
    return askTheClientUser(ctx, request, args.ttl_seconds);
  },
});

async function approveAsApprover(ctx: ToolContext, request: SpendRequest, ttl: number | undefined) {
  const seq = seqNumber(request.requestSeq);
  const res = await ledgerOf(ctx).approveSpend({ requestSeq: request.requestSeq, approvedVia: "approver_role", ttlSeconds: ttl ?? 0 }, ledgerCall(ctx));
  const gate = toGateOutput(res, seqNumber(res.ledgerSeq));
  const pickUp = request.tool ? `${approveSpendCall(seq)} (or ${request.tool} with the same arguments)` : approveSpendCall(seq);
  return {
    ...gate,
    human: { answer: "confirmed" as const, via: "approver_role" as const },
    approved_by: ctx.call.principal,
    channel: "approver" as const,
    receipt_pending: res.receiptPending,
    next_step:
      gate.state === "LOCKED"
        ? `Approved by you and locked in ledger entry ${gate.ledger_seq}. The requester, ${res.requester}, receives it with their next ${pickUp}; you hold no receipt.`
        : stillBlocked(gate, "The approval is recorded"),
  };
}

async function collect(ctx: ToolContext, request: SpendRequest, ttl: number | undefined) {
  const res = await ledgerOf(ctx).collectSpendApproval({ requestSeq: request.requestSeq, ttlSeconds: ttl ?? 0 }, ledgerCall(ctx));
  const gate = toGateOutput(res, seqNumber(res.approvalSeq));
  const via = VIA_OF_CHANNEL[res.channel] ?? "approver_role";
  return {
    ...gate,
    human: { answer: "confirmed" as const, via },
    approved_by: res.approvedBy,
    ...((APPROVAL_CHANNEL_NAMES as readonly string[]).includes(res.channel) ? { channel: res.channel as ApprovalChannelName } : {}),
    ...(res.receipt ? { receipt: res.receipt } : {}),
    collect_seq: seqNumber(res.ledgerSeq),
    next_step: `${handedOverNextStep(request, `${res.channel}, by ${res.approvedBy}`, gate.ledger_seq, res.receipt)} Collected in ledger entry ${seqNumber(res.ledgerSeq)}.`,
  };
}

/**
 * The client is not asked: the call still asks the ledger for the approval, so the attempt is
 * recorded (`spend.collect_refused`, `approval_pending`) and one another channel gave meanwhile
 * is handed over; otherwise `approval_required` says why and names every other way.
 */
async function notAsked(ctx: ToolContext, request: SpendRequest, ttl: number | undefined, why: string, cancelled = false) {
  const seq = seqNumber(request.requestSeq);
  const refusal = (recorded: string | undefined, cause?: unknown) =>
    new ChaosError(
      "approval_required",
      `Nothing was approved: no person has answered spend request ${seq} yet, and ${why}${recorded ? ` This attempt is recorded in ledger entry ${recorded}.` : ""}\n` +
        spendApprovalNextStep(ctx, seq, request.channels, request.tool || undefined, { ...channelPlace(ctx), canElicit: false }),
      cause === undefined ? undefined : { cause },
    );
  // The client cancelled the call: nothing more is asked of the ledger for it.
  if (cancelled) throw refusal(undefined);
  try {
    return await collect(ctx, request, ttl);
  } catch (err) {
    const e = ChaosError.from(err);
    if (!e.message.startsWith("approval_pending:")) throw err;
    throw refusal(/recorded as ledger entry (\d+)/.exec(e.message)?.[1], err);
  }
}

/**
 * URL mode (docs/approvals.md §3): the client's user is asked to open the request's console page
 * and the call waits for a person's answer there (or through any other channel). Approved →
 * collected here, once (the receipt for a finance request); declined → the decline as recorded;
 * nobody answered in this call → {@link notAsked}.
 */
async function askThroughConsole(ctx: ToolContext, request: SpendRequest, url: string, ttl: number | undefined) {
  const waited = await waitForSpendAnswer(ctx, request, url);
  if (!waited.answered) return notAsked(ctx, request, ttl, waited.why, waited.cancelled);
  const now = waited.value;
  if (now.state === "DECLINED") {
    const seq = seqNumber(now.requestSeq);
    const declineSeq = seqNumber(now.answerSeq);
    return {
      human: { answer: "declined" as const, via: VIA_OF_CHANNEL[now.answerChannel] ?? ("approver_role" as const) },
      ...((APPROVAL_CHANNEL_NAMES as readonly string[]).includes(now.answerChannel) ? { channel: now.answerChannel as ApprovalChannelName } : {}),
      decline_seq: declineSeq,
      next_step:
        `${now.answeredBy || "A person"} declined spend request ${seq} (via ${now.answerChannel || "a person's channel"}): nothing was approved or issued, ` +
        `and the request will never run (recorded in ledger entry ${declineSeq}). Do not retry it; tell the user or change the plan.`,
    };
  }
  // Approved (or answered otherwise): the ledger hands it over once, or says why not.
  return collect(ctx, now, ttl);
}

async function askTheClientUser(ctx: ToolContext, request: SpendRequest, ttl: number | undefined) {
  const seq = seqNumber(request.requestSeq);
  const about = `${request.tool ? `${request.tool}, ` : ""}spend policy ${request.policy}`;
  const unverified = () =>
    new ChaosError("failed_precondition", `the stored arguments of spend request ${seq} do not hash to what its ledger entry recorded, so no person is asked to approve them`);
  // The console first: its answer comes from a person on the page, never from the client.
  const url = consolePageFor(ctx, { kind: "spend", requestSeq: seq }, request.channels);
  if (url) {
    if (!request.argumentsVerified) throw unverified();
    return askThroughConsole(ctx, request, url, ttl);
  }
  const why = whyClientNotAsked(request.channels, about, request.channelsRule, ctx.client.formElicitation);
  if (why) return notAsked(ctx, request, ttl, why);
  if (!request.argumentsVerified) throw unverified();
  const question: HumanQuestion = {
    tool: "approve_spend",
    requestSeq: seq,
    retryCall: approveSpendCall(seq),
    confirmTitle: "Approve this spend?",
    otherWays: wayLines(approvalChannelOptions({ kind: "spend", requestSeq: seq }, request.channels, { ...channelPlace(ctx), canElicit: false }), request.channels),
    question: () =>
      Promise.resolve(
        [
          "An AI agent asks you to approve a spend that policy holds for a person (CHP spend gate: HITL_REQUIRED).",
          "This is the request exactly as the audit ledger stored it; your approval applies to it and nothing else:",
          describeSpendRequest(request),
          "Approving lets this one action past its approval threshold. It cannot override a hard rule: a blocked spend stays blocked.",
        ].join("\n\n"),
      ),
  };
  const human = await askHuman(ctx, question);
  if (human.answer === "cancelled") {
    return {
      human,
      next_step: `The person dismissed the question without answering: nothing was approved or issued. Call ${approveSpendCall(seq)} to ask again.`,
    };
  }
  if (human.answer === "declined") {
    const declined = await ledgerOf(ctx).declineSpend({ requestSeq: request.requestSeq, approvedVia: "elicitation", reason: "" }, ledgerCall(ctx));
    const declineSeq = seqNumber(declined.ledgerSeq);
    return {
      human,
      decline_seq: declineSeq,
      next_step: `The person declined: nothing was approved or issued, and the request will never run (recorded in ledger entry ${declineSeq}). Do not retry it; tell the user or change the plan.`,
    };
  }
  const res = await ledgerOf(ctx).approveSpend({ requestSeq: request.requestSeq, approvedVia: human.via, ttlSeconds: ttl ?? 0 }, ledgerCall(ctx));
  const gate = toGateOutput(res, seqNumber(res.ledgerSeq));
  return {
    ...gate,
    human,
    channel: human.via === "elicitation" ? ("client_elicitation" as const) : ("approver" as const),
    ...(res.receipt ? { receipt: res.receipt } : {}),
    next_step:
      gate.state === "LOCKED"
        ? handedOverNextStep(request, human.via, gate.ledger_seq, res.receipt)
        : stillBlocked(gate, `The approval (via ${human.via}) is recorded`),
  };
}
