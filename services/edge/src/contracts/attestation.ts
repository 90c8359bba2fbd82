import {
  AttestationError,
  driftFromLock,
  EMPTY_HISTORY,
  parseHistory,
  parseLock,
  serverDigest,
  verifyAttestation,
} from "@chaos-core/contracts";
import { parseVerifierKey } from "@chaos-core/kit";
import type { EdgeAttestation } from "../deps/edge-deps.js";
import { edgeSurface } from "./sources.js";

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
