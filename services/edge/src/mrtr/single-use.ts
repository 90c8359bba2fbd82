import { ChaosError, type CallContext } from "@chaos-core/kit";
import type { LedgerClient } from "../clients/service-clients.js";
import type { RequestStatePayload, RequestStateRefusal } from "./sealed-state.js";

// The edge's side of single use (docs/protocol.md §7): the ledger consumes each opened state
// once (`ConsumeRequestState`) and records every refusal (`RecordRequestStateRefusal`). Without a
// ledger nothing is consumed, so nothing runs: the call fails closed.

/** What the ledger answered for one presentation of a state. */
export interface ConsumeOutcome {
  /** True for the one presentation that may proceed. */
  readonly consumed: boolean;
  /** `consumed`, `already_consumed` or `expired`. */
  readonly code: string;
  /** The ledger entry that records it. */
  readonly entrySeq: bigint;
}

function ledgerOrFail(ledger: LedgerClient | undefined): LedgerClient {
  if (!ledger) {
    throw new ChaosError(
      "unavailable",
      "the ledger service is not configured for this server (LEDGER_ADDR), so a requestState cannot be used once: nothing ran",
    );
  }
  return ledger;
}

/**
 * Consumes an opened, bound state for `call` (the verified caller: the state's own tenant and
 * principal). Call it after every check passed and before anything runs.
 * @throws ChaosError `unavailable` without a ledger, or when the ledger cannot be written.
 */
export async function consumeRequestState(
  ledger: LedgerClient | undefined,
  call: CallContext,
  payload: RequestStatePayload,
  signal?: AbortSignal,
): Promise<ConsumeOutcome> {
  const res = await ledgerOrFail(ledger).consumeRequestState(
    { jti: payload.jti, flow: payload.flow, tool: payload.n, expiresAtMs: BigInt(payload.exp) },
    { ctx: call, ...(signal ? { signal } : {}) },
  );
  return { consumed: res.consumed, code: res.code, entrySeq: res.entrySeq };
}

/**
 * Records a refusal in the caller's tenant's ledger (`mrtr.state_refused {reason}`), with the
 * state's handles only when opening it could trust them for this caller.
 * @throws ChaosError `unavailable` without a ledger, or when the ledger cannot be written.
 */
export async function recordRequestStateRefusal(ledger: LedgerClient | undefined, call: CallContext, refusal: RequestStateRefusal): Promise<bigint> {
  const res = await ledgerOrFail(ledger).recordRequestStateRefusal(
    { reason: refusal.reason, kid: refusal.kid ?? "", jti: refusal.jti ?? "", flow: refusal.flow ?? "", tool: refusal.name ?? "" },
    { ctx: call },
  );
  return res.entrySeq;
}
