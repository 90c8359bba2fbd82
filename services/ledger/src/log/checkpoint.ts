import {
  decodeBase64,
  NoteFormatError,
  NoteVerificationError,
  openNote,
  type NoteSigner,
  type NoteVerifier,
  signNote,
} from "@chaos-core/kit";
import { HASH_SIZE } from "./merkle.js";

/**
 * The tlog-checkpoint body (https://c2sp.org/tlog-checkpoint) the ledger signs at every commit,
 * as a C2SP signed note (kit's signed-note module, shared with the contracts' attestation).
 * A checkpoint is verified with the public key alone, so anyone the operator hands the
 * verifier key to can check a ledger export.
 */

export {
  ed25519KeyHash,
  NoteFormatError,
  NoteVerificationError,
  noteVerifier,
  openNote,
  parseNote,
  parseVerifierKey,
  rawEd25519PublicKey,
  signNote,
  verifierKey,
} from "@chaos-core/kit";
export type { NoteSigner, NoteVerifier, ParsedNote } from "@chaos-core/kit";

/** A checkpoint: a tree head of one log. */
export interface Checkpoint {
  /** The log's identity, e.g. `chaos-core/acme`. */
  origin: string;
  size: number;
  /** The RFC 6962 root hash (32 bytes). */
  root: Buffer;
  /** Optional, opaque extension lines (not used by the ledger). */
  extensions?: string[];
}

/** The checkpoint note text: origin, size, base64 root, then any extension lines. */
export function checkpointText(cp: Checkpoint): string {
  if (cp.origin === "" || cp.origin.includes("\n")) throw new NoteFormatError("a checkpoint origin is one non-empty line");
  if (!Number.isSafeInteger(cp.size) || cp.size < 0) throw new NoteFormatError(`a tree size is a non-negative integer, got ${cp.size}`);
  if (cp.root.length !== HASH_SIZE) throw new NoteFormatError(`a root hash has ${HASH_SIZE} bytes`);
  for (const ext of cp.extensions ?? []) {
    if (ext === "" || ext.includes("\n")) throw new NoteFormatError("an extension line is one non-empty line");
  }
  return [cp.origin, String(cp.size), cp.root.toString("base64"), ...(cp.extensions ?? [])].join("\n") + "\n";
}

/** Parses a checkpoint note text (not a signed note: see {@link openCheckpoint}). */
export function parseCheckpointText(text: string): Checkpoint {
  if (!text.endsWith("\n")) throw new NoteFormatError("a checkpoint text ends with a newline");
  const lines = text.slice(0, -1).split("\n");
  if (lines.length < 3 || lines.some((l) => l === "")) throw new NoteFormatError("a checkpoint has at least three non-empty lines");
  const [origin, sizeText, rootText, ...extensions] = lines as [string, string, string, ...string[]];
  if (!/^(0|[1-9][0-9]*)$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText))) {
    throw new NoteFormatError(`"${sizeText}" is not a tree size`);
  }
  const root = decodeBase64(rootText, "the root hash");
  if (root.length !== HASH_SIZE) throw new NoteFormatError(`a root hash has ${HASH_SIZE} bytes, got ${root.length}`);
  return extensions.length > 0 ? { origin, size: Number(sizeText), root, extensions } : { origin, size: Number(sizeText), root };
}

/** Signs a checkpoint and returns the note. */
export function signCheckpoint(cp: Checkpoint, signer: NoteSigner): string {
  return signNote(checkpointText(cp), signer);
}

/**
 * Verifies a checkpoint note with trusted keys and returns the checkpoint. With `origin`,
 * also refuses a checkpoint of another log.
 */
export function openCheckpoint(note: string, verifiers: readonly NoteVerifier[], origin?: string): Checkpoint {
  const cp = parseCheckpointText(openNote(note, verifiers));
  if (origin !== undefined && cp.origin !== origin) {
    throw new NoteVerificationError(`the checkpoint is for "${cp.origin}", not "${origin}"`);
  }
  return cp;
}
