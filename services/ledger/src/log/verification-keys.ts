import { createPublicKey, type KeyObject } from "node:crypto";
import { noteVerifier, parseCheckpointText, parseNote, parseVerifierKey, type NoteVerifier } from "./checkpoint.js";

/** One public key: a verifier key string (`<name>+<hash>+<base64 key>`), a PEM, or a KeyObject. */
export type PublicKeyInput = string | KeyObject;

/**
 * The public keys a log's checkpoints were signed with across rotations (issue 35 item 4), each
 * trusted for the checkpoint sizes it was in use for: a checkpoint of size S is verified only by a
 * key whose range holds S, so a retired key — lost or stolen after it was rotated out — cannot sign
 * a checkpoint of the log's later history.
 */
export interface VerificationKeySet {
  readonly keys: ReadonlyArray<{
    readonly key: PublicKeyInput;
    /** The smallest checkpoint size it signed; 0 when unset. */
    readonly fromSize?: number;
    /** The largest; no bound when unset (the key in use now). */
    readonly untilSize?: number;
  }>;
}

/** What `verify` takes: one public key, or a set across rotations. */
export type VerificationKey = PublicKeyInput | VerificationKeySet;

/** The verifiers that may sign a note. */
export type Verifiers = (note: string) => NoteVerifier[];

export function isKeySet(key: VerificationKey): key is VerificationKeySet {
  return typeof key === "object" && "keys" in key && Array.isArray((key as VerificationKeySet).keys);
}

/** The size a checkpoint note claims; -1 when it cannot be read (its verification then fails anyway). */
function claimedSize(note: string): number {
  try {
    return parseCheckpointText(parseNote(note).text).size;
  } catch {
    return -1;
  }
}

/** The keys of a set trusted for a checkpoint of `size`. */
export function keysAt(set: VerificationKeySet, size: number): PublicKeyInput[] {
  return set.keys.filter((k) => size >= (k.fromSize ?? 0) && (k.untilSize === undefined || size <= k.untilSize)).map((k) => k.key);
}

export function verifiersFor(key: VerificationKey): Verifiers {
  if (isKeySet(key)) {
    const each = key.keys.map((k) => ({ ...k, verifiers: verifiersFor(k.key) }));
    return (note) => {
      const size = claimedSize(note);
      return each.filter((k) => size >= (k.fromSize ?? 0) && (k.untilSize === undefined || size <= k.untilSize)).flatMap((k) => k.verifiers(note));
    };
  }
  if (typeof key === "string") {
    const text = key.trim();
    if (text.startsWith("-----BEGIN")) return verifiersFor(createPublicKey(text));
    const v = parseVerifierKey(text);
    return () => [v];
  }
  // A bare key has no name: it is "known" under whatever name a signature line gives it, as
  // long as the key hash of that name and this key matches.
  return (note) => {
    const names = new Set(parseNote(note).signatures.map((s) => s.name));
    return [...names].map((name) => noteVerifier(name, key));
  };
}

/**
 * Reads a key set as an operator writes it (JSON): `{"keys": [{"key": "<verifier key or PEM>",
 * "fromSize": 0, "untilSize": 1200}, {"key": "…", "fromSize": 1201}]}`. A problem is named at its
 * depth (`keys[1].untilSize: …`).
 */
export function parseVerificationKeySet(text: string): VerificationKeySet {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new Error(`a key set is JSON: ${(err as Error).message}`, { cause: err });
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0) throw new Error('a key set is {"keys": [{"key": …, "fromSize"?, "untilSize"?}, …]} with at least one key');
  return {
    keys: keys.map((entry: unknown, i) => {
      const e = entry as Record<string, unknown> | null;
      const where = `keys[${i}]`;
      if (typeof e !== "object" || e === null) throw new Error(`${where}: must be an object`);
      const unknown = Object.keys(e).filter((k) => !["key", "fromSize", "untilSize"].includes(k));
      if (unknown.length > 0) throw new Error(`${where}.${unknown[0]}: unknown field (key, fromSize, untilSize)`);
      if (typeof e.key !== "string" || e.key.trim() === "") throw new Error(`${where}.key: must be a verifier key or a PEM public key`);
      try {
        verifiersFor(e.key);
      } catch (err) {
        throw new Error(`${where}.key: ${(err as Error).message}`, { cause: err });
      }
      for (const f of ["fromSize", "untilSize"] as const) {
        if (e[f] !== undefined && !(Number.isSafeInteger(e[f]) && (e[f] as number) >= 0)) throw new Error(`${where}.${f}: must be a whole number, 0 or more`);
      }
      if (typeof e.fromSize === "number" && typeof e.untilSize === "number" && e.untilSize < e.fromSize) throw new Error(`${where}.untilSize: is below fromSize`);
      return { key: e.key, ...(typeof e.fromSize === "number" ? { fromSize: e.fromSize } : {}), ...(typeof e.untilSize === "number" ? { untilSize: e.untilSize } : {}) };
    }),
  };
}
