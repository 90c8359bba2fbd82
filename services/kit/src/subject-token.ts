import { createHash } from "node:crypto";

/**
 * The caller's verified access token, carried beside a call context rather than in it
 * (docs/federation-platform.md §3). Cognition exchanges it (RFC 8693) for a token of the same
 * person for an upstream declared `token_exchange`; nothing else reads it. A `CallContext` reaches
 * policy, memory, the ledger and log lines, so the token is never one of its fields: in one
 * process it is held in a `WeakMap` keyed by the context object, across processes it travels as
 * the {@link SUBJECT_TOKEN_HEADER} metadata of calls to cognition only, its hash bound into the
 * context's HMAC (kit `ContextSigner`), so it cannot be added to or swapped on a signed call.
 */
const carried = new WeakMap<object, string>();

/** The gRPC metadata header a subject token travels in, on cognition-bound calls only. */
export const SUBJECT_TOKEN_HEADER = "chaoscore-subject-token";

/** The largest subject token carried; a longer one is not (the caller then has none). */
export const MAX_SUBJECT_TOKEN_LENGTH = 8192;

/** A copy of `ctx` that carries `token` (the edge's verified OAuth access token). */
export function withSubjectToken<C extends object>(ctx: C, token: string): C {
  const copy = { ...ctx };
  if (token.length > 0 && token.length <= MAX_SUBJECT_TOKEN_LENGTH) carried.set(copy, token);
  return copy;
}

/** The subject token `ctx` carries, if any: an API key's or the local user's context carries none. */
export function subjectTokenOf(ctx: object): string | undefined {
  return carried.get(ctx);
}

/** What the signed context holds of a subject token: its SHA-256, base64url. */
export function subjectTokenDigest(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("base64url");
}
