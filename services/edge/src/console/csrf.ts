import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * CSRF protection of the console's forms (docs/approvals.md §2, "CSRF, Origin, Host"). A
 * signed-in session holds a random token that every form it is shown carries; the sign-in forms,
 * before any session exists, use a signed double-submit: a random value in a cookie and its HMAC
 * in the form, so a page elsewhere can neither read nor forge the pair.
 */

/** A new random token: 32 bytes, base64url. */
export function newCsrfToken(): string {
  return randomBytes(32).toString("base64url");
}

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/** Whether a form's token is the expected one, compared in constant time (over digests, so lengths say nothing). */
export function sameToken(given: unknown, expected: string): boolean {
  if (typeof given !== "string" || given.length === 0 || expected.length === 0) return false;
  return timingSafeEqual(digest(given), digest(expected));
}

/**
 * The sign-in form's token for the pre-session cookie's value `nonce`: an HMAC under the
 * console's key (every replica holds the same one), so a request that carries a cookie it did
 * not get from this console cannot carry the matching form value.
 */
export function signInToken(key: Uint8Array, nonce: string): string {
  return createHmac("sha256", key).update(`chaoscore-console-sign-in:${nonce}`, "utf8").digest("base64url");
}

/** Whether `token` is the sign-in token of the cookie value `nonce`. */
export function signInTokenMatches(key: Uint8Array, nonce: string | undefined, token: unknown): boolean {
  if (!nonce) return false;
  return sameToken(token, signInToken(key, nonce));
}

/**
 * The key that signs the sign-in tokens: derived from the edge's context key when it has one
 * (the edge alone: every replica shares it, so a form shown by one is accepted by another), else
 * random for this process (standalone is one process).
 */
export function consoleSigningKey(contextKey?: string): Uint8Array {
  if (!contextKey) return randomBytes(32);
  return createHmac("sha256", contextKey).update("chaoscore-console-csrf-v1", "utf8").digest();
}
