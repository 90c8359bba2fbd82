import { createHash, randomBytes } from "node:crypto";

/**
 * Principals no API key may be issued to: `operator` answers as the standalone operator
 * (admin endpoint, console sign-in link) and `local` is stdio's and unauthenticated loopback's
 * user; cognition and the ledger tell channels and self-approval apart by these names.
 */
export const RESERVED_PRINCIPALS: readonly string[] = ["operator", "local"];

/** Why `principal` is a reserved name no key may be issued to, or undefined when it is not. */
export function reservedPrincipalProblem(principal: string): string | undefined {
  if (!RESERVED_PRINCIPALS.includes(principal)) return undefined;
  return (
    `"${principal}" is reserved: "operator" is the standalone operator's principal and "local" the one of stdio and ` +
    "unauthenticated loopback, so an API key under either name would blur who answered an approval; pick another name"
  );
}

/** Why `principal` cannot hold an API key of the tenant registry, or undefined when it can. */
export function principalProblem(principal: string): string | undefined {
  if (principal.length < 1 || principal.length > 256) return "must be 1 to 256 characters";
  if ([...principal].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)) return "must not contain control characters";
  return reservedPrincipalProblem(principal);
}

/** The SHA-256 an API keys file or the key directory stores for a key (lowercase hex). */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** How every operator-issued key starts. */
export const ISSUED_KEY_PREFIX = "cc_";

/** What an operator-issued key looks like: `cc_<key id>_<secret>`. */
const ISSUED_KEY_RE = /^cc_([a-z2-7]{8})_[A-Za-z0-9_-]{43}$/;
const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/**
 * A new operator-issued key: `cc_` + an 8-character id a person can read back (RFC 4648 base32,
 * lowercase) + `_` + 256 random bits (base64url). The id is public (lists show it); the whole key
 * is the secret and only its SHA-256 is stored.
 */
export function newIssuedKey(): { keyId: string; secret: string; sha256: string } {
  const idBytes = randomBytes(8);
  const keyId = [...idBytes].map((b) => BASE32[b & 31]).join("");
  const secret = `cc_${keyId}_${randomBytes(32).toString("base64url")}`;
  return { keyId, secret, sha256: hashApiKey(secret) };
}

/** The key id of an operator-issued key, or undefined for any other string (a file key, a token). */
export function issuedKeyId(key: string): string | undefined {
  return ISSUED_KEY_RE.exec(key)?.[1];
}
