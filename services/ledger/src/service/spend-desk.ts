import { ChaosError, askerOfLabel, chpFloat, contentHash, isChpFloat, sameAsker, type CallContext, type Queryable } from "@chaos-core/kit";
import { channelRefusal, type ChannelDecision } from "../adapters/approval-channels.js";
import { ALREADY_COLLECTED, APPROVAL_DECLINED, APPROVAL_PENDING, DAILY_CAP_EXCEEDED, financeCode, type CollectRefusalCode } from "../authz/codes.js";
import { MAX_RECEIPT_TTL_SECONDS, MIN_RECEIPT_TTL_SECONDS } from "../authz/issue.js";
import { newNonce, signReceipt, type Receipt } from "../authz/receipt.js";
import type { ToolPolicyDocument } from "../authz/tool-policy.js";
import { referenceTool, type ReferenceTool } from "../domain/reference-tools.js";
import { approveHuman, evaluateGate, type GateResult, type SpendAction } from "../domain/spend-gate.js";
import { blockedOnlyToday, capsInWords, decisionInWords } from "../domain/spend-limits.js";
import { gatePolicy, missingConfidence, tighten, type SpendPolicyConfig } from "../domain/spend-policies.js";
import { SPEND_REQUEST_WINDOW_MS } from "../domain/spend-request-window.js";
import type { LedgerEntry } from "../log/entry.js";
import { receiptTtl, sessionOf, type LedgerCore } from "./ledger-core.js";
import { toPlainJson } from "./plain-json.js";
import {
  answerActor,
  answerOf,
  argumentsVerified,
  CHANNEL_OF_VIA,
  expiresAt,
  insertSpendRequest,
  OPERATOR_PRINCIPAL,
  readSpendRequests,
  requestChannels,
  spendRequestState,
  type SpendAnswerVia,
  type SpendRequestState,
  type StoredSpendRequest,
} from "./spend-requests.js";

/** The UTC calendar day of `now` (CHP's daily window), as `YYYY-MM-DD`. */
function utcDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}

/** The day's committed total of one policy, read under the tenant's ledger lock. */
async function committedToday(tx: Queryable, tenant: string, policy: string, day: string): Promise<number> {
  const res = await tx.query<{ committed: number | string }>(
    "SELECT committed FROM ledger.spend_days WHERE tenant_id = $1 AND policy_name = $2 AND day = $3",
    [tenant, policy, day],
  );
  return res.rows[0] ? Number(res.rows[0].committed) : 0;
}

async function commitSpend(tx: Queryable, tenant: string, policy: string, day: string, amount: number): Promise<void> {
  if (amount <= 0) return;
  await tx.query(
    `INSERT INTO ledger.spend_days (tenant_id, policy_name, day, committed) VALUES ($1, $2, $3, $4)
     ON CONFLICT (tenant_id, policy_name, day) DO UPDATE SET committed = ledger.spend_days.committed + EXCLUDED.committed`,
    [tenant, policy, day, amount],
  );
}

/** The gate's action as hashed and recorded: gate numbers are CHP floats. */
function recordedAction(a: SpendAction): Record<string, unknown> {
  const n = (v: unknown) => (isChpFloat(v) ? v : chpFloat(Number(v)));
  return { action: a.action, asset: a.asset, notional: n(a.notional), confidence: a.confidence == null ? null : n(a.confidence) };
}

/** A gate decision as its entry records it; `message` is {@link decisionInWords}, what the answer says. */
function gateFields(g: GateResult, message: string | undefined): Record<string, unknown> {
  return {
    state: g.state,
    reason: g.reason,
    failed_rules: [...g.failed_rules],
    claims: g.claims.map((c) => ({ ...c })),
    committed_delta: chpFloat(g.committed_delta),
    content_hash: g.content_hash,
    reason_code: g.state === "BLOCKED" ? "policy_deny" : null,
    ...(message !== undefined ? { message } : {}),
  };
}

function ttlOf(ttlSeconds: number | undefined): number {
  const ttl = receiptTtl(ttlSeconds);
  if (!Number.isInteger(ttl) || ttl < MIN_RECEIPT_TTL_SECONDS || ttl > MAX_RECEIPT_TTL_SECONDS) {
    throw new ChaosError("invalid_argument", `ttl_seconds: must be a whole number from ${MIN_RECEIPT_TTL_SECONDS} to ${MAX_RECEIPT_TTL_SECONDS}`);
  }
  return ttl;
}

/** The tool policy a finance receipt is checked against: the tool, its scope, the spend policy's version. */
function financeToolPolicy(tool: ReferenceTool, policy: SpendPolicyConfig): ToolPolicyDocument {
  return { version: policy.version, tools: { [tool.name]: { risk: tool.risk, resources: [tool.scope] } } };
}

/** Inserts a marker row in `ledger.nonces`, once; false when it was there already. */
async function insertMarker(tx: Queryable, tenant: string, marker: string, seq: number): Promise<boolean> {
  const res = await tx.query(
    "INSERT INTO ledger.nonces (tenant_id, nonce, entry_seq) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING nonce",
    [tenant, marker, seq],
  );
  return res.rows.length > 0;
}

/**
 * What a request entry records about who may answer it: the channels policy allowed when it was
 * made and the rule that chose them (an answer is checked again when it is given).
 */
function requestedChannels(d: ChannelDecision): Record<string, unknown> {
  return { approval_channels: [...d.channels], channels_rule: d.matchedRule, channels_policy_version: d.policyVersion };
}

/** The marker of a request's one answer (approval or decline). */
const answerMarker = (seq: number) => `request-${seq}`;
/** The marker of an approval's one collection. */
const collectMarker = (seq: number) => `collect-${seq}`;

/** What the gate answered, for a reply. */
export interface GateReply {
  readonly state: string;
  readonly contentHash: string;
  readonly result: Record<string, unknown>;
  readonly entry: LedgerEntry;
  readonly receipt?: Receipt;
  /** HITL_REQUIRED: the channels policy allows for the request, as stored with it. */
  readonly channels?: readonly string[];
}

/** ApproveSpend's answer: the gate's, and who collects it. */
export interface ApproveReply extends GateReply {
  /** Locked, and the receipt (or, for a plain spend, the news) waits for the requester. */
  readonly receiptPending: boolean;
  readonly channel: string;
  readonly requester: string;
}

/** A stored spend request as a caller sees it. */
export interface SpendRequestView {
  readonly request: StoredSpendRequest;
  readonly state: SpendRequestState;
  readonly expiresAt: Date;
  readonly argumentsVerified: boolean;
  readonly answer?: { readonly answeredBy: string; readonly channel: string; readonly reason: string };
  /** The channels policy allowed when it was made, and the rule; empty for an older request. */
  readonly channels: { readonly channels: readonly string[]; readonly rule: string };
}

/** A collected approval. */
export interface CollectReply {
  readonly state: string;
  readonly contentHash: string;
  /** The approval's gate result. */
  readonly result: Record<string, unknown>;
  readonly receipt?: Receipt;
  readonly entry: LedgerEntry;
  readonly approvedBy: string;
  readonly channel: string;
  readonly approvalSeq: number;
}

/** What a finance reference call did. */
export interface FinanceOutcome {
  readonly executed: boolean;
  /** EXECUTED or the CHP short code. */
  readonly code: string;
  readonly detailCode: string;
  readonly result?: Record<string, unknown>;
  readonly problem?: string;
  readonly entry: LedgerEntry;
  /** The stored request whose approval ran it, or that holds it (pending, declined). */
  readonly approvalRequestSeq?: number;
  /** With a request still waiting: the channels that may approve it. */
  readonly approvalChannels?: readonly string[];
  /**
   * Not executed, and the spend gate blocks the call as presented (today's total included): no
   * receipt can authorize it, and `problem` names the caps.
   */
  readonly gateBlocks?: boolean;
}

/** Why a HITL_REQUIRED entry without a stored request cannot be answered. */
function legacyRequest(seq: number): string {
  return `ledger entry ${seq} was recorded before spend requests were stored with their arguments, so no person can be shown what it would run: make the request again`;
}

/** A refusal decided inside a flush transaction, thrown once its entry is committed. */
interface Refusal {
  readonly code: string;
  readonly problem: string;
  readonly errorCode: "permission_denied" | "failed_precondition";
}

function refusalError(r: Refusal, seq: number): ChaosError {
  return new ChaosError(r.errorCode, `${r.code}: ${r.problem} (refusal recorded as ledger entry ${seq})`);
}

/** The gate result an approval recorded, as a reply shows it. */
function approvalResult(approval: Record<string, unknown>, approvalSeq: number, policy: SpendPolicyConfig): Record<string, unknown> {
  return {
    state: approval.state,
    reason: approval.reason,
    claims: approval.claims,
    failed_rules: approval.failed_rules,
    committed_today: approval.committed_today,
    committed_delta: approval.committed_delta,
    content_hash: approval.content_hash,
    policy: { ...policy },
    approved_by: approval.approver,
    channel: approval.channel ?? CHANNEL_OF_VIA[approval.approved_via === "elicitation" ? "elicitation" : "approver_role"],
    ledger_seq: approvalSeq,
  };
}

/**
 * The CHP spend gate and the finance reference tools on top of the ledger. Limits are the
 * operator's (an agent may only tighten), `committed_today` is the ledger's own UTC-day total
 * read under the tenant's ledger lock, and every decision is recorded in the same transaction
 * that reads or moves that total — two concurrent spends cannot both pass a daily cap.
 */
export class SpendDesk {
  readonly #core: LedgerCore;

  constructor(core: LedgerCore) {
    this.#core = core;
  }

  async #policy(call: CallContext, name: string): Promise<SpendPolicyConfig> {
    const policies = (await this.#core.policies.forTenant(call.tenant)).spendPolicies;
    if (!Object.hasOwn(policies, name)) {
      throw new ChaosError("not_found", `no spend policy "${name}" for this tenant; the operator configured: ${Object.keys(policies).join(", ") || "none"}`);
    }
    return policies[name]!;
  }

  /**
   * EvaluateSpendGate. A LOCKED decision commits its notional to the day's total (the gate's
   * `committed_delta`); BLOCKED is recorded with reason code `policy_deny`; HITL_REQUIRED waits
   * for {@link approveSpend} with the entry's sequence number.
   */
  async evaluateSpendGate(call: CallContext, input: { policyName: string; action: SpendAction; agentPolicy?: unknown }): Promise<GateReply> {
    const operator = await this.#policy(call, input.policyName);
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
    await this.#requireConfidence(call, { policy: input.policyName, version: policy.version }, missingConfidence(policy, input.action.confidence, "action.confidence"));
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
    const reply = this.#reply(entry, gate!, committed, policy, message);
    return gate!.state === "HITL_REQUIRED" ? { ...reply, channels: channels!.channels } : reply;
  }

  /**
   * The operator's `require_confidence`, checked before the CHP gate: a spend without a
   * confidence is refused, and the refusal recorded, instead of the gate skipping
   * `min-confidence`. `problem` is {@link missingConfidence}'s answer; undefined passes.
   */
  async #requireConfidence(call: CallContext, about: { policy: string; version: string; tool?: string }, problem: string | undefined): Promise<void> {
    if (problem === undefined) return;
    const entry = await this.#core.record(call, {
      type: "spend_gate.refused",
      policy: about.policy,
      policy_version: about.version,
      ...(about.tool ? { tool: about.tool } : {}),
      code: "confidence_required",
      problem,
    });
    throw new ChaosError("policy_denied", `confidence_required: ${problem} (spend policy "${about.policy}"; refusal recorded as ledger entry ${entry.seq})`);
  }

  /** A gate decision as a reply shows it; `message` ({@link decisionInWords}) names the caps that decided it. */
  #reply(entry: LedgerEntry, gate: GateResult, committed: number, policy: SpendPolicyConfig, message: string | undefined, receipt?: Receipt): GateReply {
    return {
      state: gate.state,
      contentHash: gate.content_hash,
      result: {
        state: gate.state,
        allowed: gate.allowed,
        requires_human: gate.requires_human,
        reason: gate.reason,
        claims: gate.claims.map((c) => ({ ...c })),
        failed_rules: [...gate.failed_rules],
        committed_today: committed,
        committed_delta: gate.committed_delta,
        content_hash: gate.content_hash,
        provenance: toPlainJson(gate.provenance),
        policy: { ...policy },
        ledger_seq: entry.seq,
        ...(message !== undefined ? { message } : {}),
      },
      entry,
      ...(receipt ? { receipt } : {}),
    };
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

  /** An `authorization` receipt for a finance call, signed now. */
  #signAuthorization(call: CallContext, tool: ReferenceTool, bind: { actor: string; argsHash: string; policyVersion: string; ttl: number; now: Date }): Receipt {
    return signReceipt(
      {
        kind: "authorization",
        schema_version: 1,
        tenant: call.tenant,
        actor: bind.actor,
        tool: tool.name,
        resource: tool.scope,
        args_hash: bind.argsHash,
        policy_version: bind.policyVersion,
        risk: tool.risk,
        issued_at: bind.now.toISOString(),
        expiry: new Date(bind.now.getTime() + bind.ttl * 1000).toISOString(),
        decision: "allow",
        nonce: newNonce(),
      },
      this.#core.keyring,
    );
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
    const ttl = ttlOf(input.ttlSeconds);
    const { request, channels } = await this.#answerable(call, input.requestSeq, via, "spend.approval_refused");
    const ev = request.entry.event;
    const policyName = request.policy;
    const policy = await this.#policy(call, policyName);
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
        receipt = this.#signAuthorization(call, tool, { actor: approver, argsHash: request.argsHash, policyVersion: policy.version, ttl, now });
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
      ...this.#reply(entry, gate!, committed, policy, message, receipt),
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

  #view(request: StoredSpendRequest, now: Date): SpendRequestView {
    const answer = answerOf(request);
    return {
      request,
      state: spendRequestState(request, now),
      expiresAt: expiresAt(request),
      argumentsVerified: argumentsVerified(request),
      ...(answer ? { answer } : {}),
      channels: requestChannels(request),
    };
  }

  /** GetSpendRequest: one stored request with every argument and where it stands. */
  async getSpendRequest(call: CallContext, requestSeq: number): Promise<SpendRequestView> {
    if (!Number.isSafeInteger(requestSeq) || requestSeq < 1) throw new ChaosError("invalid_argument", "request_seq: must be a ledger sequence number (1 or more)");
    const [request] = await this.#core.read(call, (q) => readSpendRequests(q, call.tenant, { requestSeq }));
    if (!request) {
      // Say what the entry is instead: absent, not a spend, decided without a person, or older than stored requests.
      const ev = (await this.#core.entryAt(call, requestSeq)).event;
      if (ev.type !== "spend_gate.evaluated" && ev.type !== "reference.requested") {
        throw new ChaosError("failed_precondition", `ledger entry ${requestSeq} is not a spend request`);
      }
      if (ev.state !== "HITL_REQUIRED") {
        throw new ChaosError("failed_precondition", `not_awaiting_approval: request ${requestSeq} is ${String(ev.state)}, not waiting for a human (HITL_REQUIRED)`);
      }
      throw new ChaosError("failed_precondition", legacyRequest(requestSeq));
    }
    return this.#view(request, this.#core.now());
  }

  /** ListSpendRequests: the tenant's requests no one has answered yet, soonest to expire first. */
  async listSpendRequests(call: CallContext, input: { limit?: number }): Promise<SpendRequestView[]> {
    const limit = input.limit === undefined || input.limit === 0 ? 100 : input.limit;
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new ChaosError("invalid_argument", "limit: must be from 1 to 500");
    const now = this.#core.now();
    const pendingAfter = new Date(now.getTime() - SPEND_REQUEST_WINDOW_MS);
    const requests = await this.#core.read(call, (q) => readSpendRequests(q, call.tenant, { pendingAfter, limit }));
    return requests.map((r) => this.#view(r, now));
  }

  /**
   * CollectSpendApproval: the requester takes the approval another principal gave, once. A
   * finance request's receipt is signed now (for the recorded approver, under the approval's
   * policy version), so an approval given an hour ago does not hand over an expired receipt;
   * it is never stored. Everything is decided under the tenant's ledger lock, and every
   * refusal recorded as `spend.collect_refused`.
   */
  async collectSpendApproval(call: CallContext, input: { requestSeq: number; ttlSeconds?: number }): Promise<CollectReply> {
    const ttl = ttlOf(input.ttlSeconds);
    const seq = input.requestSeq;
    const view = await this.getSpendRequest(call, seq);
    const request = view.request;
    const refuse = async (code: CollectRefusalCode, problem: string, errorCode: Refusal["errorCode"] = "failed_precondition"): Promise<never> => {
      const refused = await this.#core.record(call, { type: "spend.collect_refused", request_seq: seq, code, problem });
      throw refusalError({ code, problem, errorCode }, refused.seq);
    };
    if (call.principal !== request.principal) {
      await refuse("not_requester", `request ${seq} was made by ${request.principal}; only its requester collects the approval`, "permission_denied");
    }
    if (!view.argumentsVerified) {
      await refuse("arguments_mismatch", `the stored arguments of request ${seq} do not hash to the args_hash its ledger entry recorded`);
    }
    const tool = request.kind === "finance" ? referenceTool(String(request.tool)) : undefined;
    const policy = await this.#policy(call, request.policy);
    const now = this.#core.now();
    let refusal: Refusal | undefined;
    let receipt: Receipt | undefined;
    let approval: { seq: number; event: Record<string, unknown> } | undefined;
    const entry = await this.#core.record(call, { type: "spend.collected" }, async (tx, ctx) => {
      const refused = (code: CollectRefusalCode, problem: string) => {
        refusal = { code, problem, errorCode: "failed_precondition" };
        return { type: "spend.collect_refused", request_seq: seq, code, problem };
      };
      // Read again under the lock: an answer or another collection may have landed since.
      const [current] = await readSpendRequests(tx, call.tenant, { requestSeq: seq });
      const answer = answerOf(current!);
      switch (spendRequestState(current!, now)) {
        case "PENDING":
          return refused("approval_pending", `no person has answered request ${seq} yet`);
        case "DECLINED":
          return refused("declined", `request ${seq} was declined by ${answer!.answeredBy} (${answer!.channel})${answer!.reason ? `: ${answer!.reason}` : ""}; it never runs`);
        case "BLOCKED": {
          const approved = current!.answer!.event;
          // The caps as the approval named them (an approval recorded before it did says only CHP's reason).
          const caps = typeof approved.message === "string" ? `: ${approved.message}` : "";
          return refused("approval_blocked", `the approval of request ${seq} re-ran the gate and it is ${String(approved.state)} (${String(approved.reason)})${caps}; nothing may run`);
        }
        case "COLLECTED":
          return refused("already_collected", `the approval of request ${seq} was collected in ledger entry ${current!.collectSeq}; an approval is collected once`);
        case "EXPIRED":
          return refused("request_expired", `request ${seq} was made at ${current!.createdAt.toISOString()}; its approval could be collected for 24 hours: ask again`);
        case "APPROVED":
          break;
      }
      const approved = current!.answer!;
      const version = String(approved.event.policy_version);
      if (version !== policy.version) {
        return refused("policy_version_mismatch", `request ${seq} was approved under spend policy ${request.policy} version ${version}; it is now ${policy.version}: ask again`);
      }
      if (!(await insertMarker(tx, call.tenant, collectMarker(seq), ctx.seq))) {
        return refused("already_collected", `the approval of request ${seq} was collected before; an approval is collected once`);
      }
      approval = approved;
      if (tool) {
        receipt = this.#signAuthorization(call, tool, { actor: String(approved.event.approver), argsHash: current!.argsHash, policyVersion: version, ttl, now });
      }
      return {
        type: "spend.collected",
        request_seq: seq,
        approval_seq: approved.seq,
        approver: approved.event.approver,
        channel: answer!.channel,
        requester: request.principal,
        policy: request.policy,
        policy_version: version,
        ...(tool ? { tool: tool.name } : {}),
        ...(receipt ? { receipt_nonce: receipt.nonce, receipt_kid: receipt.kid, expiry: receipt.expiry } : {}),
      };
    });
    if (refusal) throw refusalError(refusal, entry.seq);
    const a = approval!;
    return {
      state: String(a.event.state),
      contentHash: String(a.event.content_hash),
      result: toPlainJson(approvalResult(a.event, a.seq, policy)) as Record<string, unknown>,
      ...(receipt ? { receipt } : {}),
      entry,
      approvedBy: String(a.event.approver),
      channel: String(entry.event.channel),
      approvalSeq: a.seq,
    };
  }

  /**
   * The caller's stored requests for one exact finance call, by state: an approval to collect,
   * else one still waiting, else the newest decline.
   */
  async #requestsFor(call: CallContext, tool: string, argsHash: string) {
    const requests = await this.#core.read(call, (q) => readSpendRequests(q, call.tenant, { call: { principal: call.principal, tool, argsHash } }));
    const now = this.#core.now();
    const views = requests.filter(argumentsVerified).map((r) => ({ request: r, state: spendRequestState(r, now) }));
    return {
      approved: views.find((v) => v.state === "APPROVED")?.request,
      pending: views.findLast((v) => v.state === "PENDING")?.request,
      declined: views.findLast((v) => v.state === "DECLINED")?.request,
    };
  }

  #referenceCall(name: string, args: unknown): { tool: ReferenceTool; args: Record<string, unknown> } {
    const tool = referenceTool(name);
    if (!tool) throw new ChaosError("invalid_argument", `tool: "${name}" is not a finance reference tool`);
    const parsed = tool.args.safeParse(args);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new ChaosError("invalid_argument", `arguments.${issue.path.join(".")}: ${issue.message}`);
    }
    return { tool, args: parsed.data as Record<string, unknown> };
  }

  /**
   * RequestAuthorization: the gate decides under the tool's spend policy. LOCKED (under the
   * HITL threshold) → an `authorization` receipt bound to tool, scope and argument hash, signed
   * for the gate (`actor` names the policy); HITL_REQUIRED → stored as a spend request with
   * every argument, for a person to approve; BLOCKED → `policy_deny`. When a person already
   * approved this exact call for this requester, that approval is collected instead
   * (`approvalRequestSeq`). Nothing is committed to the day's total until the tool executes.
   */
  async requestAuthorization(call: CallContext, input: { tool: string; args: unknown; ttlSeconds?: number }) {
    const { tool, args } = this.#referenceCall(input.tool, input.args);
    const policy = await this.#policy(call, tool.spendPolicy);
    const ttl = ttlOf(input.ttlSeconds);
    const argsHash = contentHash(args);
    const { approved } = await this.#requestsFor(call, tool.name, argsHash);
    if (approved) {
      const collected = await this.collectSpendApproval(call, { requestSeq: approved.requestSeq, ...(input.ttlSeconds !== undefined ? { ttlSeconds: input.ttlSeconds } : {}) });
      return { status: "AUTHORIZED", code: "AUTHORIZED", receipt: collected.receipt, gate: collected.result, entry: collected.entry, approvalRequestSeq: approved.requestSeq, channels: undefined };
    }
    const action = tool.toAction(args);
    await this.#requireConfidence(
      call,
      { policy: tool.spendPolicy, version: policy.version, tool: tool.name },
      missingConfidence(policy, action.confidence, "args.confidence"),
    );
    // Asked before the transaction (the day's total can only block a spend, never hold it).
    const held = evaluateGate(action, gatePolicy(policy), 0).state === "HITL_REQUIRED";
    const channels = held ? await this.#core.approvalChannels(call, { kind: "spend", spendPolicy: tool.spendPolicy, tool: tool.name }) : undefined;
    const now = this.#core.now();
    const day = utcDay(now);
    let gate: GateResult | undefined;
    let committed = 0;
    let receipt: Receipt | undefined;
    let message: string | undefined;
    const entry = await this.#core.record(call, { type: "reference.requested" }, async (tx, ctx) => {
      committed = await committedToday(tx, call.tenant, tool.spendPolicy, day);
      gate = evaluateGate(action, gatePolicy(policy), committed);
      message = decisionInWords(gate, { policyName: tool.spendPolicy, policy: gatePolicy(policy), action, committedToday: committed });
      if (gate.state === "LOCKED") {
        receipt = this.#signAuthorization(call, tool, { actor: `chp-gate:${policy.version}`, argsHash, policyVersion: policy.version, ttl, now });
      } else if (gate.state === "HITL_REQUIRED") {
        // The entry records the hash; the request keeps every argument for the person who answers.
        await insertSpendRequest(tx, call.tenant, {
          requestSeq: ctx.seq,
          kind: "finance",
          policy: tool.spendPolicy,
          tool: tool.name,
          argsHash,
          arguments: args,
          principal: call.principal,
          session: sessionOf(call),
          createdAt: now,
        });
      }
      return {
        type: "reference.requested",
        tool: tool.name,
        scope: tool.scope,
        args_hash: argsHash,
        policy: tool.spendPolicy,
        policy_version: policy.version,
        action: recordedAction(action),
        committed_today: chpFloat(committed),
        status: gate.state === "LOCKED" ? "AUTHORIZED" : gate.state === "HITL_REQUIRED" ? "HITL_REQUIRED" : "DENIED",
        ...gateFields(gate, message),
        ...(gate.state === "HITL_REQUIRED" ? requestedChannels(channels!) : {}),
        ...(receipt ? { receipt_nonce: receipt.nonce, receipt_kid: receipt.kid, expiry: receipt.expiry } : {}),
      };
    });
    const g = gate!;
    const status = g.state === "LOCKED" ? "AUTHORIZED" : g.state === "HITL_REQUIRED" ? "HITL_REQUIRED" : "DENIED";
    const reply = this.#reply(entry, g, committed, policy, message);
    return {
      status,
      code: g.state === "BLOCKED" ? "policy_deny" : status,
      receipt,
      gate: reply.result,
      entry,
      approvalRequestSeq: undefined,
      channels: g.state === "HITL_REQUIRED" ? channels!.channels : undefined,
    };
  }

  /**
   * ExecuteReferenceTool: the receipt must authorize this exact call (tool, scope, argument
   * hash, spend policy version); then, in the same transaction, the daily cap is checked again
   * against the ledger's total, the spend committed, the nonce burned and the synthetic result
   * recorded. Denials carry the short CHP code (`policy_deny`, `expired`, `replay`,
   * `args_changed`, `missing_receipt`, `ambiguous_policy`), the detailed one that says what
   * happened (`FINANCE_DETAIL_CODES`) and the problem in words. Called without a receipt for
   * a call that has a stored request of this caller, the request decides: approved → the
   * approval is collected and the call runs (`approvalRequestSeq`); still waiting →
   * `approval_pending`; declined → `approval_declined`. Without one, a call the gate holds for a
   * person is stored as a request now and answered `approval_pending`.
   */
  async executeReferenceTool(call: CallContext, input: { tool: string; args: unknown; receipt?: unknown }): Promise<FinanceOutcome> {
    const { tool, args } = this.#referenceCall(input.tool, input.args);
    const policies = (await this.#core.policies.forTenant(call.tenant)).spendPolicies;
    const policy = Object.hasOwn(policies, tool.spendPolicy) ? policies[tool.spendPolicy] : undefined;
    if (input.receipt === undefined && policy) {
      // No receipt: the loop closes here when a person answered a request for this exact call.
      const found = await this.#requestsFor(call, tool.name, contentHash(args));
      if (found.approved) return this.#runApproved(call, tool, args, policy, found.approved);
      // A call a person must approve that nobody asked about yet becomes a request now, so the
      // agent that called the tool directly is told how a person approves it.
      const asked = found.pending || found.declined ? undefined : await this.#askForPerson(call, tool, args, policy);
      const waiting = found.pending ?? found.declined ?? asked;
      if (waiting) {
        const answer = answerOf(waiting);
        const code = found.declined && !found.pending ? APPROVAL_DECLINED : APPROVAL_PENDING;
        const problem =
          code === APPROVAL_PENDING
            ? `spend request ${waiting.requestSeq} for this exact call waits for a person's approval${asked ? " (stored now: a person must approve this call)" : ""}${this.#whyHeld(tool, args, policy)}; nothing runs until one approves it`
            : `spend request ${waiting.requestSeq} for this exact call was declined by ${answer!.answeredBy} (${answer!.channel})${answer!.reason ? `: ${answer!.reason}` : ""}; it never runs`;
        const entry = await this.#core.record(call, {
          type: "reference.executed",
          tool: tool.name,
          resource: tool.scope,
          args_hash: waiting.argsHash,
          policy_version: policy.version,
          code,
          step: "approval",
          authorized: false,
          approval_request_seq: waiting.requestSeq,
          problem,
        });
        return {
          executed: false,
          code: financeCode(code),
          detailCode: code,
          problem,
          entry,
          approvalRequestSeq: waiting.requestSeq,
          ...(code === APPROVAL_PENDING ? { approvalChannels: requestChannels(waiting).channels } : {}),
        };
      }
    }
    return this.#execute(call, tool, args, policy, input.receipt);
  }

  /** `, because <the threshold it reached>` while the policy holds the call for a person; else "". */
  #whyHeld(tool: ReferenceTool, args: Record<string, unknown>, policy: SpendPolicyConfig): string {
    const action = tool.toAction(args);
    // The threshold alone holds a call; the day's total can only block it.
    const gate = evaluateGate(action, gatePolicy(policy), 0);
    if (gate.state !== "HITL_REQUIRED") return "";
    return `, because ${decisionInWords(gate, { policyName: tool.spendPolicy, policy: gatePolicy(policy), action, committedToday: 0 })}`;
  }

  /**
   * Stores a request for a receiptless finance call that the gate holds for a person (as
   * RequestAuthorization would record it), or nothing when the gate would lock or block it, or
   * the policy's own checks refuse it: those keep the plain `missing_receipt` answer.
   */
  async #askForPerson(call: CallContext, tool: ReferenceTool, args: Record<string, unknown>, policy: SpendPolicyConfig): Promise<StoredSpendRequest | undefined> {
    const action = tool.toAction(args);
    if (missingConfidence(policy, action.confidence, "args.confidence")) return undefined;
    // Whether the threshold holds it does not depend on the day's total (that can only block it).
    if (evaluateGate(action, gatePolicy(policy), 0).state !== "HITL_REQUIRED") return undefined;
    const requested = await this.requestAuthorization(call, { tool: tool.name, args });
    if (requested.status !== "HITL_REQUIRED") return undefined;
    const [request] = await this.#core.read(call, (q) => readSpendRequests(q, call.tenant, { requestSeq: requested.entry.seq }));
    return request;
  }

  /**
   * Runs a finance call a person approved, collecting the approval in the same transaction:
   * a receipt is signed now for the recorded approver and authorized at once (it never leaves
   * the ledger), and the collection marker commits with the execution, so of any number of
   * concurrent calls exactly one runs; the others are `already_collected` (short code `replay`).
   */
  async #runApproved(call: CallContext, tool: ReferenceTool, args: Record<string, unknown>, policy: SpendPolicyConfig, request: StoredSpendRequest): Promise<FinanceOutcome> {
    const approval = request.answer!.event;
    const receipt = this.#signAuthorization(call, tool, {
      actor: String(approval.approver),
      argsHash: request.argsHash,
      policyVersion: String(approval.policy_version),
      ttl: receiptTtl(undefined),
      now: this.#core.now(),
    });
    const outcome = await this.#execute(call, tool, args, policy, receipt, async (tx, ctx) => {
      if (!(await insertMarker(tx, call.tenant, collectMarker(request.requestSeq), ctx.seq))) {
        return {
          code: ALREADY_COLLECTED,
          problem: `the approval of spend request ${request.requestSeq} was already collected by another call; an approval runs its call once`,
        };
      }
      return undefined;
    }, { approval_request_seq: request.requestSeq, approval_seq: request.answer!.seq, approver: approval.approver });
    return { ...outcome, approvalRequestSeq: request.requestSeq };
  }

  /**
   * ExecuteReferenceTool's authorization and execution: the receipt must authorize this exact
   * call; then, in the same transaction, the daily cap is checked again against the ledger's
   * total, `collect` (a picked-up approval's marker) may refuse, the spend is committed, the
   * nonce burned and the synthetic result recorded.
   */
  async #execute(
    call: CallContext,
    tool: ReferenceTool,
    args: Record<string, unknown>,
    policy: SpendPolicyConfig | undefined,
    receipt: unknown,
    collect?: (tx: Queryable, ctx: { seq: number }) => Promise<{ code: string; problem: string } | undefined>,
    recorded: Record<string, unknown> = {},
  ): Promise<FinanceOutcome> {
    const policies = (await this.#core.policies.forTenant(call.tenant)).spendPolicies;
    const action = tool.toAction(args);
    const day = utcDay(this.#core.now());
    const noReceiptCan = policy ? await this.#noReceiptCan(call, tool, action, policy, day) : undefined;
    let result: Record<string, unknown> | undefined;
    const outcome = await this.#core.authorize(
      call,
      {
        toolCall: { tool: tool.name, resource: tool.scope, arguments: args },
        receipt,
        kind: "authorization",
        // No spend policy: an incomplete policy, refused by the check chain as ambiguous_policy.
        policy: policy ? financeToolPolicy(tool, policy) : null,
        missingPolicy:
          `no spend policy "${tool.spendPolicy}" is configured for this tenant, so ${tool.name} cannot run; the operator ` +
          `configured: ${Object.keys(policies).join(", ") || "none"}`,
        eventType: "reference.executed",
        ...(noReceiptCan !== undefined ? { denialNote: noReceiptCan } : {}),
      },
      async (tx, ctx) => {
        const committed = await committedToday(tx, call.tenant, tool.spendPolicy, day);
        // Checked before anything is written: a refusal here leaves the approval uncollected.
        if (committed + action.notional > policy!.daily_cap) {
          const facts = { policyName: tool.spendPolicy, policy: gatePolicy(policy!), action, committedToday: committed };
          return { deny: { code: DAILY_CAP_EXCEEDED, problem: `daily cap on ${day} (UTC): ${capsInWords(["daily-cap"], facts)}` }, extra: recorded };
        }
        const refused = collect ? await collect(tx, ctx) : undefined;
        if (refused) return { deny: refused, extra: recorded };
        await commitSpend(tx, call.tenant, tool.spendPolicy, day, action.notional);
        result = tool.simulate(args, `${call.tenant}:${String((receipt as { nonce?: unknown }).nonce)}`);
        return { extra: { ...recorded, result, committed_after: chpFloat(committed + action.notional), day } };
      },
    );
    if (outcome.authorized) {
      return { executed: true, code: "EXECUTED", detailCode: "AUTHORIZED", result: result!, entry: outcome.entry };
    }
    return {
      executed: false,
      code: financeCode(outcome.code),
      detailCode: outcome.code,
      entry: outcome.entry,
      ...(outcome.problem !== undefined ? { problem: outcome.problem } : {}),
      ...(noReceiptCan !== undefined ? { gateBlocks: true } : {}),
    };
  }

  /**
   * When the gate blocks this call as presented, what every refusal of it adds: that no receipt
   * can authorize it, and the caps that block it ({@link capsInWords}); undefined otherwise. The
   * check chain still decides the code (a call without a receipt is `missing_receipt` first, as
   * CHP orders it). The day's total is read outside the ledger lock: these are words, and the
   * daily cap is decided again under the lock before anything runs.
   */
  async #noReceiptCan(call: CallContext, tool: ReferenceTool, action: SpendAction, policy: SpendPolicyConfig, day: string): Promise<string | undefined> {
    const committed = await this.#core.read(call, (q) => committedToday(q, call.tenant, tool.spendPolicy, day));
    const gate = evaluateGate(action, gatePolicy(policy), committed);
    if (gate.state !== "BLOCKED") return undefined;
    const caps = decisionInWords(gate, { policyName: tool.spendPolicy, policy: gatePolicy(policy), action, committedToday: committed });
    return `no receipt can authorize this call${blockedOnlyToday(gate) ? " today" : ""}: ${caps}`;
  }
}
