import type { Response } from "express";

/**
 * The console's Content-Security-Policy: nothing but this origin's stylesheet, no script at all,
 * no plugin, no `<base>`, forms post only here, and no page may frame it.
 */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/**
 * Headers every console response carries (docs/approvals.md §2, "Headers"; every route is
 * `no-store`). The referrer policy is `same-origin`, not `no-referrer`: under `no-referrer` a
 * browser sends `Origin: null` with the console's own form posts (Fetch, "serializing a request
 * origin"), which the Origin check must refuse. `same-origin` still sends no URL (the sign-in
 * link's token included) to any other origin.
 */
export const CONSOLE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "Content-Security-Policy": CONSOLE_CSP,
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "same-origin",
  "X-Frame-Options": "DENY",
  "Cache-Control": "no-store",
});

/** Sets {@link CONSOLE_HEADERS} on `res`. */
export function setConsoleHeaders(res: Response): void {
  res.set(CONSOLE_HEADERS);
}

/**
 * The console's cookie names for an origin: `__Host-` ones (which need `Secure`) on https.
 * `session` is the signed-in session, `signIn` the sign-in forms' pre-session cookie, `oauth` an
 * OAuth sign-in in progress (its state, PKCE verifier and nonce, sealed).
 */
export function cookieNames(secure: boolean): { readonly session: string; readonly signIn: string; readonly oauth: string } {
  return secure
    ? { session: "__Host-chaoscore-console", signIn: "__Host-chaoscore-console-sign-in", oauth: "__Host-chaoscore-console-oauth" }
    : { session: "chaoscore-console", signIn: "chaoscore-console-sign-in", oauth: "chaoscore-console-oauth" };
}

/** How a cookie is set: `Secure` (an https origin), its `Max-Age` (0 clears it), and `SameSite` (`Strict` unless said). */
export interface CookieOptions {
  readonly secure: boolean;
  readonly maxAgeSeconds: number;
  /** Only the OAuth sign-in's own short-lived cookie is `Lax` (see the sign-in route for why). */
  readonly sameSite?: "Strict" | "Lax";
}

/**
 * A `Set-Cookie` value: `HttpOnly; SameSite=Strict; Path=/`, `Secure` on an https origin, and
 * `Max-Age` (0 clears it). The values the console sets are base64url, JWE compact
 * serializations and tenant ids, so they need no quoting.
 */
export function cookie(name: string, value: string, options: CookieOptions): string {
  return [
    `${name}=${value}`,
    "HttpOnly",
    `SameSite=${options.sameSite ?? "Strict"}`,
    "Path=/",
    `Max-Age=${options.maxAgeSeconds}`,
    ...(options.secure ? ["Secure"] : []),
  ].join("; ");
}

/** The value of cookie `name` in a request's `Cookie` header; the first when it comes more than once. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const pair of header.split(";")) {
    const eq = pair.indexOf("=");
    if (eq === -1) continue;
    if (pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim();
  }
  return undefined;
}
