import { ChaosError, type CallContext } from "@chaos-core/kit";
import type { CollectRefusalCode } from "../authz/codes.js";
import type { Receipt } from "../authz/receipt.js";
import { referenceTool } from "../domain/reference-tools.js";
import { SPEND_REQUEST_WINDOW_MS } from "../domain/spend-request-window.js";
import type { LedgerEntry } from "../log/entry.js";
import { checkedReceiptTtl, signFinanceAuthorization } from "./finance-receipts.js";
import type { LedgerCore } from "./ledger-core.js";
import { toPlainJson } from "./plain-json.js";
import { approvalResult } from "./spend-gate-records.js";
import {
  answerOf,
  collectMarker,
  insertMarker,
  legacyRequest,
  readSpendRequests,
  refusalError,
  spendRequestState,
  spendRequestView,
  type Refusal,
  type SpendRequestView,
} from "./spend-requests.js";
import { spendPolicyFor } from "./tenant-spend-policy.js";

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

/**
 * Stored spend requests as the people who answer them see them (GetSpendRequest,
 * ListSpendRequests), and the requester's one collection of a person's approval
 * (CollectSpendApproval), decided under the tenant's ledger lock.
 */
export class SpendCollection {
  readonly #core: LedgerCore;

  constructor(core: LedgerCore) {
    this.#core = core;
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
    return spendRequestView(request, this.#core.now());
  }

  /** ListSpendRequests: the tenant's requests no one has answered yet, soonest to expire first. */
  async listSpendRequests(call: CallContext, input: { limit?: number }): Promise<SpendRequestView[]> {
    const limit = input.limit === undefined || input.limit === 0 ? 100 : input.limit;
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new ChaosError("invalid_argument", "limit: must be from 1 to 500");
    const now = this.#core.now();
    const pendingAfter = new Date(now.getTime() - SPEND_REQUEST_WINDOW_MS);
    const requests = await this.#core.read(call, (q) => readSpendRequests(q, call.tenant, { pendingAfter, limit }));
    return requests.map((r) => spendRequestView(r, now));
  }

  /**
   * CollectSpendApproval: the requester takes the approval another principal gave, once. A
   * finance request's receipt is signed now (for the recorded approver, under the approval's
   * policy version), so an approval given an hour ago does not hand over an expired receipt;
   * it is never stored. Everything is decided under the tenant's ledger lock, and every
   * refusal recorded as `spend.collect_refused`.
   */
  async collectSpendApproval(call: CallContext, input: { requestSeq: number; ttlSeconds?: number }): Promise<CollectReply> {
    const ttl = checkedReceiptTtl(input.ttlSeconds);
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
    const policy = await spendPolicyFor(this.#core, call, request.policy);
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
        receipt = signFinanceAuthorization(this.#core.keyring, call, tool, { actor: String(approved.event.approver), argsHash: current!.argsHash, policyVersion: version, ttl, now });
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
}
