import { ATTR, ChaosError, assertTenantId, contextLabel, withSpan, type CallContext, type Db, type Logger, type Queryable } from "@chaos-core/kit";
import { checkAuthorization, settleNonce, type AuthorizationDecision, type NeedsNonceCheck } from "../authz/authorize.js";
import {
  ANSWER_REFUSAL_CODES,
  AUTHORIZATION_CODES,
  COLLECT_REFUSAL_CODES,
  FINANCE_DETAIL_CODES,
  FINANCE_REASONS,
  ISSUE_REFUSAL_CODES,
  REQUEST_STATE_REFUSAL_REASONS,
  SPEND_REFUSAL_CODES,
} from "../authz/codes.js";
import { MAX_RECEIPT_TTL_SECONDS } from "../authz/issue.js";
import { RECEIPT_KINDS, RECEIPT_SCHEMA_VERSION, RISKS, type ReceiptKind, type Risk } from "../authz/receipt.js";
import { stepToolPolicy, type ToolPolicyDocument } from "../authz/tool-policy.js";
import type { Keyring } from "../keys/keyring.js";
import type { AppendedEntry } from "../log/batch-writer.js";
import type { LedgerStore } from "../log/ledger-store.js";
import type { LedgerEntry } from "../log/entry.js";
import { rawEd25519PublicKey } from "../log/checkpoint.js";
import type { NonceCache } from "../adapters/nonce-cache.js";
import type { ApprovalChannelSource, ChannelDecision, ChannelSubject } from "../adapters/approval-channels.js";
import type { OperatorPolicies } from "../adapters/operator-policies.js";
import { toPlainJson } from "./plain-json.js";
import type { WebhookDispatcher } from "../webhooks/dispatcher.js";

/** The receipt window when a caller asks for none. */
export const DEFAULT_RECEIPT_TTL_SECONDS = 300;

/** What the ledger core needs; built once per process. */
export interface LedgerCoreDeps {
  readonly store: LedgerStore;
  /** The database under the store, for reads beside the log (stored spend requests). */
  readonly db: Db;
  readonly keyring: Keyring;
  readonly policies: OperatorPolicies;
  readonly nonces: NonceCache;
  /** The policy service's approval channels: which ways of answering count for a spend or a tool receipt. */
  readonly channels: ApprovalChannelSource;
  readonly logger: Logger;
  /** Reported by GetInfo. */
  readonly version: string;
  /** Sends the approval notifications the store's outbox holds, when webhooks are configured. */
  readonly webhooks?: WebhookDispatcher;
  readonly now?: () => Date;
}

/** A cognition step's binding, set only by the cognition service (ledger.proto `StepBinding`). */
export interface StepBinding {
  readonly policyVersion: string;
  readonly risk: string;
  readonly requester?: string;
}

/** The outcome of an authorization, as recorded. */
export interface AuthorizationOutcome {
  readonly authorized: boolean;
  readonly code: string;
  readonly step: string;
  readonly argsHash: string;
  readonly entry: AppendedEntry;
  readonly problem?: string;
}

/**
 * What a caller does once a receipt authorized, inside the same transaction and before the nonce
 * is burned (the finance tools re-check the daily cap and commit the spend there). A `deny`
 * turns the authorization into a recorded denial that leaves the nonce unused.
 */
export type AfterAuthorize = (
  tx: Queryable,
  ctx: { seq: number },
) => Promise<{ deny?: { code: string; problem: string }; extra?: Record<string, unknown> }>;

/**
 * The context label an entry's `session` field holds (docs/ledger.md): the MCP session id
 * (2025-11-25), `request:<requestRef>` for a call without a session (2026-07-28), `""` for a
 * call with neither (the operator endpoint). The field keeps its name so existing chains verify.
 */
export function sessionOf(call: CallContext): string {
  return contextLabel(call);
}

/**
 * A receipt's window from a request: 0 or unset means {@link DEFAULT_RECEIPT_TTL_SECONDS}; the
 * issuing rules then refuse anything outside 1..3600 s (`invalid_ttl`).
 */
export function receiptTtl(ttlSeconds: number | undefined): number {
  return ttlSeconds === undefined || ttlSeconds === 0 ? DEFAULT_RECEIPT_TTL_SECONDS : ttlSeconds;
}

function asRisk(risk: string): Risk {
  if ((RISKS as readonly string[]).includes(risk)) return risk as Risk;
  throw new ChaosError("invalid_argument", `step.risk: must be one of ${RISKS.join(", ")}`);
}

/**
 * The ledger's core: append, reads, Authorize (with nonce settlement) and GetInfo, and what the
 * desks built on it share (`ToolReceipts`, `SpendDesk`, `RequestStates`). Every decision is
 * appended before it is returned; an append that fails rejects the operation (`unavailable`):
 * the caller never sees an unrecorded decision.
 */
export class LedgerCore {
  readonly #deps: LedgerCoreDeps;
  readonly #now: () => Date;

  constructor(deps: LedgerCoreDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? (() => new Date());
  }

  get store(): LedgerStore {
    return this.#deps.store;
  }

  get keyring(): Keyring {
    return this.#deps.keyring;
  }

  get policies(): OperatorPolicies {
    return this.#deps.policies;
  }

  /** The nonce fast path (Redis or in-process) in front of `ledger.nonces`. */
  get nonces(): NonceCache {
    return this.#deps.nonces;
  }

  now(): Date {
    return this.#now();
  }

  /**
   * Stops what runs beside the calls (the webhook dispatcher: attempts in flight are aborted and
   * their rows given back for the next start). Appends still queued are the store's: `drain` it.
   */
  async close(): Promise<void> {
    await this.#deps.webhooks?.stop();
  }

  /**
   * Which channels policy allows now for `subject` in the caller's tenant. Policy decides; the
   * ledger only enforces. `unavailable` when policy cannot say: nothing is answered on a guess.
   */
  approvalChannels(call: CallContext, subject: ChannelSubject): Promise<ChannelDecision> {
    return this.#deps.channels.channelsFor(call, subject);
  }

  /** Runs a read in the caller's tenant (row-level security applies), outside the append path. */
  async read<T>(call: CallContext, fn: (q: Queryable) => Promise<T>): Promise<T> {
    assertTenantId(call.tenant);
    try {
      return await this.#deps.db.tenantTx(call.tenant, fn);
    } catch (err) {
      const e = ChaosError.from(err);
      if (e.code === "invalid_argument" || e.code === "not_found") throw e;
      throw new ChaosError("unavailable", `the audit ledger could not be read: ${e.message}`, { cause: err });
    }
  }

  /** Appends an event for the caller; a store failure becomes `unavailable` (fail closed). */
  async record(
    call: CallContext,
    event: Record<string, unknown>,
    hook?: (tx: Queryable, ctx: { seq: number; tenant: string }) => Promise<Record<string, unknown>>,
  ): Promise<AppendedEntry> {
    assertTenantId(call.tenant);
    try {
      // Each append is a named span, with the seq it got (appends share batched transactions, so
      // the Postgres statements sit under the append that opened the batch).
      const eventType = typeof event.type === "string" ? event.type : "unknown";
      return await withSpan("chaoscore.ledger.append", { [ATTR.tenant]: call.tenant, [ATTR.ledgerEvent]: eventType }, async (span) => {
        const entry = await this.#deps.store.append(call.tenant, {
          session: sessionOf(call),
          principal: call.principal,
          event,
          ...(hook ? { hook } : {}),
        });
        span.setAttributes({ [ATTR.ledgerSeq]: entry.seq });
        return entry;
      });
    } catch (err) {
      const e = ChaosError.from(err);
      // A domain refusal raised inside a hook (bad input) is the caller's; anything else means
      // the ledger could not be written, and the call fails closed.
      if (e.code === "invalid_argument" || e.code === "failed_precondition" || e.code === "permission_denied" || e.code === "not_found") throw e;
      throw new ChaosError("unavailable", `the audit ledger could not be written, so nothing was decided: ${e.message}`, { cause: err });
    }
  }

  /** Appends an event a service reports (cognition's decisions and outcomes). */
  append(call: CallContext, event: Record<string, unknown>): Promise<AppendedEntry> {
    if (typeof event.type !== "string" || event.type.length === 0 || event.type.length > 100) {
      throw new ChaosError("invalid_argument", "event.type: must be a non-empty string of at most 100 characters");
    }
    return this.record(call, event);
  }

  /** The entry at `seq` in the caller's tenant, or `not_found`. */
  async entryAt(call: CallContext, seq: number): Promise<LedgerEntry> {
    if (!Number.isSafeInteger(seq) || seq < 1) throw new ChaosError("invalid_argument", "request_seq: must be a ledger sequence number (1 or more)");
    const [entry] = await this.#deps.store.list(call.tenant, { afterSeq: seq - 1, limit: 1 });
    if (!entry || entry.seq !== seq) throw new ChaosError("not_found", `no ledger entry ${seq} in this tenant`);
    return entry;
  }

  /** The tenant's tool-approval policy, or the policy a cognition step's binding implies. */
  async toolPolicyFor(call: CallContext, tool: unknown, step: StepBinding | undefined): Promise<unknown> {
    if (step) {
      if (typeof tool !== "string") return undefined;
      return stepToolPolicy({ capability: tool, tenant: call.tenant, policyVersion: step.policyVersion, risk: asRisk(step.risk) });
    }
    return (await this.#deps.policies.forTenant(call.tenant)).toolPolicy;
  }

  /**
   * Authorize: runs the ordered check chain, settles replay against the nonce stores, and
   * records the decision — the nonce row and the entry commit together. `after` lets a caller
   * (the finance tools) act in the same transaction once the receipt authorized. `denialNote`
   * is added to the problem of any denial of the chain (the finance tools: that the spend gate
   * blocks the call whatever receipt comes); it never changes the code.
   */
  async authorize(
    call: CallContext,
    input: {
      toolCall: unknown;
      receipt?: unknown;
      step?: StepBinding;
      kind?: ReceiptKind;
      policy?: unknown;
      missingPolicy?: string;
      eventType?: string;
      denialNote?: string;
    },
    after?: AfterAuthorize,
  ): Promise<AuthorizationOutcome> {
    const kind = input.kind ?? "chaoscore.tool_approval_receipt";
    // `"policy" in input`, not `!== undefined`: a caller that names its own policy and has none
    // (a finance tool without a spend policy) is ambiguous_policy, never the tenant's policy.
    const policy = "policy" in input ? input.policy : await this.toolPolicyFor(call, (input.toolCall as { tool?: unknown })?.tool, input.step);
    const check = checkAuthorization(
      {
        policy,
        call: input.toolCall,
        receipt: input.receipt ?? undefined,
        ...(input.missingPolicy !== undefined ? { missingPolicy: input.missingPolicy } : {}),
        tenant: call.tenant,
        kind,
        now: this.#now(),
      },
      this.#deps.keyring,
    );
    const eventType = input.eventType ?? "authorization.decided";
    const noted = (problem: string): string => (input.denialNote === undefined ? problem : `${problem}; ${input.denialNote}`);
    if (check.stage === "final") {
      const problem = noted(check.problem);
      const entry = await this.record(call, {
        type: eventType,
        ...check.record,
        authorized: false,
        problem: problem.slice(0, 500),
      });
      return { authorized: false, code: check.code, step: check.step, argsHash: check.record.args_hash ?? "", entry, problem };
    }
    return this.#settle(call, check, eventType, after, input.denialNote === undefined ? undefined : noted);
  }

  /** `noted` adds the caller's denial note to a denial's problem (see {@link authorize}). */
  async #settle(
    call: CallContext,
    check: NeedsNonceCheck,
    eventType: string,
    after?: AfterAuthorize,
    noted?: (problem: string) => string,
  ): Promise<AuthorizationOutcome> {
    const tenant = call.tenant;
    // Only an outcome that burns the nonce claims it in the fast path: a wrong call presented
    // with a good receipt must not make the right call look like a replay.
    let claimed = false;
    if (check.burnsNonce) {
      const ttlMs = Math.max(0, Date.parse(check.expiry) - this.#now().getTime()) + 60_000;
      claimed = await this.#deps.nonces.claim(tenant, check.nonce, ttlMs);
      if (!claimed) {
        const decision = settleNonce(check, true);
        const entry = await this.record(call, { type: eventType, ...decision.record, authorized: false, fast_path: true });
        return {
          authorized: false,
          code: decision.code,
          step: decision.step,
          argsHash: check.record.args_hash ?? "",
          entry,
          ...(noted && decision.problem !== undefined ? { problem: noted(decision.problem) } : {}),
        };
      }
    }
    let decision: AuthorizationDecision | undefined;
    let denied: { code: string; problem: string } | undefined;
    try {
      const entry = await this.record(call, { type: eventType }, async (tx, ctx) => {
        // Read under the tenant's ledger lock (the hook runs inside the flush transaction that
        // holds it), so no other writer of this tenant can insert the nonce until we commit.
        const used = await tx.query("SELECT 1 FROM ledger.nonces WHERE tenant_id = $1 AND nonce = $2", [tenant, check.nonce]);
        const d = settleNonce(check, used.rows.length > 0);
        let extra: Record<string, unknown> = {};
        if (d.authorized && after) {
          const res = await after(tx, ctx);
          extra = res.extra ?? {};
          if (res.deny) {
            denied = res.deny;
            return { type: eventType, ...d.record, code: res.deny.code, step: "execution", authorized: false, problem: res.deny.problem, ...extra };
          }
        }
        if (d.burnNonce) {
          const ins = await tx.query(
            "INSERT INTO ledger.nonces (tenant_id, nonce, entry_seq) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING nonce",
            [tenant, check.nonce, ctx.seq],
          );
          // Cannot happen under the lock; if it ever does, `after` may already have acted (a
          // committed spend), so throwing rolls the whole hook back rather than recording a
          // replay next to an executed call. The call fails closed.
          if (ins.rows.length === 0) throw new ChaosError("conflict", "the receipt's nonce was consumed concurrently, outside the tenant's ledger lock");
        }
        decision = d;
        return { type: eventType, ...d.record, authorized: d.authorized, ...extra };
      });
      if (denied) {
        if (claimed) await this.#deps.nonces.release(tenant, check.nonce);
        return { authorized: false, code: denied.code, step: "execution", argsHash: check.record.args_hash ?? "", entry, problem: denied.problem };
      }
      const d = decision!;
      // A nonce Postgres already holds stays claimed: the next replay is refused without a
      // database round trip. Any other unburnt outcome gives the claim back.
      if (claimed && !d.burnNonce && d.code !== "replayed_receipt") await this.#deps.nonces.release(tenant, check.nonce);
      return {
        authorized: d.authorized,
        code: d.code,
        step: d.step,
        argsHash: check.record.args_hash ?? "",
        entry,
        ...(d.problem ? { problem: !d.authorized && noted ? noted(d.problem) : d.problem } : {}),
      };
    } catch (err) {
      // Nothing committed: give the fast path its nonce back so the receipt stays usable.
      if (claimed) await this.#deps.nonces.release(tenant, check.nonce).catch(() => undefined);
      throw err;
    }
  }

  /** GetInfo: what a client needs to speak to and verify this ledger (never a private key). */
  async info(call: CallContext): Promise<Record<string, unknown>> {
    const keyring = this.#deps.keyring;
    const policies = await this.#deps.policies.forTenant(call.tenant);
    return {
      server: { name: "chaos-core-ledger", version: this.#deps.version },
      chp: { version: "1.0", profile: "B" },
      receipt: {
        kinds: [...RECEIPT_KINDS],
        schema_version: RECEIPT_SCHEMA_VERSION,
        fields: ["kind", "schema_version", "kid", "tenant", "actor", "tool", "resource", "args_hash", "policy_version", "risk", "issued_at", "expiry", "decision", "nonce", "signature"],
        signature: "base64url Ed25519 over the canonical JSON of every other field",
        max_ttl_seconds: MAX_RECEIPT_TTL_SECONDS,
      },
      authorization_codes: AUTHORIZATION_CODES.map((c) => ({ ...c })),
      issue_refusal_codes: ISSUE_REFUSAL_CODES.map((c) => ({ ...c })),
      answer_refusal_codes: ANSWER_REFUSAL_CODES.map((c) => ({ ...c })),
      spend_refusal_codes: SPEND_REFUSAL_CODES.map((c) => ({ ...c })),
      collect_refusal_codes: COLLECT_REFUSAL_CODES.map((c) => ({ ...c })),
      finance_reason_codes: [...FINANCE_REASONS],
      finance_detail_codes: FINANCE_DETAIL_CODES.map((c) => ({ ...c })),
      request_state_refusal_reasons: REQUEST_STATE_REFUSAL_REASONS.map((c) => ({ ...c })),
      keys: keyring.kids().map((kid) => {
        const key = keyring.verificationKey(kid);
        return { kid, alg: "Ed25519", public_key: key ? rawEd25519PublicKey(key).toString("base64") : null, active: kid === keyring.active.kid };
      }),
      checkpoint: { origin: this.#deps.store.origin(call.tenant), verifier_key: this.#deps.store.verifierKey(call.tenant) },
      // The caller's tenant's policies only, each with its limits, so an agent can see what a
      // spend will be held to before it asks.
      spend_policies: Object.entries(policies.spendPolicies).map(([name, p]) => ({
        name,
        ...p,
        require_confidence: p.require_confidence === true,
      })),
      tool_approval_policy: policies.toolPolicy?.version ?? null,
    };
  }

  /** An entry as plain JSON for a reply. */
  static plainEntry(e: LedgerEntry): Record<string, unknown> {
    return { ...e, event: toPlainJson(e.event) };
  }
}

export type { ToolPolicyDocument };
