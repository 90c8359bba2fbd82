import { ChaosError, type CallOptions } from "@chaos-core/kit";
import type { LedgerClient } from "../clients/service-clients.js";
import type { ToolContext } from "./tool.js";

/**
 * The ledger client of this call. Without one the tool fails closed: a governance answer that
 * the ledger did not record is not an answer (DESIGN: "If the ledger cannot be written, the
 * call fails closed").
 */
export function ledgerOf(ctx: ToolContext): LedgerClient {
  const ledger = ctx.deps.ledger;
  if (!ledger) {
    throw new ChaosError(
      "unavailable",
      "the ledger service is not configured for this server (LEDGER_ADDR), so nothing can be evaluated, approved, " +
        "authorized or recorded: the call fails closed. Ask the operator to connect the ledger.",
    );
  }
  return ledger;
}

/** Call options for a ledger RPC: the verified caller, and the client's cancellation. */
export function ledgerCall(ctx: ToolContext): CallOptions {
  return { ctx: ctx.call, signal: ctx.signal };
}

/**
 * A ledger sequence number as JSON carries it. Sequences count entries of one tenant's log, so
 * they stay far below 2^53; a larger one would be a broken ledger, not a value to round.
 */
export function seqNumber(seq: bigint): number {
  if (seq > BigInt(Number.MAX_SAFE_INTEGER)) throw new ChaosError("internal", `ledger sequence ${seq} is beyond 2^53`);
  return Number(seq);
}

/**
 * A value the ledger contract restricts to a few words. Anything else is a broken contract:
 * the call fails rather than show the caller a state this edge cannot explain.
 */
export function oneOf<const T extends readonly string[]>(value: string, allowed: T, field: string): T[number] {
  if ((allowed as readonly string[]).includes(value)) return value as T[number];
  throw new ChaosError("internal", `the ledger answered ${field} "${value}", which is none of ${allowed.join(", ")}: nothing is shown as decided`);
}
