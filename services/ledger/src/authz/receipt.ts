import { randomBytes, sign, verify } from "node:crypto";
import { assertTenantId, canonicalJson, ChaosError, concreteName, describeZodIssues, RISKS } from "@chaos-core/kit";
import { z } from "zod";
import { KID_RE, type Keyring } from "../keys/keyring.js";

/**
 * `chaoscore.tool_approval_receipt` binds a governance tool call or a cognition step;
 * `authorization` binds a finance reference tool, its `resource` being the tool's scope.
 * They are different objects: one is never accepted where the other is expected.
 */
export const RECEIPT_KINDS = ["chaoscore.tool_approval_receipt", "authorization"] as const;
export type ReceiptKind = (typeof RECEIPT_KINDS)[number];

/** The receipt layout this code writes and reads. */
export const RECEIPT_SCHEMA_VERSION = 1;

/** Risk levels a tool-approval policy assigns; a receipt carries the one the human saw. */
export { RISKS, type Risk } from "@chaos-core/kit";

export const RECEIPT_DECISIONS = ["allow", "deny"] as const;
export type ReceiptDecision = (typeof RECEIPT_DECISIONS)[number];

/** Nonce entropy: 128 bits, the floor for a value that must never repeat by chance. */
const NONCE_BYTES = 16;

// 22 base64url characters carry 128 bits; shorter would be guessable, longer than 128 is noise.
const NONCE_RE = /^[A-Za-z0-9_-]{22,128}$/;
// An Ed25519 signature is 64 bytes: exactly 86 unpadded base64url characters.
const SIGNATURE_RE = /^[A-Za-z0-9_-]{86}$/;
const SHA256_HEX_RE = /^[0-9a-f]{64}$/;
const RFC3339_UTC_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z$/;

/** Milliseconds since the epoch of an RFC 3339 UTC timestamp, or undefined when it is not one. */
export function parseUtcTimestamp(value: string): number | undefined {
  if (!RFC3339_UTC_RE.test(value)) return undefined;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) return undefined;
  // Date.parse rolls 2024-02-30 over to March 1st; a date that does not round-trip is invalid.
  if (new Date(ms).toISOString().slice(0, 19) !== value.slice(0, 19)) return undefined;
  return ms;
}

const utcTimestamp = z
  .string()
  .refine((v) => parseUtcTimestamp(v) !== undefined, "must be an RFC 3339 UTC timestamp such as 2025-01-31T12:00:00.000Z");

const tenantId = z.string().superRefine((tenant, ctx) => {
  try {
    assertTenantId(tenant);
  } catch (err) {
    ctx.addIssue({ code: "custom", message: (err as Error).message });
  }
});

const fieldShape = {
  kind: z.enum(RECEIPT_KINDS),
  schema_version: z.literal(RECEIPT_SCHEMA_VERSION),
  kid: z.string().regex(KID_RE, "is not a key id"),
  tenant: tenantId,
  actor: concreteName(512),
  tool: concreteName(256),
  resource: concreteName(512),
  args_hash: z.string().regex(SHA256_HEX_RE, "must be a lowercase hex SHA-256"),
  policy_version: concreteName(128),
  risk: z.enum(RISKS),
  issued_at: utcTimestamp,
  expiry: utcTimestamp,
  decision: z.enum(RECEIPT_DECISIONS),
  nonce: z.string().regex(NONCE_RE, "must be at least 128 bits of base64url"),
};

/** A receipt whose validity window is empty or reversed was never valid: malformed, not expired. */
function windowIsOrdered(r: { issued_at: string; expiry: string }): boolean {
  return (parseUtcTimestamp(r.expiry) ?? 0) > (parseUtcTimestamp(r.issued_at) ?? 0);
}
const WINDOW_PROBLEM = { message: "must be later than issued_at", path: ["expiry"] };

/** The signed fields. Strict: an unknown key is a schema failure, never silently ignored. */
export const receiptFieldsSchema = z.strictObject(fieldShape).refine(windowIsOrdered, WINDOW_PROBLEM);

/** A whole receipt: the fields plus `signature` (base64url Ed25519). Strict as well. */
export const receiptSchema = z
  .strictObject({ ...fieldShape, signature: z.string().regex(SIGNATURE_RE, "must be a base64url Ed25519 signature") })
  .refine(windowIsOrdered, WINDOW_PROBLEM);

/** Everything a receipt signs. */
export type ReceiptFields = z.infer<typeof receiptFieldsSchema>;

/** A signed receipt, passed back whole by the caller. */
export type Receipt = z.infer<typeof receiptSchema>;

/** A fresh single-use nonce: 128 random bits, base64url. */
export function newNonce(): string {
  return randomBytes(NONCE_BYTES).toString("base64url");
}

/** Validates an untrusted value as a receipt. `problem` names the bad fields. */
export function parseReceipt(value: unknown): { ok: true; receipt: Receipt } | { ok: false; problem: string } {
  const result = receiptSchema.safeParse(value, { reportInput: true });
  return result.success ? { ok: true, receipt: result.data } : { ok: false, problem: describeZodIssues(result.error, receiptSchema, "").join("; ") };
}

/** The exact bytes a receipt's signature covers: the canonical JSON of every field but `signature`. */
export function receiptSigningBytes(fields: ReceiptFields): Buffer {
  // Rebuilt from the schema's keys so nothing outside the signed set can slip in.
  const signed: Record<string, unknown> = {};
  for (const key of Object.keys(fieldShape) as (keyof ReceiptFields)[]) signed[key] = fields[key];
  return Buffer.from(canonicalJson(signed), "utf8");
}

/**
 * Signs `fields` with the keyring's active key, stamping its `kid`. The fields are validated
 * first: a receipt this service signs is always one it would accept.
 * @throws ChaosError `invalid_argument` naming the bad field.
 */
export function signReceipt(fields: Omit<ReceiptFields, "kid">, keyring: Keyring): Receipt {
  const result = receiptFieldsSchema.safeParse({ ...fields, kid: keyring.active.kid }, { reportInput: true });
  if (!result.success) throw new ChaosError("invalid_argument", `receipt: ${describeZodIssues(result.error, receiptFieldsSchema, "").join("; ")}`);
  const signature = sign(null, receiptSigningBytes(result.data), keyring.active.privateKey).toString("base64url");
  return { ...result.data, signature };
}

/** Why a signature did not verify: its kid is not in the keyring, or it does not match. */
export type SignatureFailure = "unknown_key" | "bad_signature";

/**
 * Verifies a parsed receipt's signature with the key its `kid` names. A kid the keyring does not
 * hold (never known, or rotated out) is `unknown_key`; any other mismatch is `bad_signature`.
 */
export function verifyReceiptSignature(
  receipt: Receipt,
  keyring: Keyring,
): { ok: true } | { ok: false; code: SignatureFailure; problem: string } {
  const key = keyring.verificationKey(receipt.kid);
  if (key === undefined) {
    return { ok: false, code: "unknown_key", problem: `no verification key with kid "${receipt.kid}" (unknown or rotated out)` };
  }
  const signature = Buffer.from(receipt.signature, "base64url");
  // The last base64url character of 64 bytes carries 4 unused bits, and Node's decoder ignores
  // them; without this check a receipt with a flipped final character would still verify.
  if (signature.toString("base64url") !== receipt.signature) {
    return { ok: false, code: "bad_signature", problem: "the receipt's signature is bad: it is not in canonical base64url" };
  }
  const { signature: _signature, ...fields } = receipt;
  let valid: boolean;
  try {
    valid = verify(null, receiptSigningBytes(fields), key, signature);
  } catch {
    // A key or input OpenSSL refuses verifies nothing.
    valid = false;
  }
  return valid ? { ok: true } : { ok: false, code: "bad_signature", problem: "the receipt's signature is bad: it does not match the receipt's fields (changed after signing, or forged)" };
}
