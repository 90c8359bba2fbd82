import { createHash } from "node:crypto";
import { BearerRefusal } from "./bearer-refusal.js";

/** What {@link createIntrospector} needs: the endpoint, this server's credentials there, and what an answer must say. */
export interface IntrospectorOptions {
  readonly url: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** An answer's `iss`, when present, must be this. */
  readonly issuer: string;
  /** An answer's `aud` must name this resource (required: fail closed when absent). */
  readonly resource: string;
  readonly clockSkewSeconds: number;
  /** How long an active answer is reused (default {@link DEFAULT_INTROSPECTION_CACHE_SECONDS}). */
  readonly cacheSeconds?: number;
  /** Most answers kept at once (default 10 000); the oldest goes first. */
  readonly maxCached?: number;
}

/** Default of {@link IntrospectorOptions.cacheSeconds}: a revoked token works at most this long. */
export const DEFAULT_INTROSPECTION_CACHE_SECONDS = 30;

/** RFC 7662 introspection with a short positive cache. */
export interface Introspector {
  /** The claims of an active token meant for this resource; a {@link BearerRefusal} otherwise. */
  introspect(token: string): Promise<Readonly<Record<string, unknown>>>;
}

const TIMEOUT_MS = 5_000;

/** RFC 6749 §2.3.1: client_secret_basic form-encodes id and secret before base64. */
function basicAuth(id: string, secret: string): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");
  return `Basic ${Buffer.from(`${enc(id)}:${enc(secret)}`).toString("base64")}`;
}

/**
 * An introspection client. Only active answers are cached, keyed by the token's SHA-256 (the
 * token itself is not kept), each until the earlier of `cacheSeconds` from now and the token's
 * `exp`. An inactive token is asked about again each time, so a token issued later under the same
 * string is never refused from a stale answer; an endpoint that cannot be reached is `unavailable`.
 */
export function createIntrospector(options: IntrospectorOptions): Introspector {
  const cacheMs = (options.cacheSeconds ?? DEFAULT_INTROSPECTION_CACHE_SECONDS) * 1000;
  const maxCached = options.maxCached ?? 10_000;
  const cache = new Map<string, { claims: Readonly<Record<string, unknown>>; until: number }>();
  const authorization = basicAuth(options.clientId, options.clientSecret);

  async function ask(token: string): Promise<Record<string, unknown>> {
    let res: globalThis.Response;
    try {
      res = await fetch(options.url, {
        method: "POST",
        headers: { authorization, "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: new URLSearchParams({ token, token_type_hint: "access_token" }).toString(),
        signal: AbortSignal.timeout(TIMEOUT_MS),
        redirect: "error",
      });
    } catch {
      throw new BearerRefusal("unavailable", "the authorization server cannot be asked about the token now; retry shortly");
    }
    const body = (await res.json().catch(() => undefined)) as unknown;
    if (!res.ok || typeof body !== "object" || body === null || Array.isArray(body)) {
      throw new BearerRefusal("unavailable", "the authorization server cannot be asked about the token now; retry shortly");
    }
    return body as Record<string, unknown>;
  }

  function check(claims: Record<string, unknown>, nowSeconds: number): void {
    if (claims["active"] !== true) throw new BearerRefusal("invalid_token", "the access token is not active");
    const { exp, nbf, iss, aud } = claims;
    if (typeof exp === "number" && exp + options.clockSkewSeconds <= nowSeconds) throw new BearerRefusal("invalid_token", "the access token has expired");
    if (typeof nbf === "number" && nbf - options.clockSkewSeconds > nowSeconds) throw new BearerRefusal("invalid_token", "the access token is not valid yet");
    if (iss !== undefined && iss !== options.issuer) {
      throw new BearerRefusal("invalid_token", "the access token was not issued by this server's authorization server (iss)");
    }
    const audiences = typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud : [];
    if (!audiences.includes(options.resource)) throw new BearerRefusal("invalid_token", "the access token was not issued for this resource (aud)");
  }

  return {
    async introspect(token) {
      const key = createHash("sha256").update(token, "utf8").digest("hex");
      const now = Date.now();
      const hit = cache.get(key);
      if (hit && hit.until > now) return hit.claims;
      if (hit) cache.delete(key);
      const claims = await ask(token);
      check(claims, now / 1000);
      const exp = typeof claims["exp"] === "number" ? claims["exp"] * 1000 : Infinity;
      const until = Math.min(now + cacheMs, exp);
      if (until > now) {
        if (cache.size >= maxCached) cache.delete(cache.keys().next().value!);
        cache.set(key, { claims: Object.freeze({ ...claims }), until });
      }
      return claims;
    },
  };
}
