import { createHash } from "node:crypto";
import { checkResourceAllowed, discoverOAuthProtectedResourceMetadata } from "@modelcontextprotocol/client";
import * as oauth from "oauth4webapi";
import { ChaosError, fetchAuthorizationServerMetadata, resolveSecretRef, type HttpUpstreamDeclaration, type SecretSources, type UpstreamAuth } from "@chaos-core/kit";

/** Who an upstream call is made for, as far as its token is concerned. */
export interface TokenCaller {
  readonly tenant: string;
  readonly principal: string;
  /** The caller's verified access token (kit subject-token.ts): what `token_exchange` exchanges. */
  readonly subjectToken?: string | undefined;
}

/** RFC 8693's grant type and the type of the token exchanged: an access token the edge verified. */
export const TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
export const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";

/**
 * Tokens for upstreams declared with `auth` (docs/federation-platform.md §3), at the issuer's token
 * endpoint (found by RFC 8414 / OpenID discovery, the metadata's `issuer` checked character for
 * character), audience-bound to the upstream (`resource`, RFC 8707: the declared one, else the
 * resource identifier the upstream's Protected Resource Metadata names (RFC 9728), else its URL).
 * An upstream whose metadata names authorization servers without the declared issuer, or a
 * resource identifier that does not cover its URL, gets no token: the issuer is the operator's
 * choice, never the upstream's.
 * - `client_credentials`: the tenant's machine identity, one token per upstream and pool scope;
 * - `token_exchange` (RFC 8693): the caller's verified access token exchanged for one of the same
 *   person, one per (pool scope, principal, subject token) — never another principal's or tenant's,
 *   and never the caller's own token passed on. A caller without one gets the declared `fallback`:
 *   a refusal (the default) or the client-credentials token.
 *
 * A token is cached for the shorter of its `expires_in` and {@link UpstreamTokensOptions.maxSeconds}
 * — a grant revoked at the authorization server stops calls within that bound — and dropped when
 * the upstream answers 401. Nothing is persisted; a secret is read when a token is requested. A
 * refusal is `permission_denied` naming the upstream and the issuer: the upstream did nothing wrong,
 * so the pool does not count it against its breaker.
 */
export interface UpstreamTokens {
  /** A bearer token for `decl`'s calls under `scope` (the pool entry's: `shared`, or a tenant) made for `caller`. */
  token(decl: HttpUpstreamDeclaration & { auth: UpstreamAuth }, scope: string, caller: TokenCaller): Promise<string>;
  /** Forgets the cached token (the upstream answered 401): the next call requests a new one. */
  invalidate(decl: HttpUpstreamDeclaration & { auth: UpstreamAuth }, scope: string, caller: TokenCaller): void;
}

/** Whether `decl`'s connections are one person's: it exchanges each caller's token (`token_exchange`). */
export function actsAsCaller(decl: HttpUpstreamDeclaration): boolean {
  return decl.auth?.type === "token_exchange";
}

export interface UpstreamTokensOptions {
  readonly secrets: SecretSources;
  /**
   * The fetch an upstream's discovery and token requests go through: the one its calls go through
   * (a tenant's upstream's is address-guarded, so a tenant's issuer is vetted like its URL).
   */
  readonly fetchFor?: (decl: HttpUpstreamDeclaration) => typeof fetch;
  /** The longest a token is used, whatever its `expires_in`. Default {@link DEFAULT_UPSTREAM_TOKEN_MAX_SECONDS}. */
  readonly maxSeconds?: number;
  readonly now?: () => number;
}

/** How long a cached upstream token lives at most (seconds): the bound on a revoked grant's calls. */
export const DEFAULT_UPSTREAM_TOKEN_MAX_SECONDS = 300;
/** Taken off a token's lifetime (at most a tenth of it), so it is not sent in its last moments. */
const EXPIRY_SKEW_MS = 5_000;
/** How long an issuer's metadata is used before it is read again. */
const METADATA_TTL_MS = 60 * 60_000;
const FETCH_TIMEOUT_MS = 10_000;
/** Tokens kept at once; the oldest is dropped. */
const MAX_TOKENS = 10_000;

const denied = (decl: HttpUpstreamDeclaration, issuer: string, why: string, cause?: unknown) =>
  new ChaosError("permission_denied", `upstream "${decl.name}": its authorization server ${issuer} gave no token: ${why}`, cause ? { cause } : undefined);

/** What the authorization server said when it refused: its OAuth error (RFC 6749 §5.2), from the body or a WWW-Authenticate challenge. */
function refusalOf(err: unknown): string {
  const e = err as { error?: string; error_description?: string; message?: string; cause?: unknown };
  const challenge = Array.isArray(e.cause) ? (e.cause[0] as { parameters?: { error?: string; error_description?: string } } | undefined)?.parameters : undefined;
  const body = !Array.isArray(e.cause) ? (e.cause as { error?: string; error_description?: string } | undefined) : undefined;
  const code = challenge?.error ?? body?.error ?? e.error;
  const description = challenge?.error_description ?? body?.error_description ?? e.error_description;
  return code ? `${code}${description ? ` (${description})` : ""}` : (e.message ?? String(err));
}

export function createUpstreamTokens(options: UpstreamTokensOptions): UpstreamTokens {
  const now = options.now ?? Date.now;
  const maxMs = (options.maxSeconds ?? DEFAULT_UPSTREAM_TOKEN_MAX_SECONDS) * 1000;
  const tokens = new Map<string, { value: string; until: number }>();
  const pending = new Map<string, Promise<string>>();
  const metadata = new Map<string, { as: oauth.AuthorizationServer; at: number }>();
  const resources = new Map<string, { resource: string | undefined; at: number }>();
  /**
   * What a token is cached under, or why none may be had: the machine identity's per upstream and
   * scope; an exchanged one's also per principal and the digest of the token it was exchanged for.
   */
  const grantOf = (decl: HttpUpstreamDeclaration & { auth: UpstreamAuth }, scope: string, caller: TokenCaller): { key: string; subject?: string } => {
    const base = `${decl.name}\u0000${scope}\u0000${decl.auth.issuer}\u0000${decl.auth.clientId}`;
    if (decl.auth.type !== "token_exchange") return { key: base };
    const subject = caller.subjectToken;
    if (subject) return { key: `${base}\u0000${caller.tenant}\u0000${caller.principal}\u0000${createHash("sha256").update(subject).digest("base64url")}`, subject };
    if (decl.auth.fallback === "client_credentials") return { key: base };
    throw new ChaosError(
      "permission_denied",
      `upstream "${decl.name}" acts as the calling person (token_exchange) and ${caller.principal}'s credential carries no access token to exchange (an API key, or the local user); its fallback is "refuse"`,
    );
  };
  // oauth4webapi refuses http unless told: a loopback issuer (a local or test one) is allowed it.
  const transport = (decl: HttpUpstreamDeclaration, issuer: string) => ({
    ...(options.fetchFor ? { [oauth.customFetch]: options.fetchFor(decl) } : {}),
    ...(new URL(issuer).protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(new URL(issuer).hostname) ? { [oauth.allowInsecureRequests]: true } : {}),
    signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
  });

  const discover = async (decl: HttpUpstreamDeclaration, issuer: string): Promise<oauth.AuthorizationServer> => {
    const held = metadata.get(issuer);
    if (held && now() - held.at < METADATA_TTL_MS) return held.as;
    let found: { url: string; res: Response };
    try {
      found = await fetchAuthorizationServerMetadata(issuer, { timeoutMs: FETCH_TIMEOUT_MS, ...(options.fetchFor ? { fetch: options.fetchFor(decl) } : {}) });
    } catch (err) {
      throw denied(decl, issuer, (err as Error).message, err);
    }
    const { url, res } = found;
    let as: oauth.AuthorizationServer;
    try {
      as = await oauth.processDiscoveryResponse(new URL(issuer), res);
    } catch (err) {
      throw denied(decl, issuer, `its metadata at ${url} is not usable (${(err as Error).message})`, err);
    }
    if (as.issuer !== issuer) throw denied(decl, issuer, `${url} names issuer ${JSON.stringify(as.issuer)}`);
    if (!as.token_endpoint) throw denied(decl, issuer, `${url} names no token_endpoint`);
    metadata.set(issuer, { as, at: now() });
    return as;
  };

  /**
   * The resource identifier the upstream advertises in its Protected Resource Metadata (RFC 9728,
   * the SDK's discovery), checked against the declaration; undefined when it advertises none.
   */
  const protectedResource = async (decl: HttpUpstreamDeclaration & { auth: UpstreamAuth }): Promise<string | undefined> => {
    const held = resources.get(decl.url);
    let advertised = held && now() - held.at < METADATA_TTL_MS ? held : undefined;
    if (!advertised) {
      const get = (options.fetchFor?.(decl) ?? fetch) as typeof fetch;
      const prm = await discoverOAuthProtectedResourceMetadata(decl.url, {}, (url, init) => get(url, { ...init, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) })).then(
        (m) => m,
        (err: Error) => (/does not implement/.test(err.message) ? null : undefined),
      );
      // Not served at all (404): none, remembered. Unreadable this time: none, asked again next time.
      if (prm === undefined) return undefined;
      const servers = prm?.authorization_servers ?? [];
      if (prm && servers.length > 0 && !servers.some((s) => s.replace(/\/$/, "") === decl.auth.issuer.replace(/\/$/, ""))) {
        throw denied(decl, decl.auth.issuer, `its protected resource metadata (RFC 9728) names the authorization servers ${servers.join(", ")}, not the declared issuer; no token is requested`);
      }
      if (prm && !checkResourceAllowed({ requestedResource: decl.url, configuredResource: prm.resource })) {
        throw denied(decl, decl.auth.issuer, `its protected resource metadata (RFC 9728) names the resource ${prm.resource}, which does not cover its URL`);
      }
      advertised = { resource: prm?.resource, at: now() };
      resources.set(decl.url, advertised);
    }
    return advertised.resource;
  };

  const request = async (decl: HttpUpstreamDeclaration & { auth: UpstreamAuth }, key: string, subject: string | undefined): Promise<string> => {
    const { issuer, clientId, clientSecret, scope } = decl.auth;
    const resource = decl.auth.resource ?? (await protectedResource(decl));
    const as = await discover(decl, issuer);
    const secret = await resolveSecretRef(clientSecret, options.secrets);
    const client: oauth.Client = { client_id: clientId };
    const parameters: Record<string, string> = { resource: resource ?? decl.url, ...(scope ? { scope } : {}) };
    let answer: oauth.TokenEndpointResponse;
    try {
      if (subject !== undefined) {
        // RFC 8693 §2.1: the caller's token as the subject, cognition authenticated as the client that acts for it.
        const exchange = { ...parameters, subject_token: subject, subject_token_type: ACCESS_TOKEN_TYPE, requested_token_type: ACCESS_TOKEN_TYPE };
        const res = await oauth.genericTokenEndpointRequest(as, client, oauth.ClientSecretBasic(secret), TOKEN_EXCHANGE_GRANT, exchange, transport(decl, issuer));
        answer = await oauth.processGenericTokenEndpointResponse(as, client, res);
      } else {
        const res = await oauth.clientCredentialsGrantRequest(as, client, oauth.ClientSecretBasic(secret), parameters, transport(decl, issuer));
        answer = await oauth.processClientCredentialsResponse(as, client, res);
      }
    } catch (err) {
      throw denied(decl, issuer, refusalOf(err), err);
    }
    const granted = Math.min(answer.expires_in !== undefined ? answer.expires_in * 1000 : maxMs, maxMs);
    const lifetime = granted - Math.min(EXPIRY_SKEW_MS, granted / 10);
    if (tokens.size >= MAX_TOKENS) tokens.delete(tokens.keys().next().value as string);
    tokens.set(key, { value: answer.access_token, until: now() + Math.max(lifetime, 0) });
    return answer.access_token;
  };

  return {
    async token(decl, scope, caller) {
      const { key, subject } = grantOf(decl, scope, caller);
      const held = tokens.get(key);
      if (held && now() < held.until) return held.value;
      tokens.delete(key);
      // One request per key at a time: concurrent calls share it.
      let inFlight = pending.get(key);
      if (!inFlight) {
        inFlight = request(decl, key, subject).finally(() => pending.delete(key));
        pending.set(key, inFlight);
      }
      return inFlight;
    },
    invalidate(decl, scope, caller) {
      try {
        tokens.delete(grantOf(decl, scope, caller).key);
      } catch {
        // No token could have been cached for a caller who may have none.
      }
    },
  };
}
