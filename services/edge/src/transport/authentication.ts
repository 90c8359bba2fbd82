import type { Request, RequestHandler, Response } from "express";
import type { AuthInfo } from "@modelcontextprotocol/server";
import { ChaosError, ISSUED_KEY_PREFIX } from "@chaos-core/kit";
import { hashApiKey, type ApiKeyVerifier, type WatchedApiKeys } from "../auth/api-keys.js";
import { BearerRefusal } from "../auth/bearer-refusal.js";
import type { CredentialDirectory, CredentialRefusal } from "../auth/directory.js";
import { authInfoOf, LOCAL_IDENTITY, type Identity } from "../auth/identity.js";
import type { OAuthVerifier, VerifiedToken } from "../auth/oauth.js";
import { AGENT_SCOPE } from "../auth/scopes.js";
import { REGISTRY_KEY_MARK } from "../sessions/session-store.js";
import { jsonRpcError, type McpLocals } from "./http-errors.js";

/** `realm` and, with OAuth, where the metadata is: the parameters every challenge of `/mcp` carries. */
function challenge(oauth: OAuthVerifier | undefined, params: Record<string, string> = {}): Record<string, string> {
  // RFC 6750 §3: quoted strings; a description never holds a quote or backslash of its own.
  const quoted = (v: string) => `"${v.replace(/["\\]/g, "'")}"`;
  const all: Record<string, string> = { realm: "chaos-core", ...(oauth ? { resource_metadata: oauth.metadataUrl } : {}), ...params };
  return { "WWW-Authenticate": `Bearer ${Object.entries(all).map(([k, v]) => `${k}=${quoted(v)}`).join(", ")}` };
}

/** RFC 6750 §2.3 is not offered (the MCP authorization spec forbids it): a token in the URL is refused, never used. */
function hasQueryToken(req: Request): boolean {
  const query = req.originalUrl.indexOf("?");
  return query >= 0 && new URLSearchParams(req.originalUrl.slice(query + 1)).has("access_token");
}

/**
 * A question to the tenant directory; a failure is `unavailable` naming it (503 with Retry-After:
 * the request is refused, fail closed), whatever the policy service answered — an older policy
 * service without the directory included.
 */
export async function askDirectory<T>(ask: () => Promise<T>): Promise<T> {
  try {
    return await ask();
  } catch (err) {
    const e = ChaosError.from(err);
    if (e.code === "unavailable") throw e;
    throw new ChaosError("unavailable", `the tenant directory (policy service) could not check this request's credential and tenant (${e.code}: ${e.message})`, { cause: err });
  }
}

/** How a request that named a credential the directory refused is answered. */
function refuse(res: Response, oauth: OAuthVerifier | undefined, refusal: CredentialRefusal): void {
  if (refusal.kind === "key_revoked" || refusal.kind === "key_expired") {
    return jsonRpcError(res, 401, -32001, `Unauthorized: ${refusal.message}`, challenge(oauth, { error: "invalid_token", error_description: refusal.message }));
  }
  // The credential is good; its tenant is not served (RFC 6750 has no word for it: 403 without a challenge).
  jsonRpcError(res, 403, -32001, `Forbidden: ${refusal.message}`);
}

/**
 * Authenticates a `/mcp` request by its bearer credential: an API key of the file in force, an
 * operator-issued key of the tenant registry (`cc_…`, through `directory`), else (with OAuth) an
 * access token for this resource. The identity comes from the credential alone; an API key goes
 * no further than this function: what the request carries on is the identity and its roles
 * ({@link authInfoOf}); a verified OAuth access token is kept beside them for cognition's token
 * exchange with upstreams, and for nothing else. Whatever the credential, a tenant the registry
 * holds disabled or deleted is refused (403).
 *
 * `required`: whether a request without a credential is refused; when it is not (a loopback
 * bind without keys or OAuth), it runs as the local user, and an operator-issued key it does
 * present still counts (or is refused).
 */
export function authentication(
  verifier: ApiKeyVerifier | WatchedApiKeys | undefined,
  oauth: OAuthVerifier | undefined,
  directory: CredentialDirectory | undefined,
  required: boolean,
  isLocalAgent?: (presented: string, remoteAddress: string | undefined) => boolean,
  agentOnly = false,
): RequestHandler {
  const what = oauth ? (verifier || directory ? "an API key or an OAuth access token" : "an OAuth access token") : "<API key>";
  const scope: Record<string, string> = oauth ? { scope: AGENT_SCOPE } : {};
  return async (req, res, next) => {
    const locals = res.locals as McpLocals;
    /** Lets the request on as `identity`, unless the registry holds its tenant disabled. */
    const admit = async (identity: Identity, extra: Pick<McpLocals, "keySha256" | "oauth" | "tokenExpiresAt"> = {}, subjectToken?: string) => {
      const refusal = directory ? await askDirectory(() => directory.tenantRefusal(identity.tenant)) : undefined;
      if (refusal) return refuse(res, oauth, refusal);
      locals.identity = identity;
      Object.assign(locals, extra);
      // The generation the directory just read or confirmed, for the call context (cognition need not read it again).
      const generation = directory?.tenantGeneration(identity.tenant);
      if (generation !== undefined) locals.tenantGeneration = generation;
      // Roles reach the tools through the SDK's per-request authInfo, never from the session.
      if (identity !== LOCAL_IDENTITY) (req as Request & { auth?: AuthInfo }).auth = authInfoOf(identity, generation, subjectToken);
      next();
    };
    const match = /^Bearer +([^\s]+) *$/i.exec(req.headers.authorization ?? "");
    const key = match?.[1];
    // Anything shaped like an operator-issued key is looked up (or refused as one), never taken
    // for the local user: a mistyped key must not quietly act as tenant "default".
    const issued = key !== undefined && directory !== undefined && key.startsWith(ISSUED_KEY_PREFIX);
    // A relay of `chaos-core stdio` on this machine: the local user, as stdio serves it. A
    // listener for relays alone takes nothing else.
    if (key !== undefined && isLocalAgent?.(key, req.socket.remoteAddress)) return admit(LOCAL_IDENTITY);
    if (agentOnly) {
      return jsonRpcError(res, 401, -32001, "Unauthorized: this listener serves chaos-core stdio relays only, with the local agent's credential");
    }
    if (!required && !issued) return admit(LOCAL_IDENTITY);
    if (hasQueryToken(req)) {
      return jsonRpcError(res, 400, -32001, "Bad Request: send the access token in the Authorization header, never in the URL", challenge(oauth, { error: "invalid_request" }));
    }
    if (key === undefined) return jsonRpcError(res, 401, -32001, `Unauthorized: send Authorization: Bearer ${what}`, challenge(oauth, scope));
    if (verifier) {
      // An edit of the keys file on disk for API_KEYS_RECHECK_MS or longer counts for this request.
      if ("refresh" in verifier) await verifier.refresh();
      const identity = verifier.verify(key);
      if (identity) return admit(identity, { keySha256: hashApiKey(key) });
    }
    if (issued) {
      const answer = await askDirectory(() => directory.resolveKey(key));
      if (answer.kind === "identity") return admit(answer.identity, { keySha256: `${REGISTRY_KEY_MARK}${hashApiKey(key)}` });
      if (answer.kind === "refused") return refuse(res, oauth, answer.refusal);
    }
    if (!oauth) {
      if (verifier && "unreadable" in verifier && verifier.unreadable() && !issued) {
        // The operator's log names the file and the problem; the client learns neither.
        const message = "Unauthorized: the server's API key list cannot be read; no key is accepted until an operator fixes it";
        return jsonRpcError(res, 401, -32001, message, challenge(oauth));
      }
      return jsonRpcError(res, 401, -32001, "Unauthorized: the API key is not valid", challenge(oauth, { error: "invalid_token" }));
    }
    let verified: VerifiedToken;
    try {
      verified = await oauth.verify(key);
    } catch (err) {
      if (!(err instanceof BearerRefusal)) throw err;
      if (err.error === "unavailable") return jsonRpcError(res, 503, -32000, `Service Unavailable: ${err.message}`, { "Retry-After": "5" });
      if (err.error === "insufficient_scope") {
        const needed = { error: "insufficient_scope", scope: err.scope ?? AGENT_SCOPE, error_description: err.message };
        return jsonRpcError(res, 403, -32001, `Forbidden: ${err.message}`, challenge(oauth, needed));
      }
      const message = verifier || directory ? `Unauthorized: not a valid API key, and ${err.message}` : `Unauthorized: ${err.message}`;
      return jsonRpcError(res, 401, -32001, message, challenge(oauth, { error: "invalid_token", error_description: err.message, ...scope }));
    }
    // Accepted until `exp` and the clock skew: what it holds open ends then too (credential-watch.ts).
    // The verified token is kept beside the identity for cognition's token exchange alone (authInfoOf).
    return admit(verified.identity, { oauth: true, ...(verified.expiresAt !== undefined ? { tokenExpiresAt: verified.expiresAt + oauth.clockSkewSeconds } : {}) }, key);
  };
}

/**
 * Serves the Protected Resource Metadata (RFC 9728) at the root well-known path and at the
 * path-inserted form of the resource (`/.well-known/oauth-protected-resource/mcp`): public, so
 * any origin may read it.
 */
export function protectedResourceMetadataRoute(oauth: OAuthVerifier): RequestHandler {
  return (_req, res) => {
    res.set({ "Access-Control-Allow-Origin": "*", "Cache-Control": "public, max-age=300" }).json(oauth.metadata);
  };
}
