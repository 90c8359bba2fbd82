import { readFile } from "node:fs/promises";
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify, type JWTPayload } from "jose";
import { assertTenantId, fetchAuthorizationServerMetadata, type Logger } from "@chaos-core/kit";
import { RESERVED_PRINCIPALS } from "./api-keys.js";
import { BearerRefusal } from "./bearer-refusal.js";
import type { Identity } from "./identity.js";
import { createIntrospector, type Introspector } from "./introspection.js";
import { AGENT_SCOPE, rolesOfScopes, SCOPES_SUPPORTED, scopesOfClaims } from "./scopes.js";

/** Signature algorithms a token may be signed with unless CHAOS_CORE_OAUTH_ALGORITHMS says otherwise. */
export const DEFAULT_OAUTH_ALGORITHMS = ["RS256", "ES256", "EdDSA"] as const;

/**
 * Every algorithm CHAOS_CORE_OAUTH_ALGORITHMS may list: asymmetric ones only. `none` is never a
 * signature, and an HMAC (HS*) key is a secret the authorization server would have to share with
 * every resource server, each of which could then mint tokens.
 */
export const ALLOWED_OAUTH_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
] as const;

/** The claim a token's tenant is read from unless CHAOS_CORE_OAUTH_TENANT_CLAIM names another. */
export const DEFAULT_TENANT_CLAIM = "tenant";

/** How far `exp` and `nbf` may be off this server's clock (clocks drift). */
export const DEFAULT_CLOCK_SKEW_SECONDS = 30;

/**
 * How long after fetching the JWKS a token with an unknown `kid` may not cause another fetch
 * (jose's `cooldownDuration`): a rotation is picked up at most this long after the last fetch,
 * and a stream of tokens with made-up key ids cannot make this server hammer the issuer.
 */
export const DEFAULT_JWKS_COOLDOWN_MS = 30_000;

/** How an OAuth 2.1 resource server on `/mcp` checks access tokens (docs/auth.md). */
export interface OAuthOptions {
  /** The authorization server's issuer identifier (`iss` of every token accepted). */
  readonly issuer: string;
  /** This server's canonical resource URI (RFC 8707): the audience every token must name. */
  readonly resource: string;
  /** Where the issuer's keys are; from its RFC 8414 (or OpenID) metadata when absent. */
  readonly jwksUrl?: string;
  /** Default {@link DEFAULT_OAUTH_ALGORITHMS}; only {@link ALLOWED_OAUTH_ALGORITHMS}. */
  readonly algorithms?: readonly string[];
  /** Default {@link DEFAULT_TENANT_CLAIM}. */
  readonly tenantClaim?: string;
  /**
   * Also accept `typ: JWT` (or no `typ`), for authorization servers that do not issue RFC 9068
   * `at+jwt` tokens. Off by default: `at+jwt` keeps an ID token from passing as an access token.
   */
  readonly acceptJwtTyp?: boolean;
  /** Default {@link DEFAULT_CLOCK_SKEW_SECONDS}. */
  readonly clockSkewSeconds?: number;
  /** Default {@link DEFAULT_JWKS_COOLDOWN_MS}. */
  readonly jwksCooldownMs?: number;
  /** RFC 7662 introspection of opaque (non-JWT) tokens; without it only JWTs are accepted. */
  readonly introspection?: IntrospectionOptions;
}

/** The introspection endpoint and this server's client credentials there (client_secret_basic). */
export interface IntrospectionOptions {
  readonly url: string;
  readonly clientId: string;
  /** The secret itself (tests, embedding), or… */
  readonly clientSecret?: string;
  /** …a file holding it (CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE), read at start. */
  readonly clientSecretFile?: string;
  /** How long an active answer is reused, never past the token's `exp` (default 30 s). */
  readonly cacheSeconds?: number;
}

/** A verified access token: who it speaks for, the scopes it carries, and until when. */
export interface VerifiedToken {
  readonly identity: Identity;
  readonly scopes: readonly string[];
  /** Its `exp`, in seconds since the epoch; absent only for an introspected token whose answer names none. */
  readonly expiresAt?: number;
}

/** What a use of a token needs of it besides being valid. */
export interface VerifyOptions {
  /**
   * The scope the token must carry, else it is refused `insufficient_scope`: by default
   * {@link AGENT_SCOPE}, what `/mcp` needs. `null` requires none: the approval console signs
   * people in with tokens that need not be an agent's, and checks the approver scope itself, so
   * it can say whom it refused and why.
   */
  readonly requiredScope?: string | null;
}

/** Checks access tokens for `/mcp`. */
export interface OAuthVerifier {
  /** The canonical resource URI tokens must be issued for. */
  readonly resource: string;
  /** Where this server's Protected Resource Metadata is published (the path-inserted form). */
  readonly metadataUrl: string;
  /** The Protected Resource Metadata document (RFC 9728). */
  readonly metadata: ProtectedResourceMetadata;
  /** The identity of a token, or a {@link BearerRefusal}. */
  verify(token: string, options?: VerifyOptions): Promise<VerifiedToken>;
  /** How far past its `exp` a token is still accepted (clocks drift). */
  readonly clockSkewSeconds: number;
}

/** The fields of RFC 9728 §2 this server publishes. */
export interface ProtectedResourceMetadata {
  readonly resource: string;
  readonly authorization_servers: readonly string[];
  readonly scopes_supported: readonly string[];
  readonly bearer_methods_supported: readonly ["header"];
  readonly resource_name: string;
}

/**
 * Where RFC 9728 §3.1 puts the metadata of `resource`: `/.well-known/oauth-protected-resource`
 * inserted between host and path (`https://h/mcp` → `https://h/.well-known/oauth-protected-resource/mcp`).
 */
export function protectedResourceMetadataUrl(resource: string): string {
  const url = new URL(resource);
  const path = url.pathname === "/" ? "" : url.pathname.replace(/\/$/, "");
  return `${url.origin}/.well-known/oauth-protected-resource${path}${url.search}`;
}

/** The metadata document of a resource server with these options. */
export function protectedResourceMetadata(options: Pick<OAuthOptions, "issuer" | "resource">): ProtectedResourceMetadata {
  return {
    resource: options.resource,
    authorization_servers: [options.issuer],
    scopes_supported: [...SCOPES_SUPPORTED],
    bearer_methods_supported: ["header"],
    resource_name: "Chaos Core",
  };
}

/** Three base64url segments: a JWS compact serialization. Anything else is an opaque token. */
export function isJwtShaped(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token);
}

/** How long a metadata or JWKS request may take before the token is answered 503. */
const FETCH_TIMEOUT_MS = 5_000;

/** The `jwks_uri` of the issuer's metadata, checked to be the issuer's own document. */
async function discoverJwksUrl(issuer: string): Promise<string> {
  const { url, res } = await fetchAuthorizationServerMetadata(issuer, { timeoutMs: FETCH_TIMEOUT_MS });
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`${url}: HTTP ${res.status}`);
  }
  const doc = (await res.json().catch(() => undefined)) as { issuer?: unknown; jwks_uri?: unknown } | undefined;
  // RFC 8414 §3.3: a document naming another issuer is not this issuer's.
  if (doc?.issuer !== issuer) throw new Error(`${url} names issuer ${JSON.stringify(doc?.issuer)}, not ${issuer}`);
  if (typeof doc.jwks_uri !== "string") throw new Error(`${url} has no jwks_uri`);
  return doc.jwks_uri;
}

/** jose's codes for a token that is not good, as opposed to keys that could not be fetched. */
const INVALID_TOKEN_CODES = new Set([
  "ERR_JWT_EXPIRED",
  "ERR_JWT_CLAIM_VALIDATION_FAILED",
  "ERR_JWS_SIGNATURE_VERIFICATION_FAILED",
  "ERR_JWKS_NO_MATCHING_KEY",
  "ERR_JWKS_MULTIPLE_MATCHING_KEYS",
  "ERR_JOSE_ALG_NOT_ALLOWED",
  "ERR_JOSE_NOT_SUPPORTED",
  "ERR_JWS_INVALID",
  "ERR_JWT_INVALID",
  "ERR_JWK_INVALID",
]);

/** What the client is told about a refused JWT: enough to fix its request, nothing about our keys. */
function describeJoseError(err: { code?: string; claim?: string; message: string }): string {
  switch (err.code) {
    case "ERR_JWT_EXPIRED":
      return "the access token has expired";
    case "ERR_JWT_CLAIM_VALIDATION_FAILED":
      return err.claim === "aud"
        ? "the access token was not issued for this resource (aud)"
        : err.claim === "iss"
          ? "the access token was not issued by this server's authorization server (iss)"
          : `the access token's ${err.claim ?? "claims"} claim is not acceptable`;
    case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
      return "the access token's signature does not verify";
    case "ERR_JWKS_NO_MATCHING_KEY":
      return "the access token is signed with a key the authorization server does not publish";
    case "ERR_JOSE_ALG_NOT_ALLOWED":
    case "ERR_JOSE_NOT_SUPPORTED":
      return "the access token's signature algorithm is not accepted";
    default:
      return "the access token is malformed";
  }
}

/**
 * The identity and scopes of a token's verified claims (a JWT's payload or an introspection
 * answer); `requiredScope` as in {@link VerifyOptions}.
 */
export function identityOfClaims(claims: Readonly<Record<string, unknown>>, tenantClaim: string, requiredScope: string | null = AGENT_SCOPE): VerifiedToken {
  const { sub } = claims;
  if (typeof sub !== "string" || sub.length === 0 || sub.length > 256) {
    throw new BearerRefusal("invalid_token", "the access token names no subject (sub)");
  }
  // Those names are the standalone operator's and the local user's: no token may answer as them.
  if (RESERVED_PRINCIPALS.includes(sub)) throw new BearerRefusal("invalid_token", `the access token's subject "${sub}" is reserved`);
  const tenant = claims[tenantClaim];
  if (typeof tenant !== "string") throw new BearerRefusal("invalid_token", `the access token names no tenant (claim ${tenantClaim})`);
  try {
    assertTenantId(tenant);
  } catch {
    throw new BearerRefusal("invalid_token", `the access token's ${tenantClaim} claim is not a tenant id`);
  }
  const scopes = scopesOfClaims(claims);
  if (requiredScope !== null && !scopes.includes(requiredScope)) {
    throw new BearerRefusal("insufficient_scope", `the access token lacks the ${requiredScope} scope`, requiredScope);
  }
  const { exp } = claims;
  return {
    identity: Object.freeze({ tenant, principal: sub, roles: Object.freeze(rolesOfScopes(scopes)) }),
    scopes: Object.freeze(scopes),
    ...(typeof exp === "number" && Number.isFinite(exp) ? { expiresAt: exp } : {}),
  };
}

/**
 * A verifier of access tokens issued by `options.issuer` for `options.resource`: JWTs against the
 * issuer's JWKS (fetched on first use, cached, refetched on an unknown `kid` so a rotation is
 * picked up), opaque tokens through introspection when configured. The JWKS location is
 * discovered on the first token, so the edge starts while the issuer is down; until it answers,
 * tokens are refused `unavailable`.
 */
export async function createOAuthVerifier(options: OAuthOptions, logger: Logger): Promise<OAuthVerifier> {
  const tenantClaim = options.tenantClaim ?? DEFAULT_TENANT_CLAIM;
  const algorithms = [...(options.algorithms ?? DEFAULT_OAUTH_ALGORITHMS)];
  for (const alg of algorithms) {
    if (!(ALLOWED_OAUTH_ALGORITHMS as readonly string[]).includes(alg)) throw new Error(`OAuth algorithm ${alg} is not allowed`);
  }
  const clockTolerance = options.clockSkewSeconds ?? DEFAULT_CLOCK_SKEW_SECONDS;

  let introspector: Introspector | undefined;
  if (options.introspection) {
    const { clientSecret, clientSecretFile } = options.introspection;
    const secret = clientSecret ?? (clientSecretFile ? (await readSecretFile("CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE", clientSecretFile)) : undefined);
    if (!secret) throw new Error("CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE: the introspection client secret is required");
    introspector = createIntrospector({ ...options.introspection, clientSecret: secret, issuer: options.issuer, resource: options.resource, clockSkewSeconds: clockTolerance });
  }

  type Jwks = ReturnType<typeof createRemoteJWKSet>;
  let jwks: Promise<Jwks> | undefined;
  const keys = (): Promise<Jwks> => {
    jwks ??= (options.jwksUrl ? Promise.resolve(options.jwksUrl) : discoverJwksUrl(options.issuer)).then(
      (url) => {
        logger.info({ issuer: options.issuer, jwks: url }, "OAuth: using the issuer's JWKS");
        return createRemoteJWKSet(new URL(url), {
          cooldownDuration: options.jwksCooldownMs ?? DEFAULT_JWKS_COOLDOWN_MS,
          timeoutDuration: FETCH_TIMEOUT_MS,
        });
      },
      (err: unknown) => {
        // Not cached: the next token tries discovery again.
        jwks = undefined;
        throw err;
      },
    );
    return jwks;
  };

  // While the issuer is down every token would log the same line: once per problem, until keys are fetched again.
  let lastWarning: string | undefined;
  const warnOnce = (err: unknown, what: string) => {
    const line = `${what}: ${(err as Error).message}`;
    if (line === lastWarning) return;
    lastWarning = line;
    logger.warn({ err, issuer: options.issuer }, what);
  };

  const checkTyp = (token: string) => {
    let typ: string | undefined;
    try {
      typ = decodeProtectedHeader(token).typ?.toLowerCase().replace(/^application\//, "");
    } catch {
      throw new BearerRefusal("invalid_token", "the access token is malformed");
    }
    if (typ === "at+jwt") return;
    if (options.acceptJwtTyp && (typ === undefined || typ === "jwt")) return;
    throw new BearerRefusal("invalid_token", 'the access token is not an RFC 9068 access token (typ must be "at+jwt")');
  };

  async function verifyJwt(token: string, requiredScope: string | null): Promise<VerifiedToken> {
    checkTyp(token);
    let keySet: Jwks;
    try {
      keySet = await keys();
    } catch (err) {
      warnOnce(err, "OAuth: the issuer's metadata cannot be read; tokens are answered 503 until it can");
      throw new BearerRefusal("unavailable", "the authorization server's keys cannot be fetched now; retry shortly");
    }
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keySet, {
        issuer: options.issuer,
        audience: options.resource,
        algorithms,
        clockTolerance,
        requiredClaims: ["exp", "sub"],
      }));
    } catch (err) {
      const e = err as { code?: string; claim?: string; message: string };
      if (e.code && INVALID_TOKEN_CODES.has(e.code)) throw new BearerRefusal("invalid_token", describeJoseError(e));
      warnOnce(err, "OAuth: the issuer's JWKS cannot be fetched; tokens are answered 503 until it can");
      throw new BearerRefusal("unavailable", "the authorization server's keys cannot be fetched now; retry shortly");
    }
    lastWarning = undefined;
    return identityOfClaims(payload, tenantClaim, requiredScope);
  }

  return {
    resource: options.resource,
    metadataUrl: protectedResourceMetadataUrl(options.resource),
    metadata: protectedResourceMetadata(options),
    clockSkewSeconds: clockTolerance,
    async verify(token, verifyOptions = {}) {
      const requiredScope = verifyOptions.requiredScope === undefined ? AGENT_SCOPE : verifyOptions.requiredScope;
      if (isJwtShaped(token)) return verifyJwt(token, requiredScope);
      if (!introspector) throw new BearerRefusal("invalid_token", "the access token is not valid");
      return identityOfClaims(await introspector.introspect(token), tenantClaim, requiredScope);
    },
  };
}

/**
 * A client secret from the file `variable` names (read at start, never logged; surrounding
 * whitespace dropped); fails naming the variable when the file cannot be read or is empty.
 */
export async function readSecretFile(variable: string, path: string): Promise<string> {
  try {
    const secret = (await readFile(path, "utf8")).trim();
    if (!secret) throw new Error("the file is empty");
    return secret;
  } catch (err) {
    throw new Error(`${variable} ${path}: cannot be read (${(err as Error).message})`, { cause: err });
  }
}
