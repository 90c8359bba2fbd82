import { ChaosError, askerOfLabel, chpFloat, contentHash, sameAsker, type CallContext } from "@chaos-core/kit";
import { channelRefusal, type ChannelDecision } from "../adapters/approval-channels.js";
import type { Receipt } from "../authz/receipt.js";
import { referenceTool } from "../domain/reference-tools.js";
import { approveHuman, evaluateGate, type GateResult, type SpendAction } from "../domain/spend-gate.js";
import { decisionInWords } from "../domain/spend-limits.js";
import { gatePolicy, missingConfidence, tighten } from "../domain/spend-policies.js";
import { checkedReceiptTtl, signFinanceAuthorization } from "./finance-receipts.js";
import { sessionOf, type LedgerCore } from "./ledger-core.js";
import { commitSpend, committedToday, utcDay } from "./spend-days.js";
import { gateFields, gateReply, recordedAction, requestedChannels, type GateReply } from "./spend-gate-records.js";
import {
  answerActor,
  answerMarker,
  argumentsVerified,
  CHANNEL_OF_VIA,
  collectMarker,
  expiresAt,
  insertMarker,
  insertSpendRequest,
  legacyRequest,
  OPERATOR_PRINCIPAL,
  readSpendRequests,
  refusalError,
  type Refusal,
  type SpendAnswerVia,
  type StoredSpendRequest,
} from "./spend-requests.js";
import { requireConfidence, spendPolicyFor } from "./tenant-spend-policy.js";

/** ApproveSpend's answer: the gate's, and who collects it. */
export interface ApproveReply extends GateReply {
  /** Locked, and the receipt (or, for a plain spend, the news) waits for the requester. */
  readonly receiptPending: boolean;
  readonly channel: string;
  readonly requester: string;
}

/**
 * The CHP spend gate on top of the ledger, and a person's answer to a spend it holds
 * (EvaluateSpendGate, ApproveSpend, DeclineSpend). Limits are the operator's (an agent may only
 * tighten), `committed_today` is the ledger's own UTC-day total read under the tenant's ledger
 * lock, and every decision is recorded in the same transaction that reads or moves that total —
 * two concurrent spends cannot both pass a daily cap. Where a stored request stands and its
 * collection by the requester are `SpendCollection`'s (`spend-collection.ts`); the finance
 * reference tools are `FinanceDesk`'s (`finance-desk.ts`).
 */
export class SpendDesk {
  readonly #core: LedgerCore;

  constructor(core: LedgerCore) {
    this.#core = core;
  }

  /**
   * EvaluateSpendGate. A LOCKED decision commits its notional to the day's total (the gate's
   * `committed_delta`); BLOCKED is recorded with reason code `policy_deny`; HITL_REQUIRED waits
   * for {@link approveSpend} with the entry's sequence number.
   */
  async evaluateSpendGate(call: CallContext, input: { policyName: string; action: SpendAction; agentPolicy?: unknown }): Promise<GateReply> {
    const operator = await spendPolicyFor(this.#core, call, input.policyName);
    let policy = operator;
    if (input.agentPolicy !== undefined) {
      try {
        policy = tighten(operator, input.agentPolicy);
      } catch (err) {
        const e = ChaosError.from(err);
        if (e.code === "policy_denied") {
          await this.#core.record(call, { type: "spend_gate.refused", policy: input.policyName, code: "agent_policy_looser", problem: e.message.slice(0, 500) });
        }
        throw e;
      }
    }
    // Validates the action before anything is recorded: bad input is not a decision.
    const held = evaluateGate(input.action, gatePolicy(policy), 0).state === "HITL_REQUIRED";
    await requireConfidence(this.#core, call, { policy: input.policyName, version: policy.version }, missingConfidence(policy, input.action.confidence, "action.confidence"));
    const channels = held ? await this.#core.approvalChannels(call, { kind: "spend", spendPolicy: input.policyName }) : undefined;
    const now = this.#core.now();
    const day = utcDay(now);
    let gate: GateResult | undefined;
    let committed = 0;
    let message: string | undefined;
    const entry = await this.#core.record(call, { type: "spend_gate.evaluated" }, async (tx, ctx) => {
      committed = await committedToday(tx, call.tenant, input.policyName, day);
      gate = evaluateGate(input.action, gatePolicy(policy), committed);
      message = decisionInWords(gate, { policyName: input.policyName, policy: gatePolicy(policy), action: input.action, committedToday: committed });
      await commitSpend(tx, call.tenant, input.policyName, day, gate.committed_delta);
      const action = recordedAction(input.action);
      // A spend held for a person is stored as a request: its arguments are the action.
      const argsHash = gate.state === "HITL_REQUIRED" ? contentHash(action) : undefined;
      if (argsHash) {
        await insertSpendRequest(tx, call.tenant, {
          requestSeq: ctx.seq,
          kind: "spend",
          policy: input.policyName,
          argsHash,
          arguments: action,
          principal: call.principal,
          session: sessionOf(call),
          createdAt: now,
        });
      }
      return {
        type: "spend_gate.evaluated",
        policy: input.policyName,
        policy_version: policy.version,
        action,
        committed_today: chpFloat(committed),
        day,
        ...gateFields(gate, message),
        ...(argsHash ? { args_hash: argsHash, ...requestedChannels(channels!) } : {}),
      };
    });
    const reply = gateReply(entry, gate!, committed, policy, message);
    return gate!.state === "HITL_REQUIRED" ? { ...reply, channels: channels!.channels } : reply;
  }

  /**
   * The checks every answer to a stored request passes before its transaction: a HITL_REQUIRED
   * request whose stored arguments hash to what its entry recorded, answered through a channel
   * policy allows for it now (`channel_not_allowed` otherwise: by default never the requesting
   * client's own form) by someone that channel allows (never the requester through a key, the
   * console or the operator endpoint; elicitation only from the requesting session, or without one
 * from the requester's own request; `operator`
   * only as the operator), within 24 h. Each refusal is recorded as `refusalType`. Returns the
   * request and policy's channel decision.
   */
  async #answerable(
    call: CallContext,
    requestSeq: number,
    via: SpendAnswerVia,
    refusalType: string,
  ): Promise<{ request: StoredSpendRequest; channels: ChannelDecision }> {
    const entry = await this.#core.entryAt(call, requestSeq);
    const ev = entry.event;
    const refuse = async (
      code: string,
      problem: string,
      errorCode: Refusal["errorCode"] = "permission_denied",
      recorded: Record<string, unknown> = {},
    ): Promise<never> => {
      const refused = await this.#core.record(call, { type: refusalType, request_seq: requestSeq, code, problem, ...recorded });
      throw refusalError({ code, problem, errorCode }, refused.seq);
    };
    if (ev.type !== "spend_gate.evaluated" && ev.type !== "reference.requested") {
      throw new ChaosError("failed_precondition", `ledger entry ${requestSeq} is not a spend request`);
    }
    if (ev.state !== "HITL_REQUIRED") {
      // An approval never turns a BLOCKED (or an already LOCKED) decision into anything else.
      await refuse("not_awaiting_approval", `request ${requestSeq} is ${String(ev.state)}, not waiting for a human (HITL_REQUIRED)`, "failed_precondition");
    }
    const [request] = await this.#core.read(call, (q) => readSpendRequests(q, call.tenant, { requestSeq }));
    if (!request) throw new ChaosError("failed_precondition", legacyRequest(requestSeq));
    if (!argumentsVerified(request)) {
      await refuse("arguments_mismatch", `the stored arguments of request ${requestSeq} do not hash to the args_hash its ledger entry recorded; nothing can be approved on them`, "failed_precondition");
    }
    // Policy's channels now, not those stored with the request: an operator who removes a
    // channel removes it from the requests still waiting too.
    const tool = request.tool ?? undefined;
    const channels = await this.#core.approvalChannels(call, { kind: "spend", spendPolicy: request.policy, tool });
    const about = `spend request ${requestSeq} (${tool ? `${tool}, ` : ""}spend policy ${request.policy})`;
    const notAllowed = channelRefusal(CHANNEL_OF_VIA[via], channels, about);
    if (notAllowed) await refuse("channel_not_allowed", notAllowed.problem, "permission_denied", notAllowed.recorded);
    if (via !== "elicitation" && call.principal === request.principal) {
      await refuse("self_approval", `${call.principal} made request ${requestSeq} and cannot approve it`);
    }
    if (via === "elicitation") {
      // Whoever asked (kit sameAsker): the requesting session; without one, the requester's own request.
      const asker = sameAsker(askerOfLabel(call.tenant, request.principal, request.session), call);
      if (!asker.same) await refuse(asker.code, asker.problem);
    }
    if (via === "operator" && call.principal !== OPERATOR_PRINCIPAL) {
      await refuse("not_operator", `approved_via "operator" is the local admin endpoint's; ${call.principal} is not the operator`);
    }
    if (this.#core.now().getTime() >= expiresAt(request).getTime()) {
      await refuse("request_expired", `request ${requestSeq} was made at ${request.createdAt.toISOString()} and could be answered for 24 hours: ask again`, "failed_precondition");
    }
    return { request, channels };
  }

  /**
   * ApproveSpend: a human approves the HITL_REQUIRED request recorded at `requestSeq`, once.
   * The action comes from the ledger, not from the approver; the gate is re-run under the
   * current policy and day total (an approval crosses the HITL threshold, never a hard rule).
   * Answered through elicitation (the requester's own session), a finance request gets its
   * receipt here and the approval is collected at once; any other channel leaves it to the
   * requester to collect (`receiptPending`), so the receipt never goes to the approver.
   */
  async approveSpend(call: CallContext, input: { requestSeq: number; approvedVia: SpendAnswerVia; ttlSeconds?: number }): Promise<ApproveReply> {
    const via = input.approvedVia;
    const ttl = checkedReceiptTtl(input.ttlSeconds);
    const { request, channels } = await this.#answerable(call, input.requestSeq, via, "spend.approval_refused");
    const ev = request.entry.event;
    const policyName = request.policy;
    const policy = await spendPolicyFor(this.#core, call, policyName);
    const action = ev.action as unknown as SpendAction;
    // The approval re-evaluates under the current policy, its Chaos Core checks included.
    const noConfidence = missingConfidence(policy, action.confidence, "the request's confidence");
    if (noConfidence) {
      const refused = await this.#core.record(call, { type: "spend.approval_refused", request_seq: input.requestSeq, code: "confidence_required", problem: noConfidence });
      throw refusalError({ code: "confidence_required", problem: noConfidence, errorCode: "failed_precondition" }, refused.seq);
    }
    const approver = answerActor(via, call.principal);
    const channel = CHANNEL_OF_VIA[via];
    const tool = request.kind === "finance" ? referenceTool(String(request.tool)) : undefined;
    // The requesting session's own answer reaches the requester now; any other waits for them.
    const collectNow = via === "elicitation";
    const now = this.#core.now();
    const day = utcDay(now);
    let gate: GateResult | undefined;
    let committed = 0;
    let receipt: Receipt | undefined;
    let message: string | undefined;
    let alreadyAnswered = false;
    const entry = await this.#core.record(call, { type: "spend.approved" }, async (tx, ctx) => {
      // One answer per request, ever: the request's marker row commits with this entry.
      if (!(await insertMarker(tx, call.tenant, answerMarker(input.requestSeq), ctx.seq))) {
        // Recorded, like every refusal, in the same transaction that found the marker.
        alreadyAnswered = true;
        return {
          type: "spend.approval_refused",
          request_seq: input.requestSeq,
          code: "already_answered",
          problem: `request ${input.requestSeq} was already answered`,
        };
      }
      committed = await committedToday(tx, call.tenant, policyName, day);
      gate = approveHuman(action, gatePolicy(policy), committed, approver);
      message = decisionInWords(gate, { policyName, policy: gatePolicy(policy), action, committedToday: committed });
      const locked = gate.state === "LOCKED";
      if (locked && tool && collectNow) {
        receipt = signFinanceAuthorization(this.#core.keyring, call, tool, { actor: approver, argsHash: request.argsHash, policyVersion: policy.version, ttl, now });
      } else if (!tool) {
        // A plain spend is committed by its approval; a finance call when it executes.
        await commitSpend(tx, call.tenant, policyName, day, gate.committed_delta);
      }
      if (locked && collectNow) await insertMarker(tx, call.tenant, collectMarker(input.requestSeq), ctx.seq);
      return {
        type: "spend.approved",
        request_seq: input.requestSeq,
        approver,
        approved_via: via,
        channel,
        channels_rule: channels.matchedRule,
        requester: request.principal,
        policy: policyName,
        policy_version: policy.version,
        action: recordedAction(action),
        committed_today: chpFloat(committed),
        ...gateFields(gate, message),
        ...(tool ? { tool: tool.name } : {}),
        receipt_pending: locked && !collectNow,
        ...(locked && collectNow ? { collected: true } : {}),
        ...(receipt ? { receipt_nonce: receipt.nonce, receipt_kid: receipt.kid, expiry: receipt.expiry } : {}),
      };
    });
    if (alreadyAnswered) {
      throw new ChaosError("failed_precondition", `already_answered: request ${input.requestSeq} was already answered (refusal recorded as ledger entry ${entry.seq})`);
    }
    return {
      ...gateReply(entry, gate!, committed, policy, message, receipt),
      receiptPending: gate!.state === "LOCKED" && !collectNow,
      channel,
      requester: request.principal,
    };
  }

  /**
   * DeclineSpend: a person refuses the HITL_REQUIRED request at `requestSeq`; it never runs.
   * The same people may decline as may approve, once, and the decline is the request's answer.
   */
  async declineSpend(call: CallContext, input: { requestSeq: number; approvedVia: SpendAnswerVia; reason?: string }) {
    const reason = input.reason ?? "";
    if (reason.length > 500) throw new ChaosError("invalid_argument", "reason: at most 500 characters");
    const via = input.approvedVia;
    const { request, channels } = await this.#answerable(call, input.requestSeq, via, "spend.decline_refused");
    const declinedBy = answerActor(via, call.principal);
    const channel = CHANNEL_OF_VIA[via];
    let alreadyAnswered = false;
    const entry = await this.#core.record(call, { type: "spend.declined" }, async (tx, ctx) => {
      if (!(await insertMarker(tx, call.tenant, answerMarker(input.requestSeq), ctx.seq))) {
        alreadyAnswered = true;
        return { type: "spend.decline_refused", request_seq: input.requestSeq, code: "already_answered", problem: `request ${input.requestSeq} was already answered` };
      }
      return {
        type: "spend.declined",
        request_seq: input.requestSeq,
        declined_by: declinedBy,
        approved_via: via,
        channel,
        channels_rule: channels.matchedRule,
        requester: request.principal,
        policy: request.policy,
        ...(request.tool ? { tool: request.tool } : {}),
        reason,
      };
    });
    if (alreadyAnswered) {
      throw new ChaosError("failed_precondition", `already_answered: request ${input.requestSeq} was already answered (refusal recorded as ledger entry ${entry.seq})`);
    }
    return { entry, declinedBy, channel };
  }
}
