import { ChaosError, askerOfLabel, sameAsker, type CallContext } from "@chaos-core/kit";
import { channelRefusal, type ChannelDecision } from "../adapters/approval-channels.js";
import { evaluateToolApproval, issueReceipt } from "../authz/issue.js";
import { receiptTtl, type LedgerCore, type StepBinding } from "./ledger-core.js";
import { CHANNEL_OF_VIA } from "./spend-requests.js";

/** How a human's answer reached the ledger (the edge vouches for it; see ledger.proto). */
export type ApprovedVia = "approver_role" | "elicitation";

/** `approved_via` from a request, checked. */
export function approvedVia(via: string): ApprovedVia {
  if (via === "approver_role" || via === "elicitation") return via;
  throw new ChaosError("invalid_argument", `approved_via: must be "approver_role" or "elicitation", got "${via}"`);
}

/**
 * How an answer to a cognition step reached the ledger: also the standalone `operator` and the
 * approval `console` (cognition checked the channel against policy and its own rule first).
 */
export type StepApprovedVia = ApprovedVia | "operator" | "console";

function stepApprovedVia(via: string): StepApprovedVia {
  if (via === "operator" || via === "console") return via;
  if (via === "approver_role" || via === "elicitation") return via;
  throw new ChaosError("invalid_argument", `approved_via: must be "approver_role", "elicitation", "operator" or "console", got "${via}"`);
}

/**
 * The tool-approval receipts on top of the ledger (EvaluateToolApproval, IssueReceipt): a call
 * the tenant's tool-approval policy allowlists still needs a person's receipt, issued here only
 * through a channel policy allows, by someone that channel allows, for the call that was
 * recorded as needing it. Every answer, refusals included, is recorded before it is returned.
 * Authorize, which consumes a receipt, is {@link LedgerCore.authorize}.
 */
export class ToolReceipts {
  readonly #core: LedgerCore;

  constructor(core: LedgerCore) {
    this.#core = core;
  }

  /** EvaluateToolApproval: an allowlisted call still needs a receipt; recorded either way. */
  async evaluateToolApproval(call: CallContext, toolCall: unknown) {
    const policy = (await this.#core.policies.forTenant(call.tenant)).toolPolicy;
    const result = evaluateToolApproval(toolCall, policy);
    const tc = toolCall as { tool?: unknown; resource?: unknown } | undefined;
    const entry = await this.#core.record(call, {
      type: "tool_approval.evaluated",
      tool: typeof tc?.tool === "string" ? tc.tool.slice(0, 256) : null,
      resource: typeof tc?.resource === "string" ? tc.resource.slice(0, 512) : null,
      status: result.status,
      code: result.deny_code,
      args_hash: result.status === "RECEIPT_REQUIRED" ? result.args_hash : null,
      policy_version: result.policy_version,
      risk: result.status === "RECEIPT_REQUIRED" ? result.risk : null,
    });
    return { result, entry };
  }

  /**
   * IssueReceipt. Edge callers bind the decision to a recorded request (`requestSeq`: the
   * RECEIPT_REQUIRED entry of the same call), whose principal is the requester; cognition
   * passes a step binding with the requester instead. Refusals are recorded too.
   */
  async issueReceipt(
    call: CallContext,
    input: {
      toolCall: unknown;
      decision: string;
      ttlSeconds?: number;
      approvedVia: string;
      requestSeq?: number;
      reason?: string;
      step?: StepBinding;
    },
  ) {
    // Operator and console answers come from cognition's steps only: no operator command or
    // console page answers a tool-receipt request (docs/approvals.md, Known limits).
    const via = input.step ? stepApprovedVia(input.approvedVia) : approvedVia(input.approvedVia);
    if (input.decision !== "allow" && input.decision !== "deny") {
      throw new ChaosError("invalid_argument", `decision: must be "allow" or "deny", got "${input.decision}"`);
    }
    let requester: string;
    // The context label of the request an edge caller answers (none for a step binding: cognition checked its asker).
    let requestLabel: string | undefined;
    if (input.step) {
      if (!input.step.requester) throw new ChaosError("invalid_argument", "step.requester: required with a step binding");
      requester = input.step.requester;
    } else {
      if (input.requestSeq === undefined || input.requestSeq === 0) {
        throw new ChaosError("invalid_argument", "request_seq: required: the ledger entry of evaluate_tool_approval for this call");
      }
      const request = await this.#core.entryAt(call, input.requestSeq);
      const ev = request.event;
      if (ev.type !== "tool_approval.evaluated" || ev.status !== "RECEIPT_REQUIRED") {
        throw new ChaosError("failed_precondition", `ledger entry ${input.requestSeq} is not a tool-approval request that needs a receipt`);
      }
      const tc = input.toolCall as { tool?: unknown; resource?: unknown };
      if (tc?.tool !== ev.tool || tc?.resource !== ev.resource) {
        throw new ChaosError("failed_precondition", `the call is not the one requested in ledger entry ${input.requestSeq} (tool or resource differ)`);
      }
      requester = request.principal;
      requestLabel = request.session;
    }
    const policy = await this.#core.toolPolicyFor(call, (input.toolCall as { tool?: unknown })?.tool, input.step);
    // A step's channels were checked by cognition against its policy decision; any other
    // receipt's here, at the risk its tool-approval rule gives it. A call the rules refuse is
    // refused below, whoever answers.
    let channels: ChannelDecision | undefined;
    const evaluated = input.step ? undefined : evaluateToolApproval(input.toolCall, policy);
    if (evaluated?.status === "RECEIPT_REQUIRED") {
      const tool = String((input.toolCall as { tool?: unknown }).tool);
      channels = await this.#core.approvalChannels(call, { kind: "tool", tool, risk: evaluated.risk });
      const refusal = channelRefusal(CHANNEL_OF_VIA[via], channels, `a receipt for ${tool} at risk ${evaluated.risk}`);
      if (refusal) {
        const entry = await this.#core.record(call, {
          type: "receipt.refused",
          code: "channel_not_allowed",
          problem: refusal.problem,
          request_seq: input.requestSeq ?? null,
          requester,
          ...refusal.recorded,
        });
        return { issued: false as const, code: "channel_not_allowed", problem: refusal.problem, entry };
      }
    }
    // The client's own answer counts only from whoever asked (kit sameAsker: the requesting
    // session; without one, the requester's own request).
    const asker = via === "elicitation" && requestLabel !== undefined ? sameAsker(askerOfLabel(call.tenant, requester, requestLabel), call) : undefined;
    if (asker && !asker.same) {
      const entry = await this.#core.record(call, {
        type: "receipt.refused",
        code: asker.code,
        problem: asker.problem,
        request_seq: input.requestSeq ?? null,
        requester,
      });
      return { issued: false as const, code: asker.code, problem: asker.problem, entry };
    }
    const now = this.#core.now();
    const issued = issueReceipt(
      {
        call: input.toolCall,
        policy,
        decision: input.decision,
        actor: { principal: call.principal, roles: via === "elicitation" ? [] : ["approver"] },
        requester,
        actorKind: via === "elicitation" ? "human_elicitation" : via === "console" ? "console" : "approver",
        ttlSeconds: receiptTtl(input.ttlSeconds),
        now,
        tenant: call.tenant,
      },
      this.#core.keyring,
    );
    if (!issued.issued) {
      const entry = await this.#core.record(call, {
        type: "receipt.refused",
        code: issued.code,
        problem: issued.problem.slice(0, 500),
        request_seq: input.requestSeq ?? null,
        requester,
      });
      return { issued: false as const, code: issued.code, problem: issued.problem, entry };
    }
    const r = issued.receipt;
    const entry = await this.#core.record(call, {
      type: "receipt.issued",
      kind: r.kind,
      kid: r.kid,
      tool: r.tool,
      resource: r.resource,
      args_hash: r.args_hash,
      policy_version: r.policy_version,
      risk: r.risk,
      actor: r.actor,
      requester,
      channel: CHANNEL_OF_VIA[via],
      ...(channels ? { channels_rule: channels.matchedRule } : {}),
      decision: r.decision,
      nonce: r.nonce,
      expiry: r.expiry,
      request_seq: input.requestSeq ?? null,
      reason: (input.reason ?? "").slice(0, 500),
    });
    return { issued: true as const, receipt: r, decisionLog: issued.decisionLog, entry };
  }
}
