/**
 * Why a bearer token is refused, in RFC 6750 terms: `invalid_token` (401), `insufficient_scope`
 * (403, with the scope needed), or `unavailable` when the issuer's keys or introspection endpoint
 * cannot be reached now (503: the token may well be good, and the client should retry, not
 * re-authorize). The message is for the client and never holds the token.
 */
export class BearerRefusal extends Error {
  constructor(
    readonly error: "invalid_token" | "insufficient_scope" | "unavailable",
    message: string,
    readonly scope?: string,
  ) {
    super(message);
  }
}
