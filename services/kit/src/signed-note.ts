import { createHash, createPublicKey, sign, verify, type KeyObject } from "node:crypto";

/**
 * C2SP signed notes (https://c2sp.org/signed-note) with Ed25519 signatures: the ledger signs its
 * checkpoints with them and `chaos-core contracts sign` the lockfile's server digest. A note is
 * verified with the public key alone, so anyone handed the verifier key can check it.
 */

/** The signature type byte of an Ed25519 note signature. */
const ED25519_TYPE = 0x01;
const EM_DASH_PREFIX = "\u2014 ";
/** The spec asks verifiers to accept at least 16; more is a malformed (or hostile) note. */
const MAX_SIGNATURES = 100;

/** The signing key of a log: its key name and an Ed25519 key pair (node:crypto KeyObjects). */
export interface NoteSigner {
  /** The key name in signature lines; non-empty, without spaces or `+`. */
  name: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

/** A public key to verify notes with: the key name, its 4-byte key hash and the key. */
export interface NoteVerifier {
  name: string;
  keyHash: Buffer;
  publicKey: KeyObject;
}

/** A note split into its text and signature lines, nothing verified yet. */
export interface ParsedNote {
  /** The signed text, including its final newline. */
  text: string;
  signatures: Array<{ name: string; keyHash: Buffer; signature: Buffer }>;
}

/** A note or a key that does not follow the format; the message says what is wrong. */
export class NoteFormatError extends Error {
  override readonly name = "NoteFormatError";
}

/** Thrown when no signature of a known key verifies, or one of them fails. */
export class NoteVerificationError extends Error {
  override readonly name = "NoteVerificationError";
}

const KEY_NAME_RE = /^[^\s+]+$/u;

/** True when `s` holds an ASCII control character (below U+0020), newline excepted if allowed. */
function hasControl(s: string, allowNewline: boolean): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 && !(allowNewline && c === 0x0a)) return true;
  }
  return false;
}

function assertKeyName(name: string): void {
  if (name === "" || !KEY_NAME_RE.test(name) || hasControl(name, false)) {
    throw new NoteFormatError(`key name "${name}" must be non-empty, without spaces, "+" or control characters`);
  }
}

/** Strict standard base64: decodes only text that re-encodes to itself (else a NoteFormatError naming `what`). */
export function decodeBase64(text: string, what: string): Buffer {
  const bytes = Buffer.from(text, "base64");
  if (text === "" || bytes.toString("base64") !== text) throw new NoteFormatError(`${what} is not standard base64`);
  return bytes;
}

/** The 32-byte Ed25519 public key of a KeyObject (refuses any other key type). */
export function rawEd25519PublicKey(publicKey: KeyObject): Buffer {
  if (publicKey.asymmetricKeyType !== "ed25519") {
    throw new NoteFormatError(`an Ed25519 key is required, got ${publicKey.asymmetricKeyType ?? publicKey.type}`);
  }
  const jwk = publicKey.export({ format: "jwk" });
  if (typeof jwk.x !== "string") throw new NoteFormatError("the public key has no Ed25519 point");
  return Buffer.from(jwk.x, "base64url");
}

/** The C2SP key ID of an Ed25519 key: SHA-256(name || "\n" || 0x01 || public key)[:4]. */
export function ed25519KeyHash(name: string, publicKey: KeyObject | Uint8Array): Buffer {
  assertKeyName(name);
  const raw = publicKey instanceof Uint8Array ? Buffer.from(publicKey) : rawEd25519PublicKey(publicKey);
  if (raw.length !== 32) throw new NoteFormatError(`an Ed25519 public key has 32 bytes, got ${raw.length}`);
  return createHash("sha256")
    .update(name, "utf8")
    .update(Uint8Array.of(0x0a, ED25519_TYPE))
    .update(raw)
    .digest()
    .subarray(0, 4);
}

/**
 * The verifier key string an operator hands out: `<name>+<hex key hash>+<base64(0x01 || key)>`
 * (the format of golang.org/x/mod/sumdb/note and transparency-dev tools).
 */
export function verifierKey(name: string, publicKey: KeyObject): string {
  const raw = rawEd25519PublicKey(publicKey);
  const hash = ed25519KeyHash(name, raw);
  return `${name}+${hash.toString("hex")}+${Buffer.concat([Uint8Array.of(ED25519_TYPE), raw]).toString("base64")}`;
}

function publicKeyFromRaw(raw: Uint8Array): KeyObject {
  return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(raw).toString("base64url") }, format: "jwk" });
}

/** Parses a verifier key string; refuses a wrong key hash, algorithm or length. */
export function parseVerifierKey(vkey: string): NoteVerifier {
  const first = vkey.indexOf("+");
  const second = first < 0 ? -1 : vkey.indexOf("+", first + 1);
  if (first <= 0 || second < 0) throw new NoteFormatError("a verifier key is <name>+<hex key hash>+<base64 key>");
  const name = vkey.slice(0, first);
  const hashHex = vkey.slice(first + 1, second);
  assertKeyName(name);
  if (!/^[0-9a-f]{8}$/.test(hashHex)) throw new NoteFormatError("the key hash of a verifier key is 8 lowercase hex digits");
  const typed = decodeBase64(vkey.slice(second + 1), "the verifier key");
  if (typed.length !== 33 || typed[0] !== ED25519_TYPE) throw new NoteFormatError("the verifier key is not an Ed25519 key (type 0x01, 32 bytes)");
  const raw = typed.subarray(1);
  const keyHash = Buffer.from(hashHex, "hex");
  if (!ed25519KeyHash(name, raw).equals(keyHash)) throw new NoteFormatError("the key hash does not match the verifier key's name and key");
  return { name, keyHash, publicKey: publicKeyFromRaw(raw) };
}

/** A verifier for a signer's public half. */
export function noteVerifier(name: string, publicKey: KeyObject): NoteVerifier {
  return { name, keyHash: ed25519KeyHash(name, publicKey), publicKey };
}

function assertNoteCharacters(s: string, what: string): void {
  // Valid UTF-8 is given by JavaScript strings except for lone surrogates.
  if (hasControl(s, true)) throw new NoteFormatError(`${what} contains a control character`);
  if (/[\uD800-\uDFFF]/u.test(s)) throw new NoteFormatError(`${what} is not valid UTF-8`);
}

/** Signs `text` (which must end in a newline) and returns the note with one signature line. */
export function signNote(text: string, signer: NoteSigner): string {
  assertNoteCharacters(text, "the note text");
  if (!text.endsWith("\n")) throw new NoteFormatError("the note text must end with a newline");
  const keyHash = ed25519KeyHash(signer.name, signer.publicKey);
  const signature = sign(null, Buffer.from(text, "utf8"), signer.privateKey);
  return `${text}\n${EM_DASH_PREFIX}${signer.name} ${Buffer.concat([keyHash, signature]).toString("base64")}\n`;
}

/** Splits a note into text and signature lines, refusing anything malformed. Verifies nothing. */
export function parseNote(note: string): ParsedNote {
  assertNoteCharacters(note, "the note");
  if (!note.endsWith("\n")) throw new NoteFormatError("a note ends with a newline");
  // The text is separated from the signatures by the last blank line.
  const split = note.lastIndexOf("\n\n");
  if (split < 0) throw new NoteFormatError("a note has a blank line before its signatures");
  const text = note.slice(0, split + 1);
  const lines = note.slice(split + 2, -1).split("\n");
  if (lines.length > MAX_SIGNATURES) throw new NoteFormatError(`a note has at most ${MAX_SIGNATURES} signatures`);
  const signatures = lines.map((line) => {
    if (!line.startsWith(EM_DASH_PREFIX)) throw new NoteFormatError("a signature line starts with an em dash and a space");
    const rest = line.slice(EM_DASH_PREFIX.length);
    const space = rest.indexOf(" ");
    if (space <= 0) throw new NoteFormatError("a signature line is \u2014 <name> <base64 signature>");
    const name = rest.slice(0, space);
    assertKeyName(name);
    const blob = decodeBase64(rest.slice(space + 1), "a signature");
    if (blob.length < 5) throw new NoteFormatError("a signature is a 4-byte key hash and at least one byte");
    return { name, keyHash: blob.subarray(0, 4), signature: blob.subarray(4) };
  });
  return { text, signatures };
}

/**
 * Verifies a note against trusted keys and returns its text. Signatures of unknown keys are
 * ignored (as the spec requires); a known key's signature that fails rejects the note, and so
 * does a note with no verified signature.
 */
export function openNote(note: string, verifiers: readonly NoteVerifier[]): string {
  const parsed = parseNote(note);
  let verified = 0;
  for (const sig of parsed.signatures) {
    const key = verifiers.find((v) => v.name === sig.name && v.keyHash.equals(sig.keyHash));
    if (!key) continue;
    if (sig.signature.length !== 64 || !verify(null, Buffer.from(parsed.text, "utf8"), key.publicKey, sig.signature)) {
      throw new NoteVerificationError(`the signature of ${sig.name} does not verify`);
    }
    verified++;
  }
  if (verified === 0) throw new NoteVerificationError("no signature from a known key");
  return parsed.text;
}
