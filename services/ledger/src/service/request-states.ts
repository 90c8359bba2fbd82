import { assertRequestRef, ChaosError, type CallContext } from "@chaos-core/kit";
import { REQUEST_STATE_REFUSAL_REASONS, type RequestStateRefusalReason } from "../authz/codes.js";
import type { AppendedEntry } from "../log/batch-writer.js";
import type { LedgerCore } from "./ledger-core.js";

// Single use of the edge's sealed MCP requestState (docs/protocol.md §7). The edge opens and
// checks the state; the ledger makes sure each one is used once per tenant, on any replica and
// across restarts, in the nonce path receipts already use: the Redis (or in-process) claim is
// the fast path, the `ledger.nonces` row written in the same transaction as the entry decides.

/** Where a state's jti lives in `ledger.nonces` and the nonce cache: `mrtr:<jti>`. */
export const REQUEST_STATE_NONCE_PREFIX = "mrtr:";

/** How long the fast path remembers a consumed jti past the state's expiry (the row stays for good). */
const CACHE_GRACE_MS = 60_000;
/** The longest a state lives (the edge's CHAOS_CORE_MRTR_TTL_SECONDS at most), so the cache never keeps a claim longer. */
const MAX_STATE_TTL_MS = 3600_000;

const JTI_RE = /^[A-Za-z0-9_-]{22,128}$/;
const KID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const MAX_TOOL_CHARS = 2048;

/** The reasons the edge records (every reason but the ledger's own `already_consumed`). */
const EDGE_REASONS: ReadonlySet<string> = new Set(REQUEST_STATE_REFUSAL_REASONS.filter((r) => r.by !== "ledger").map((r) => r.reason));

/** What ConsumeRequestState is asked. */
export interface ConsumeRequestStateInput {
  readonly jti: string;
  readonly flow: string;
  readonly tool: string;
  readonly expiresAtMs: number;
}

/** Its answer: consumed once, or refused with the recorded reason. */
export type ConsumeRequestStateOutcome =
  | { readonly consumed: true; readonly code: "consumed"; readonly entry: AppendedEntry }
  | { readonly consumed: false; readonly code: "already_consumed" | "expired"; readonly entry: AppendedEntry };

/** What RecordRequestStateRefusal is asked; the handles only when the edge could trust them. */
export interface RequestStateRefusalInput {
  readonly reason: string;
  readonly kid?: string;
  readonly jti?: string;
  readonly flow?: string;
  readonly tool?: string;
}

function assertJti(jti: string): void {
  if (!JTI_RE.test(jti)) throw new ChaosError("invalid_argument", "jti: must be base64url, 22 to 128 characters");
}

function assertFlow(flow: string): void {
  try {
    assertRequestRef(flow);
  } catch {
    throw new ChaosError("invalid_argument", "flow: must be a requestRef (16 to 128 base64url characters)");
  }
}

function assertTool(tool: string): void {
  if (tool.length === 0 || tool.length > MAX_TOOL_CHARS) throw new ChaosError("invalid_argument", `tool: must be 1 to ${MAX_TOOL_CHARS} characters`);
}

/** The ledger's side of MRTR: consume a state once, record every refusal. */
export class RequestStates {
  readonly #core: LedgerCore;

  constructor(core: LedgerCore) {
    this.#core = core;
  }

  /**
   * Consumes the state `jti` in the caller's tenant, once. The first call records
   * `mrtr.state_consumed` and answers `consumed`; every later one (concurrent, on another
   * replica, after a restart with an empty cache) records `mrtr.state_refused {reason:
   * already_consumed}`; a state past `expiresAtMs` is refused `expired` and not consumed. A
   * ledger that cannot be written fails the call (`unavailable`) and consumes nothing.
   */
  async consume(call: CallContext, input: ConsumeRequestStateInput): Promise<ConsumeRequestStateOutcome> {
    assertJti(input.jti);
    assertFlow(input.flow);
    assertTool(input.tool);
    if (!Number.isSafeInteger(input.expiresAtMs) || input.expiresAtMs <= 0) {
      throw new ChaosError("invalid_argument", "expires_at_ms: must be the state's expiry in milliseconds since the epoch");
    }
    const tenant = call.tenant;
    const facts = { jti: input.jti, flow: input.flow, tool: input.tool, expires_at: new Date(input.expiresAtMs).toISOString() };
    const now = this.#core.now().getTime();
    if (input.expiresAtMs <= now) {
      const entry = await this.#core.record(call, { type: "mrtr.state_refused", reason: "expired", ...facts });
      return { consumed: false, code: "expired", entry };
    }
    const nonce = `${REQUEST_STATE_NONCE_PREFIX}${input.jti}`;
    const nonces = this.#core.nonces;
    const claimed = await nonces.claim(tenant, nonce, Math.min(input.expiresAtMs - now, MAX_STATE_TTL_MS) + CACHE_GRACE_MS);
    if (!claimed) {
      const entry = await this.#core.record(call, { type: "mrtr.state_refused", reason: "already_consumed", ...facts, fast_path: true });
      return { consumed: false, code: "already_consumed", entry };
    }
    let consumed = false;
    try {
      const entry = await this.#core.record(call, { type: "mrtr.state_consumed" }, async (tx, ctx) => {
        // Under the tenant's ledger lock (the hook runs in the flush transaction that holds it):
        // the row decides, whatever the cache said.
        const ins = await tx.query(
          "INSERT INTO ledger.nonces (tenant_id, nonce, entry_seq) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING nonce",
          [tenant, nonce, ctx.seq],
        );
        consumed = ins.rows.length > 0;
        return consumed ? { type: "mrtr.state_consumed", ...facts } : { type: "mrtr.state_refused", reason: "already_consumed", ...facts };
      });
      // A jti Postgres already holds stays claimed in the cache: the next replay is refused there.
      return consumed ? { consumed: true, code: "consumed", entry } : { consumed: false, code: "already_consumed", entry };
    } catch (err) {
      // Nothing committed: the state is still unused, so give the fast path its claim back.
      await nonces.release(tenant, nonce).catch(() => undefined);
      throw err;
    }
  }

  /** Records a state the edge refused before consuming it (`mrtr.state_refused {reason}`). */
  async refuse(call: CallContext, input: RequestStateRefusalInput): Promise<AppendedEntry> {
    if (!EDGE_REASONS.has(input.reason)) {
      throw new ChaosError("invalid_argument", `reason: must be one of ${[...EDGE_REASONS].join(", ")}`);
    }
    if (input.kid && !KID_RE.test(input.kid)) throw new ChaosError("invalid_argument", "kid: must be 1-64 characters of letters, digits, '_' or '-'");
    if (input.jti) assertJti(input.jti);
    if (input.flow) assertFlow(input.flow);
    if (input.tool) assertTool(input.tool);
    return this.#core.record(call, {
      type: "mrtr.state_refused",
      reason: input.reason as RequestStateRefusalReason,
      kid: input.kid || null,
      jti: input.jti || null,
      flow: input.flow || null,
      tool: input.tool || null,
    });
  }
}
