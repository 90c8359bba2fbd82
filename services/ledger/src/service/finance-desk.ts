import { ChaosError, chpFloat, contentHash, type CallContext, type Queryable } from "@chaos-core/kit";
import { ALREADY_COLLECTED, APPROVAL_DECLINED, APPROVAL_PENDING, DAILY_CAP_EXCEEDED, financeCode } from "../authz/codes.js";
import type { Receipt } from "../authz/receipt.js";
import { referenceTool, type ReferenceTool } from "../domain/reference-tools.js";
import { evaluateGate, type GateResult, type SpendAction } from "../domain/spend-gate.js";
import { blockedOnlyToday, capsInWords, decisionInWords } from "../domain/spend-limits.js";
import { gatePolicy, missingConfidence, type SpendPolicyConfig } from "../domain/spend-policies.js";
import type { LedgerEntry } from "../log/entry.js";
import { checkedReceiptTtl, financeToolPolicy, signFinanceAuthorization } from "./finance-receipts.js";
import { receiptTtl, sessionOf, type LedgerCore } from "./ledger-core.js";
import type { SpendCollection } from "./spend-collection.js";
import { commitSpend, committedToday, utcDay } from "./spend-days.js";
import { gateFields, gateReply, recordedAction, requestedChannels } from "./spend-gate-records.js";
import {
  answerOf,
  argumentsVerified,
  collectMarker,
  insertMarker,
  insertSpendRequest,
  readSpendRequests,
  requestChannels,
  spendRequestState,
  type StoredSpendRequest,
} from "./spend-requests.js";
import { requireConfidence, spendPolicyFor } from "./tenant-spend-policy.js";

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

/**
 * The finance reference tools on the spend gate (RequestAuthorization, ExecuteReferenceTool):
 * the gate decides under the tool's spend policy, an `authorization` receipt runs exactly one
 * call, and in the transaction that runs it the daily cap is checked again against the ledger's
 * total and the spend committed. A call a person approved for its requester picks the approval
 * up through {@link SpendCollection}.
 */
export class FinanceDesk {
  readonly #core: LedgerCore;
  readonly #collection: SpendCollection;

  constructor(core: LedgerCore, collection: SpendCollection) {
    this.#core = core;
    this.#collection = collection;
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
    const policy = await spendPolicyFor(this.#core, call, tool.spendPolicy);
    const ttl = checkedReceiptTtl(input.ttlSeconds);
    const argsHash = contentHash(args);
    const { approved } = await this.#requestsFor(call, tool.name, argsHash);
    if (approved) {
      const collected = await this.#collection.collectSpendApproval(call, { requestSeq: approved.requestSeq, ...(input.ttlSeconds !== undefined ? { ttlSeconds: input.ttlSeconds } : {}) });
      return { status: "AUTHORIZED", code: "AUTHORIZED", receipt: collected.receipt, gate: collected.result, entry: collected.entry, approvalRequestSeq: approved.requestSeq, channels: undefined };
    }
    const action = tool.toAction(args);
    await requireConfidence(
      this.#core,
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
        receipt = signFinanceAuthorization(this.#core.keyring, call, tool, { actor: `chp-gate:${policy.version}`, argsHash, policyVersion: policy.version, ttl, now });
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
    const reply = gateReply(entry, g, committed, policy, message);
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
    const receipt = signFinanceAuthorization(this.#core.keyring, call, tool, {
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
