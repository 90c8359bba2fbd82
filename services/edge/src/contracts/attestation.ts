import {
  AttestationError,
  driftFromLock,
  EMPTY_HISTORY,
  parseHistory,
  parseLock,
  serverDigest,
  verifyAttestation,
  type ContractHistory,
  type ContractSet,
} from "@chaos-core/contracts";
import { parseVerifierKey } from "@chaos-core/kit";
import { edgeSurface } from "./sources.js";

/** What the edge may tell clients about the surface it serves (docs/contracts.md §7). */
export interface EdgeAttestation {
  /** True only when the signed note verified with a configured public key. */
  readonly attested: boolean;
  readonly serverDigest: string;
  /** The configured keys whose signatures verified. */
  readonly keyNames: readonly string[];
  /** The signed note as shipped, to expose to clients; absent when none was given. */
  readonly note?: string;
  /** The pinned contracts (the parsed lock), for the run-time guard (`contracts/guard.ts`); never shown to clients. */
  readonly lock: ContractSet;
  /** Tool contracts earlier locks pinned, by digest (`chaoscore.lock.history`), to explain a client's older pin; never shown whole. */
  readonly history: ContractHistory;
}

/**
 * The start-time check: the definitions this edge serves against the lock, and the lock against
 * its signed note. With verifier keys the note must verify and match; without any, nothing is
 * attested (`attested: false`) but drift from the lock still refuses. Throws
 * {@link AttestationError} naming the drifted entries. Holds public keys only. The history, when
 * given, must parse with every entry hashing to its digest.
 */
export function attestServedSurface(opts: { lockText: string; note?: string; verifierKeys: readonly string[]; historyText?: string }): EdgeAttestation {
  const live = edgeSurface();
  const lock = parseLock(opts.lockText);
  const history = opts.historyText === undefined ? EMPTY_HISTORY : parseHistory(opts.historyText);
  if (opts.verifierKeys.length === 0) {
    const drifted = driftFromLock(lock.contracts, live);
    if (drifted.length > 0) throw new AttestationError(`the served definitions drifted from the lock: ${drifted.join("; ")}`, drifted);
    return { attested: false, serverDigest: serverDigest(lock.contracts), keyNames: [], lock: lock.contracts, history, ...(opts.note !== undefined ? { note: opts.note } : {}) };
  }
  if (opts.note === undefined) throw new AttestationError("verifier keys are configured but no signed note was given for the lock");
  const verified = verifyAttestation({ lockText: opts.lockText, note: opts.note, verifiers: opts.verifierKeys.map(parseVerifierKey), live });
  return { attested: true, serverDigest: verified.serverDigest, keyNames: verified.keyNames, note: opts.note, lock: lock.contracts, history };
}
