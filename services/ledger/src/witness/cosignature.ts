import { createHash, createPublicKey, sign, verify, type KeyObject } from "node:crypto";
import { decodeBase64, NoteFormatError, parseNote, rawEd25519PublicKey, type NoteSigner } from "@chaos-core/kit";

/**
 * C2SP `tlog-cosignature` v1 with Ed25519 (https://c2sp.org/tlog-cosignature): a witness's
 * timestamped statement that, as of that time, the checkpoint is the largest consistent tree head
 * it has observed for the log. A cosignature is a note signature line whose blob is the key ID,
 * an 8-byte big-endian POSIX timestamp and an Ed25519 signature over
 * `cosignature/v1\ntime <timestamp>\n` followed by the checkpoint's whole note body.
 */

/** The signature type of an Ed25519 cosignature/v1 key (its key ID and vkey). */
export const COSIGNATURE_V1_TYPE = 0x04;

/** A witness's public key as a verifier uses it. */
export interface Cosigner {
  readonly name: string;
  readonly keyId: Buffer;
  readonly publicKey: KeyObject;
}

/** SHA-256(name || "\n" || 0x04 || 32-byte Ed25519 public key)[:4]. */
export function cosignerKeyId(name: string, publicKey: KeyObject | Uint8Array): Buffer {
  const raw = publicKey instanceof Uint8Array ? Buffer.from(publicKey) : rawEd25519PublicKey(publicKey);
  if (raw.length !== 32) throw new NoteFormatError(`an Ed25519 public key has 32 bytes, got ${raw.length}`);
  return createHash("sha256").update(name, "utf8").update(Uint8Array.of(0x0a, COSIGNATURE_V1_TYPE)).update(raw).digest().subarray(0, 4);
}

/** The witness's verifier key: `<name>+<hex key ID>+<base64(0x04 || key)>`, as the spec allows vkeys to encode it. */
export function cosignerVerifierKey(name: string, publicKey: KeyObject): string {
  const raw = rawEd25519PublicKey(publicKey);
  return `${name}+${cosignerKeyId(name, raw).toString("hex")}+${Buffer.concat([Uint8Array.of(COSIGNATURE_V1_TYPE), raw]).toString("base64")}`;
}

/** Reads a witness's verifier key; refuses another type, length or a key ID that does not match. */
export function parseCosignerKey(vkey: string): Cosigner {
  // Split at the first two '+' only: the base64 key may itself hold '+'.
  const text = vkey.trim();
  const first = text.indexOf("+");
  const second = first < 0 ? -1 : text.indexOf("+", first + 1);
  const [name, idHex, blob] = [text.slice(0, Math.max(first, 0)), text.slice(first + 1, second), text.slice(second + 1)];
  if (first <= 0 || second < 0 || !/^[0-9a-f]{8}$/.test(idHex) || blob === "") throw new NoteFormatError("a witness key is <name>+<hex key ID>+<base64 key>");
  const typed = decodeBase64(blob, "the witness key");
  if (typed.length !== 33 || typed[0] !== COSIGNATURE_V1_TYPE) throw new NoteFormatError("the witness key is not an Ed25519 cosignature/v1 key (type 0x04, 32 bytes)");
  const raw = typed.subarray(1);
  const keyId = cosignerKeyId(name, raw);
  if (keyId.toString("hex") !== idHex) throw new NoteFormatError("the key ID does not match the witness key's name and key");
  return { name, keyId, publicKey: createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") }, format: "jwk" }) };
}

/** What a cosigner signs: the header line, the time line and the note body (with its final newline). */
export function cosignedMessage(noteText: string, timestamp: number): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${timestamp}\n${noteText}`, "utf8");
}

/** A cosignature line on `noteText` (the checkpoint's body): `— <name> base64(key ID || u64 timestamp || signature)\n`. */
export function cosign(noteText: string, signer: NoteSigner, timestamp: number): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new RangeError("a cosignature timestamp is a non-negative whole number of seconds");
  const time = Buffer.alloc(8);
  time.writeBigUInt64BE(BigInt(timestamp));
  const signature = sign(null, cosignedMessage(noteText, timestamp), signer.privateKey);
  return `\u2014 ${signer.name} ${Buffer.concat([cosignerKeyId(signer.name, signer.publicKey), time, signature]).toString("base64")}\n`;
}

/**
 * The timestamp of `cosigner`'s cosignature on a note (its checkpoint with signature lines, the
 * log's and the witnesses'), or undefined when it holds none that verifies. Lines of other keys
 * are ignored.
 */
export function cosignatureOf(note: string, cosigner: Cosigner): number | undefined {
  const parsed = parseNote(note);
  for (const s of parsed.signatures) {
    if (s.name !== cosigner.name || !s.keyHash.equals(cosigner.keyId) || s.signature.length !== 72) continue;
    const timestamp = s.signature.readBigUInt64BE(0);
    if (timestamp > BigInt(Number.MAX_SAFE_INTEGER)) continue;
    if (verify(null, cosignedMessage(parsed.text, Number(timestamp)), cosigner.publicKey, s.signature.subarray(8))) return Number(timestamp);
  }
  return undefined;
}
