import { ChaosError, chpFloat, contentHash, isChpFloat, type CallContext, type Queryable } from "@chaos-core/kit";
import { DAILY_CAP_EXCEEDED, financeReason, type DenyCode } from "../authz/codes.js";
import { MAX_RECEIPT_TTL_SECONDS, MIN_RECEIPT_TTL_SECONDS } from "../authz/issue.js";
import { newNonce, signReceipt, type Receipt } from "../authz/receipt.js";
import type { ToolPolicyDocument } from "../authz/tool-policy.js";
import { referenceTool, type ReferenceTool } from "../domain/reference-tools.js";
import { approveHuman, evaluateGate, type GateResult, type SpendAction } from "../domain/spend-gate.js";
import { gatePolicy, missingConfidence, tighten, type SpendPolicyConfig } from "../domain/spend-policies.js";
import type { LedgerEntry } from "../log/entry.js";
import { receiptTtl, type ApprovedVia, type LedgerCore } from "./ledger-core.js";
import { toPlainJson } from "./plain-json.js";

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

function gateFields(g: GateResult): Record<string, unknown> {
  return {
    state: g.state,
    reason: g.reason,
    failed_rules: [...g.failed_rules],
    claims: g.claims.map((c) => ({ ...c })),
    committed_delta: chpFloat(g.committed_delta),
    content_hash: g.content_hash,
    reason_code: g.state === "BLOCKED" ? "policy_deny" : null,
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

/** What the gate answered, for a reply. */
export interface GateReply {
  readonly state: string;
  readonly contentHash: string;
  readonly result: Record<string, unknown>;
  readonly entry: LedgerEntry;
  readonly receipt?: Receipt;
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

  #policy(call: CallContext, name: string): SpendPolicyConfig {
    const policies = this.#core.policies.forTenant(call.tenant).spendPolicies;
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
    const operator = this.#policy(call, input.policyName);
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
    evaluateGate(input.action, gatePolicy(policy), 0);
    await this.#requireConfidence(call, { policy: input.policyName, version: policy.version }, missingConfidence(policy, input.action.confidence, "action.confidence"));
    const now = this.#core.now();
    const day = utcDay(now);
    let gate: GateResult | undefined;
    let committed = 0;
    const entry = await this.#core.record(call, { type: "spend_gate.evaluated" }, async (tx) => {
      committed = await committedToday(tx, call.tenant, input.policyName, day);
      gate = evaluateGate(input.action, gatePolicy(policy), committed);
      await commitSpend(tx, call.tenant, input.policyName, day, gate.committed_delta);
      return {
        type: "spend_gate.evaluated",
        policy: input.policyName,
        policy_version: policy.version,
        action: recordedAction(input.action),
        committed_today: chpFloat(committed),
        day,
        ...gateFields(gate),
      };
    });
    return this.#reply(entry, gate!, committed, policy);
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

  #reply(entry: LedgerEntry, gate: GateResult, committed: number, policy: SpendPolicyConfig, receipt?: Receipt): GateReply {
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
      },
      entry,
      ...(receipt ? { receipt } : {}),
    };
  }

  /**
   * ApproveSpend: a human approves the HITL_REQUIRED request recorded at `requestSeq`, once.
   * The action comes from the ledger, not from the approver; the gate is re-run under the
   * current policy and day total (an approval crosses the HITL threshold, never a hard rule).
   * A finance request approved to LOCKED gets its authorization receipt here.
   */
  async approveSpend(call: CallContext, input: { requestSeq: number; approvedVia: ApprovedVia; ttlSeconds?: number }): Promise<GateReply> {
    const request = await this.#core.entryAt(call, input.requestSeq);
    const ev = request.event as Record<string, unknown>;
    const isFinance = ev.type === "reference.requested";
    const refuse = async (code: string, problem: string, errorCode: "permission_denied" | "failed_precondition" = "permission_denied"): Promise<never> => {
      await this.#core.record(call, { type: "spend.approval_refused", request_seq: input.requestSeq, code, problem });
      throw new ChaosError(errorCode, `${code}: ${problem}`);
    };
    if (ev.type !== "spend_gate.evaluated" && !isFinance) {
      throw new ChaosError("failed_precondition", `ledger entry ${input.requestSeq} is not a spend request`);
    }
    if (ev.state !== "HITL_REQUIRED") {
      // An approval never turns a BLOCKED (or an already LOCKED) decision into anything else.
      await refuse("not_awaiting_approval", `request ${input.requestSeq} is ${String(ev.state)}, not waiting for a human (HITL_REQUIRED)`, "failed_precondition");
    }
    if (input.approvedVia === "approver_role" && call.principal === request.principal) {
      await refuse("self_approval", `${call.principal} made request ${input.requestSeq} and cannot approve it`);
    }
    if (input.approvedVia === "elicitation" && request.session !== (call.sessionId ?? "")) {
      await refuse("wrong_session", "an elicitation answer counts only from the session that made the request");
    }
    const policyName = String(ev.policy);
    const policy = this.#policy(call, policyName);
    const action = ev.action as unknown as SpendAction;
    // The approval re-evaluates under the current policy, its Chaos Core checks included.
    const noConfidence = missingConfidence(policy, action.confidence, "the request's confidence");
    if (noConfidence) await refuse("confidence_required", noConfidence, "failed_precondition");
    const approver = input.approvedVia === "approver_role" ? call.principal : `elicitation:${call.principal}`;
    const tool = isFinance ? referenceTool(String(ev.tool)) : undefined;
    const ttl = ttlOf(input.ttlSeconds);
    const now = this.#core.now();
    const day = utcDay(now);
    let gate: GateResult | undefined;
    let committed = 0;
    let receipt: Receipt | undefined;
    let alreadyAnswered = false;
    const entry = await this.#core.record(call, { type: "spend.approved" }, async (tx, ctx) => {
      // One approval per request, ever: the request's marker row commits with this entry.
      const once = await tx.query(
        "INSERT INTO ledger.nonces (tenant_id, nonce, entry_seq) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING nonce",
        [call.tenant, `request-${input.requestSeq}`, ctx.seq],
      );
      if (once.rows.length === 0) {
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
      if (gate.state === "LOCKED" && tool) {
        receipt = signReceipt(
          {
            kind: "authorization",
            schema_version: 1,
            tenant: call.tenant,
            actor: approver,
            tool: tool.name,
            resource: tool.scope,
            args_hash: String(ev.args_hash),
            policy_version: policy.version,
            risk: tool.risk,
            issued_at: now.toISOString(),
            expiry: new Date(now.getTime() + ttl * 1000).toISOString(),
            decision: "allow",
            nonce: newNonce(),
          },
          this.#core.keyring,
        );
      } else if (!tool) {
        // A plain spend is committed by its approval; a finance call when it executes.
        await commitSpend(tx, call.tenant, policyName, day, gate.committed_delta);
      }
      return {
        type: "spend.approved",
        request_seq: input.requestSeq,
        approver,
        approved_via: input.approvedVia,
        requester: request.principal,
        policy: policyName,
        policy_version: policy.version,
        action: recordedAction(action),
        committed_today: chpFloat(committed),
        ...gateFields(gate),
        ...(receipt ? { receipt_nonce: receipt.nonce, receipt_kid: receipt.kid, expiry: receipt.expiry, tool: tool!.name } : {}),
      };
    });
    if (alreadyAnswered) {
      throw new ChaosError("failed_precondition", `already_answered: request ${input.requestSeq} was already answered (refusal recorded as ledger entry ${entry.seq})`);
    }
    return this.#reply(entry, gate!, committed, policy, receipt);
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
   * for the gate (`actor` names the policy); HITL_REQUIRED → approve with ApproveSpend; BLOCKED
   * → `policy_deny`. Nothing is committed to the day's total until the tool executes.
   */
  async requestAuthorization(call: CallContext, input: { tool: string; args: unknown; ttlSeconds?: number }) {
    const { tool, args } = this.#referenceCall(input.tool, input.args);
    const policy = this.#policy(call, tool.spendPolicy);
    const ttl = ttlOf(input.ttlSeconds);
    const action = tool.toAction(args);
    await this.#requireConfidence(
      call,
      { policy: tool.spendPolicy, version: policy.version, tool: tool.name },
      missingConfidence(policy, action.confidence, "args.confidence"),
    );
    const argsHash = contentHash(args);
    const now = this.#core.now();
    const day = utcDay(now);
    let gate: GateResult | undefined;
    let committed = 0;
    let receipt: Receipt | undefined;
    const entry = await this.#core.record(call, { type: "reference.requested" }, async (tx) => {
      committed = await committedToday(tx, call.tenant, tool.spendPolicy, day);
      gate = evaluateGate(action, gatePolicy(policy), committed);
      if (gate.state === "LOCKED") {
        receipt = signReceipt(
          {
            kind: "authorization",
            schema_version: 1,
            tenant: call.tenant,
            actor: `chp-gate:${policy.version}`,
            tool: tool.name,
            resource: tool.scope,
            args_hash: argsHash,
            policy_version: policy.version,
            risk: tool.risk,
            issued_at: now.toISOString(),
            expiry: new Date(now.getTime() + ttl * 1000).toISOString(),
            decision: "allow",
            nonce: newNonce(),
          },
          this.#core.keyring,
        );
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
        ...gateFields(gate),
        ...(receipt ? { receipt_nonce: receipt.nonce, receipt_kid: receipt.kid, expiry: receipt.expiry } : {}),
      };
    });
    const g = gate!;
    const status = g.state === "LOCKED" ? "AUTHORIZED" : g.state === "HITL_REQUIRED" ? "HITL_REQUIRED" : "DENIED";
    return { status, code: g.state === "BLOCKED" ? "policy_deny" : status, receipt, reply: this.#reply(entry, g, committed, policy) };
  }

  /**
   * ExecuteReferenceTool: the receipt must authorize this exact call (tool, scope, argument
   * hash, spend policy version); then, in the same transaction, the daily cap is checked again
   * against the ledger's total, the spend committed, the nonce burned and the synthetic result
   * recorded. Denials carry the short CHP code (`policy_deny`, `expired`, `replay`,
   * `args_changed`, `missing_receipt`, `ambiguous_policy`), the detailed one that says what
   * happened (`FINANCE_DETAIL_CODES`) and the problem in words.
   */
  async executeReferenceTool(call: CallContext, input: { tool: string; args: unknown; receipt?: unknown }) {
    const { tool, args } = this.#referenceCall(input.tool, input.args);
    const policies = this.#core.policies.forTenant(call.tenant).spendPolicies;
    const policy = Object.hasOwn(policies, tool.spendPolicy) ? policies[tool.spendPolicy] : undefined;
    const action = tool.toAction(args);
    const day = utcDay(this.#core.now());
    let result: Record<string, unknown> | undefined;
    const outcome = await this.#core.authorize(
      call,
      {
        toolCall: { tool: tool.name, resource: tool.scope, arguments: args },
        receipt: input.receipt,
        kind: "authorization",
        // No spend policy: an incomplete policy, refused by the check chain as ambiguous_policy.
        policy: policy ? financeToolPolicy(tool, policy) : null,
        missingPolicy:
          `no spend policy "${tool.spendPolicy}" is configured for this tenant, so ${tool.name} cannot run; the operator ` +
          `configured: ${Object.keys(policies).join(", ") || "none"}`,
        eventType: "reference.executed",
      },
      async (tx) => {
        const committed = await committedToday(tx, call.tenant, tool.spendPolicy, day);
        if (committed + action.notional > policy!.daily_cap) {
          return {
            deny: {
              code: DAILY_CAP_EXCEEDED,
              problem: `daily cap: projected ${committed + action.notional} vs daily cap ${policy!.daily_cap} (${tool.spendPolicy}, ${day} UTC)`,
            },
          };
        }
        await commitSpend(tx, call.tenant, tool.spendPolicy, day, action.notional);
        result = tool.simulate(args, `${call.tenant}:${String((input.receipt as { nonce?: unknown }).nonce)}`);
        return { extra: { result, committed_after: chpFloat(committed + action.notional), day } };
      },
    );
    if (outcome.authorized) {
      return { executed: true, code: "EXECUTED", detailCode: "AUTHORIZED", result: result!, entry: outcome.entry };
    }
    const short = outcome.code === DAILY_CAP_EXCEEDED ? "policy_deny" : financeReason(outcome.code as DenyCode);
    return { executed: false, code: short, detailCode: outcome.code, problem: outcome.problem, entry: outcome.entry };
  }
}
