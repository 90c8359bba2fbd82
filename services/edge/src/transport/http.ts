import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response } from "express";
import { classifyInboundRequest, isInitializeRequest, SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/server";
import type { AuthInfo, InitializeRequest } from "@modelcontextprotocol/server";
import { hostHeaderValidation, localhostHostValidation } from "@modelcontextprotocol/express";
import { ChaosError, ISSUED_KEY_PREFIX } from "@chaos-core/kit";
import {
  createApiKeyVerifier,
  hashApiKey,
  watchApiKeysFile,
  type ApiKeyEntry,
  type ApiKeyVerifier,
  type WatchedApiKeys,
} from "../auth/api-keys.js";
import { BearerRefusal } from "../auth/bearer-refusal.js";
import type { CredentialDirectory, CredentialRefusal } from "../auth/directory.js";
import { authInfoOf, LOCAL_IDENTITY, type Identity } from "../auth/identity.js";
import { createOAuthVerifier, protectedResourceMetadataUrl, type OAuthOptions, type OAuthVerifier, type VerifiedToken } from "../auth/oauth.js";
import { localAgentMatcher, type LocalAgentCredential } from "../auth/local-agent.js";
import { AGENT_SCOPE } from "../auth/scopes.js";
import { DEFAULT_MAX_SESSIONS_PER_KEY, isLoopbackHost, MAX_BODY_BYTES } from "../config.js";
import { consoleSigningKey } from "../console/csrf.js";
import { CONSOLE_PATH, type ConsoleLinks } from "../deps/console-links.js";
import { createConsoleOAuthSignIn } from "../console/oauth-sign-in.js";
import { createConsoleRouter } from "../console/router.js";
import type { ConsoleServeOptions } from "../console/options.js";
import { createMemoryConsoleSessionStore } from "../console/sessions.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { createMemoryEdgeEvents, publishingCouncil, startPolicyWatches } from "../events/feeds.js";
import { checkReadiness } from "../server/readiness.js";
import { CredentialWatch } from "./credential-watch.js";
import { homePage } from "./home-page.js";
import { ModernHandlers } from "./http-modern.js";
import { HttpSessionTable } from "./http-sessions.js";
import { REGISTRY_KEY_MARK, registryKeyDigest } from "../sessions/session-store.js";
import { envelopeRefusal, payloadTooLargeMessage, refusalResponse, screenMessage, type Refusal, type RequestId } from "./incoming.js";

/** How the Streamable HTTP transport listens and whom it lets in. */
export interface HttpTransportOptions {
  /** Interface to bind; 127.0.0.1 by default. Anything but loopback requires API keys. */
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port?: number;
  /** Host header names accepted (without port); loopback names by default on a loopback bind. */
  readonly allowedHosts?: readonly string[];
  /** Browser origins accepted besides loopback ones, e.g. `https://app.example.com`. */
  readonly allowedOrigins?: readonly string[];
  /** Largest request body accepted (413 above it); at most and by default 4 MiB. */
  readonly maxBodyBytes?: number;
  /**
   * A JSON list of `{tenant, principal, sha256, roles?}`; when set, every /mcp request needs a
   * bearer key. Edits are taken in while serving: a removed key is refused on its next request.
   */
  readonly apiKeysFile?: string;
  /** The same list, given directly (tests, embedding). */
  readonly apiKeys?: readonly ApiKeyEntry[];
  /**
   * The tenant registry as the edge sees it (docs/tenants.md): operator-issued keys (`cc_…`) are
   * accepted beside the file's, and a tenant it holds disabled or deleted is refused, whatever
   * the credential. On a non-loopback bind it makes credentials required even without a keys
   * file or OAuth (the registry's keys are then the only ones).
   */
  readonly directory?: CredentialDirectory;
  /**
   * OAuth 2.1 resource server (docs/auth.md): `/mcp` also accepts access tokens of this issuer for
   * this resource, and Protected Resource Metadata is served. API keys keep working beside it.
   */
  readonly oauth?: OAuthOptions;
  /**
   * Most live sessions one API key's tenant and principal may hold (on every replica sharing the
   * session store); beyond it `initialize` answers 429. Default {@link DEFAULT_MAX_SESSIONS_PER_KEY}.
   */
  readonly maxSessionsPerKey?: number;
  /** How often idle local sessions are swept (default: half the session TTL, at most a minute). */
  readonly sweepIntervalMs?: number;
  /**
   * Serves the approval console at `/approvals` (docs/approvals.md §2) behind the same Host and
   * Origin checks as `/mcp`, signing in with the same API keys, and through the OAuth issuer when
   * `oauth` is set and the console has a client there (`oauthClient`); absent: no console.
   */
  readonly console?: ConsoleServeOptions;
  /**
   * The local agent's credential (auth/local-agent.ts): a bearer that authenticates, from a
   * loopback peer, as the local user with no roles — how a `chaos-core stdio` relay reaches this
   * server on its host's behalf.
   */
  readonly localAgent?: LocalAgentCredential;
}

/** A running HTTP transport. */
export interface RunningHttpTransport {
  /** The MCP endpoint, e.g. `http://127.0.0.1:3000/mcp`. */
  readonly url: string;
  readonly port: number;
  /**
   * The approval console's URL as the operator at this machine opens it
   * (`CHAOS_CORE_PUBLIC_URL/approvals`, else this listener's); undefined when it is not served.
   */
  readonly consoleUrl?: string;
  /** How many sessions this replica holds in memory (metrics, tests). */
  localSessionCount(): number;
  /** How many tenants have a 2026-07-28 handler on this replica (tests). */
  modernTenantCount(): number;
  /**
   * Drains, then stops: `/readyz` answers 503 and new `/mcp` requests are refused (503, the edge
   * is shutting down), requests already in flight get up to `graceMs` (default 10 s) to finish;
   * then this replica's sessions close (their records stay for other replicas).
   */
  close(graceMs?: number): Promise<void>;
}

type Locals = { identity: Identity; keySha256?: string; oauth?: boolean; tokenExpiresAt?: number; requestId?: RequestId; bodyHead?: () => Buffer };

/** Every error this layer writes carries the request's id once the body could be read (null before). */
function jsonRpcError(res: Response, status: number, code: number, message: string, headers: Record<string, string> = {}) {
  const id = (res.locals as Locals).requestId ?? null;
  res.status(status).set(headers).json({ jsonrpc: "2.0", error: { code, message }, id });
}

/** Thrown from the body parser's verify hook: body-parser hands it, unchanged, to the error handler. */
class BodyRefused extends Error {
  readonly type = "chaoscore.body.refused";
  readonly status = 400;

  constructor(readonly refusal: Refusal) {
    super(refusal.error.message);
  }
}

/** Screens the raw bytes before body-parser decodes them (a bad byte would become U+FFFD) and keeps the id. */
function screenBody(_req: unknown, res: Response, body: Buffer): void {
  const screened = screenMessage(body);
  if (screened.id !== undefined) (res.locals as Locals).requestId = screened.id;
  if (screened.refusal) throw new BodyRefused(screened.refusal);
}

/**
 * How much of a body is kept to find the id of a request too large to parse: clients write
 * `{"jsonrpc":"2.0","id":…` first, so the id sits in the first bytes of even a huge body.
 */
const BODY_HEAD_BYTES = 64 * 1024;
/** How long a body declared too large may take to send that head before it is refused anyway. */
const BODY_HEAD_WAIT_MS = 1000;

/**
 * Keeps the first {@link BODY_HEAD_BYTES} of a POST body beside body-parser, so its 413 can echo
 * the request's id. A body whose Content-Length is over the limit is refused by body-parser before
 * it reads a byte: its head is read here first.
 */
function keepBodyHead(maxBodyBytes: number): RequestHandler {
  return (req, res, next) => {
    const head: Buffer[] = [];
    let kept = 0;
    const keep = (chunk: Buffer) => {
      head.push(chunk);
      kept += chunk.length;
      if (kept >= BODY_HEAD_BYTES) req.off("data", keep);
    };
    (res.locals as Locals).bodyHead = () => Buffer.concat(head).subarray(0, BODY_HEAD_BYTES);
    // body-parser's own listener joins in this same tick, before the first chunk is emitted.
    req.on("data", keep);
    if (!(Number(req.headers["content-length"]) > maxBodyBytes)) return next();
    const done = () => {
      clearTimeout(timer);
      req.off("data", check).off("end", done).off("error", done);
      req.off("data", keep);
      req.pause();
      next();
    };
    const check = () => {
      if (kept >= BODY_HEAD_BYTES) done();
    };
    const timer = setTimeout(done, BODY_HEAD_WAIT_MS);
    req.on("data", check).on("end", done).on("error", done);
  };
}

/** The id in the head of a body too large to parse, when it is there. */
function idInBodyHead(res: Response): RequestId | undefined {
  const head = (res.locals as Locals).bodyHead?.();
  if (!head || head.length === 0) return undefined;
  return screenMessage(head).id;
}

/** A parsed body that is no JSON-RPC message is refused here, where its id is known, not by the SDK with id null. */
const jsonRpcEnvelope: RequestHandler = (req, res, next) => {
  const refusal = req.body === undefined ? undefined : envelopeRefusal(req.body, (res.locals as Locals).requestId);
  if (refusal) return void res.status(400).json(refusalResponse(refusal));
  next();
};

/**
 * The SDK's own header checks of a POST (406; an unsupported MCP-Protocol-Version after
 * initialize), made here with its words so the answer carries the request's id.
 */
function headerProblem(req: Request, afterInitialize: boolean): { status: number; message: string } | undefined {
  const accept = req.headers.accept ?? "";
  if (!accept.includes("application/json") || !accept.includes("text/event-stream")) {
    return { status: 406, message: "Not Acceptable: Client must accept both application/json and text/event-stream" };
  }
  const version = req.headers["mcp-protocol-version"];
  if (afterInitialize && typeof version === "string" && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
    const supported = SUPPORTED_PROTOCOL_VERSIONS.join(", ");
    return { status: 400, message: `Bad Request: Unsupported protocol version: ${version} (supported versions: ${supported})` };
  }
  return undefined;
}

/** Loopback origins are the local user's own pages; every other browser origin must be listed. */
function isLoopbackOrigin(origin: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === "http:" || url.protocol === "https:") && isLoopbackHost(url.hostname);
  } catch {
    return false;
  }
}

/** The Origin check of `/mcp`: loopback origins and the listed ones pass, as does a request without one. */
export function originValidation(allowed: readonly string[]): RequestHandler {
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (origin === undefined || isLoopbackOrigin(origin) || allowed.includes(origin)) return next();
    jsonRpcError(res, 403, -32000, `Forbidden: Origin ${origin} is not allowed`);
  };
}

/** The Host check of `/mcp` for a listener bound to `host`; undefined where API keys alone guard it. */
export function hostValidation(host: string, allowedHosts: readonly string[] | undefined): RequestHandler | undefined {
  if (allowedHosts && allowedHosts.length > 0) return hostHeaderValidation([...allowedHosts]);
  if (isLoopbackHost(host)) return localhostHostValidation();
  // A non-loopback bind without a Host list: bearer keys (required there) stop DNS rebinding.
  return undefined;
}

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
async function askDirectory<T>(ask: () => Promise<T>): Promise<T> {
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
 * access token for this resource. The identity comes from the credential alone; the token goes no
 * further than this function: what the request carries on is the identity and its roles
 * ({@link authInfoOf}, whose `token` is empty). Whatever the credential, a tenant the registry
 * holds disabled or deleted is refused (403).
 *
 * `required`: whether a request without a credential is refused; when it is not (a loopback
 * bind without keys or OAuth), it runs as the local user, and an operator-issued key it does
 * present still counts (or is refused).
 */
function authentication(
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
    const locals = res.locals as Locals;
    /** Lets the request on as `identity`, unless the registry holds its tenant disabled. */
    const admit = async (identity: Identity, extra: Pick<Locals, "keySha256" | "oauth" | "tokenExpiresAt"> = {}) => {
      const refusal = directory ? await askDirectory(() => directory.tenantRefusal(identity.tenant)) : undefined;
      if (refusal) return refuse(res, oauth, refusal);
      locals.identity = identity;
      Object.assign(locals, extra);
      // Roles reach the tools through the SDK's per-request authInfo, never from the session.
      if (identity !== LOCAL_IDENTITY) (req as Request & { auth?: AuthInfo }).auth = authInfoOf(identity);
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
    return admit(verified.identity, { oauth: true, ...(verified.expiresAt !== undefined ? { tokenExpiresAt: verified.expiresAt + oauth.clockSkewSeconds } : {}) });
  };
}

/**
 * Serves the Protected Resource Metadata (RFC 9728) at the root well-known path and at the
 * path-inserted form of the resource (`/.well-known/oauth-protected-resource/mcp`): public, so
 * any origin may read it.
 */
function protectedResourceMetadataRoute(oauth: OAuthVerifier): RequestHandler {
  return (_req, res) => {
    res.set({ "Access-Control-Allow-Origin": "*", "Cache-Control": "public, max-age=300" }).json(oauth.metadata);
  };
}

function initializeParams(body: unknown): InitializeRequest["params"] | undefined {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  const init = messages.find((m) => isInitializeRequest(m));
  return init ? (init as InitializeRequest).params : undefined;
}

/** A header for the SDK's classifier: the first value, left out when absent. */
function optionalHeader<K extends string>(key: K, value: string | string[] | undefined): Partial<Record<K, string>> {
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined ? {} : ({ [key]: first } as Partial<Record<K, string>>);
}

/** Mcp-Session-Id is visible ASCII (spec); anything else cannot name a session. */
const SESSION_ID_RE = /^[\x21-\x7e]{1,128}$/;

/**
 * Serves MCP over Streamable HTTP at `/mcp` with stateful sessions any replica can serve (the
 * session store is shared), plus `/healthz`, `/readyz` and a page at `/` saying how to connect.
 * The only HTTP-aware module.
 */
export async function startHttpTransport(deps: EdgeDeps, options: HttpTransportOptions = {}): Promise<RunningHttpTransport> {
  const host = options.host ?? "127.0.0.1";
  const maxBodyBytes = options.maxBodyBytes ?? MAX_BODY_BYTES;
  if (!Number.isInteger(maxBodyBytes) || maxBodyBytes < 1 || maxBodyBytes > MAX_BODY_BYTES) {
    throw new Error(`maxBodyBytes must be an integer from 1 to ${MAX_BODY_BYTES}, got ${maxBodyBytes}`);
  }
  const maxSessionsPerKey = options.maxSessionsPerKey ?? DEFAULT_MAX_SESSIONS_PER_KEY;
  if (!Number.isInteger(maxSessionsPerKey) || maxSessionsPerKey < 1) {
    throw new Error(`maxSessionsPerKey must be a positive integer, got ${maxSessionsPerKey}`);
  }
  let verifier: ApiKeyVerifier | WatchedApiKeys | undefined;
  let watchedKeys: WatchedApiKeys | undefined;
  if (options.apiKeysFile) verifier = watchedKeys = await watchApiKeysFile(options.apiKeysFile, { logger: deps.logger });
  else if (options.apiKeys) verifier = createApiKeyVerifier(options.apiKeys);
  const oauth = options.oauth ? await createOAuthVerifier(options.oauth, deps.logger) : undefined;
  const directory = options.directory;
  if (!verifier && !oauth && !directory && !isLoopbackHost(host)) {
    // Fail closed: without keys anyone who can reach the port would be tenant "default".
    throw new Error(
      `refusing to serve MCP on ${host} without API keys or OAuth: set CHAOS_CORE_API_KEYS_FILE or CHAOS_CORE_OAUTH_ISSUER, or bind HOST=127.0.0.1 for local use`,
    );
  }

  // The console's Host names: /mcp's list, or the loopback names a loopback bind checks, plus
  // CHAOS_CORE_PUBLIC_URL's host. A non-loopback bind without a list checks no Host for /mcp
  // (bearer keys guard it); a page with cookies needs a check, so the console is then served
  // only under the public URL's host, or not at all.
  const publicHost = options.console?.publicUrl ? new URL(options.console.publicUrl).hostname : undefined;
  const baseHosts = options.allowedHosts?.length ? options.allowedHosts : isLoopbackHost(host) ? ["localhost", "127.0.0.1", "[::1]"] : [];
  const consoleHosts = [...new Set([...baseHosts, ...(publicHost ? [publicHost] : [])])];
  const serveConsole = options.console !== undefined && consoleHosts.length > 0;
  if (options.console && !serveConsole) {
    deps.logger.warn(
      { host },
      "the approval console is not served: on a non-loopback bind it needs MCP_ALLOWED_HOSTS or CHAOS_CORE_PUBLIC_URL (set CHAOS_CORE_CONSOLE=off to silence this)",
    );
  }
  // The console's keys and its OAuth sign-in (the client secret is read now, so a missing file
  // stops the start); the tokens people sign in with are checked by the same verifier as /mcp.
  const consoleKey = options.console?.signingKey ?? consoleSigningKey();
  const oauthClient = options.console?.oauthClient;
  if (oauthClient && !options.oauth) throw new Error("the console's OAuth client (CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID) needs the edge's OAuth issuer (CHAOS_CORE_OAUTH_ISSUER)");
  const consoleOAuth =
    serveConsole && oauthClient && options.oauth && oauth
      ? await createConsoleOAuthSignIn({ issuer: options.oauth.issuer, resource: options.oauth.resource, client: oauthClient, verifier: oauth, signingKey: consoleKey, logger: deps.logger })
      : undefined;
  // The answers agents get link to the console only where it is served; from an MCP request's
  // own Host only when /mcp checked that Host.
  const consoleLinks: ConsoleLinks | undefined = serveConsole
    ? { ...(options.console?.publicUrl ? { publicUrl: options.console.publicUrl } : {}), fromRequestHost: hostValidation(host, options.allowedHosts) !== undefined }
    : undefined;
  // Change events (docs/protocol.md §9): the deps' (Redis, every replica) or this process's. The
  // policy is watched for the tenants with a listener here; council changes made through this
  // edge's tools are published as they succeed.
  const ownEvents = deps.events === undefined;
  const events = deps.events ?? createMemoryEdgeEvents(deps.logger);
  const policyWatches = startPolicyWatches(deps.policy, events.buses, deps.logger);
  const sessionDeps: EdgeDeps = {
    ...deps,
    events,
    deliversChangeEvents: true,
    council: publishingCouncil(deps.council, events.buses, deps.logger),
    ...(directory ? { enabledToolsets: (tenant: string) => directory.enabledToolsets(tenant) } : {}),
    ...(consoleLinks ? { console: consoleLinks } : {}),
  };

  const sessions = new HttpSessionTable(sessionDeps, {
    maxBodyBytes,
    maxSessionsPerKey,
    events,
    ...(options.sweepIntervalMs ? { sweepIntervalMs: options.sweepIntervalMs } : {}),
    ...(watchedKeys ? { keys: watchedKeys } : {}),
    ...(directory ? { registryKeyRefusal: async (tenant: string, sha256: string) => (await askDirectory(() => directory.recheck(tenant, [sha256]))).keys.get(sha256) } : {}),
  });
  // A revoked registry key or a disabled tenant is refused on its next request; what it holds
  // open (SSE streams, long POSTs, the sessions a key opened) ends within CREDENTIAL_RECHECK_MS.
  const credentialWatch = directory ? new CredentialWatch(directory, sessions, deps.logger, watchedKeys) : undefined;
  const modern = new ModernHandlers(sessionDeps, { maxBodyBytes, bus: (tenant) => events.buses.bus(tenant) });
  // A key removed from the file also ends the sessions it opened here (an SSE stream would
  // otherwise outlive it); other replicas do the same when they see the edit.
  watchedKeys?.onChange(() => {
    sessions
      .closeRevoked()
      .catch((err: unknown) => deps.logger.warn({ err }, "closing the sessions of revoked API keys failed"));
    // And what such a key holds open outside the sessions it opened (a listen stream, another's session).
    void credentialWatch?.check();
  });
  // Not createMcpExpressApp: it mounts express.json() with body-parser's fixed 100 kB limit ahead
  // of anything added later, so bodies up to the configured limit could never arrive, and its 413
  // is an HTML page. The Host check below is the same SDK middleware it applies.
  const app = express();
  app.disable("x-powered-by");

  // Draining (SIGTERM): readiness fails and new MCP requests are refused, while the POST and
  // DELETE requests already accepted (an SSE GET stream has no end to wait for) run to the end.
  const drain = { draining: false, inFlight: 0, idle: [] as (() => void)[] };
  app.use((req, res, next) => {
    if (drain.draining && req.path !== "/healthz") {
      if (req.path === "/readyz") return res.status(503).json({ status: "draining", checks: {} });
      return jsonRpcError(res, 503, -32000, "the edge is shutting down: retry on another replica", { Connection: "close", "Retry-After": "1" });
    }
    if (req.method === "GET") return next();
    drain.inFlight++;
    res.once("close", () => {
      if (--drain.inFlight === 0) for (const done of drain.idle.splice(0)) done();
    });
    next();
  });

  // Probes come from the cluster (kubelet) with pod-IP Host headers: they sit before the checks.
  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  app.get("/readyz", async (_req, res) => {
    const readiness = await checkReadiness(deps);
    res.status(readiness.ready ? 200 : 503).json({ status: readiness.status, checks: readiness.checks });
  });

  const hostCheck = hostValidation(host, options.allowedHosts);
  if (hostCheck) app.use("/mcp", hostCheck);
  if (oauth) {
    const metadata = protectedResourceMetadataRoute(oauth);
    const inserted = new URL(protectedResourceMetadataUrl(oauth.resource)).pathname;
    for (const path of new Set(["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp", inserted])) app.get(path, ...(hostCheck ? [hostCheck] : []), metadata);
  }
  const localAgent = options.localAgent;
  const required = verifier !== undefined || oauth !== undefined || !isLoopbackHost(host) || localAgent?.only === true;
  app.use(
    "/mcp",
    originValidation(options.allowedOrigins ?? []),
    authentication(verifier, oauth, directory, required, localAgent ? localAgentMatcher(localAgent) : undefined, localAgent?.only === true),
  );
  if (credentialWatch) {
    app.use("/mcp", (_req, res, next) => {
      const { identity, keySha256, tokenExpiresAt } = res.locals as Locals;
      const registryKey = registryKeyDigest(keySha256);
      credentialWatch.hold(res, identity, {
        registryKey,
        fileKey: registryKey === undefined ? keySha256 : undefined,
        expiresAtMs: tokenExpiresAt !== undefined ? tokenExpiresAt * 1000 : undefined,
      });
      next();
    });
  }
  // A page for people, not probes: behind the same Host and Origin checks as /mcp (a rebound
  // DNS name gets nothing), without authentication (it says how to authenticate).
  app.get(
    "/",
    ...(hostCheck ? [hostCheck] : []),
    originValidation(options.allowedOrigins ?? []),
    homePage({
      version: deps.version,
      apiKeys: verifier !== undefined,
      ...(oauth ? { oauthIssuer: oauth.metadata.authorization_servers[0] } : {}),
      console: serveConsole,
    }),
  );
  if (serveConsole && options.console) {
    app.use(
      CONSOLE_PATH,
      hostHeaderValidation(consoleHosts),
      originValidation(options.allowedOrigins ?? []),
      createConsoleRouter({
        deps,
        sessions: options.console.sessions ?? createMemoryConsoleSessionStore(),
        ...(verifier ? { keys: verifier } : {}),
        ...(directory ? { directory } : {}),
        ...(options.console.signInLinks ? { signInLinks: options.console.signInLinks } : {}),
        ...(consoleOAuth ? { oauthSignIn: consoleOAuth } : {}),
        ...(options.console.publicUrl ? { publicUrl: options.console.publicUrl } : {}),
        signingKey: consoleKey,
      }),
    );
  }

  const handleMcp = async (req: Request, res: Response) => {
    const identity = (res.locals as Locals).identity;
    // The SDK's own classifier decides the era (docs/protocol.md §3): everything not 2025-11-25
    // (a request with the 2026-07-28 envelope, and every ladder rejection) goes to the tenant's
    // 2026-07-28 handler, which never opens a session.
    const route = classifyInboundRequest({
      httpMethod: req.method,
      ...optionalHeader("protocolVersionHeader", req.headers["mcp-protocol-version"]),
      ...optionalHeader("mcpMethodHeader", req.headers["mcp-method"]),
      ...optionalHeader("mcpNameHeader", req.headers["mcp-name"]),
      body: req.body,
    });
    if (route.kind !== "legacy") {
      if (req.method === "POST" && !req.is("application/json")) {
        return jsonRpcError(res, 415, -32000, "Unsupported Media Type: Content-Type must be application/json");
      }
      // The principal comes from the credential only: the key's, or the local identity's.
      const withAuth = req as Request & { auth?: AuthInfo };
      withAuth.auth ??= authInfoOf(identity);
      return modern.serve(withAuth, res, req.body);
    }
    const header = req.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (sessionId === undefined) {
      if (req.method === "POST" && !req.is("application/json")) {
        return jsonRpcError(res, 415, -32000, "Unsupported Media Type: Content-Type must be application/json");
      }
      const params = req.method === "POST" ? initializeParams(req.body) : undefined;
      if (!params) return jsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
      const problem = headerProblem(req, false);
      if (problem) return jsonRpcError(res, problem.status, -32000, problem.message);
      const { keySha256, oauth: byToken } = res.locals as Locals;
      return sessions.initialize(identity, byToken ? { oauth: true } : { ...(keySha256 ? { keySha256 } : {}) }, params, (local) => local.serve(req, res, req.body));
    }
    const local = SESSION_ID_RE.test(sessionId) ? await sessions.resolve(identity, sessionId, (res.locals as Locals).keySha256) : undefined;
    if (!local) return jsonRpcError(res, 404, -32001, "Session not found");
    const problem = req.method === "POST" ? headerProblem(req, true) : undefined;
    if (problem) return jsonRpcError(res, problem.status, -32000, problem.message);
    // An answer to another replica's request, or a cancel of a call running there, goes there
    // (docs/protocol.md §8); while Redis is down that fails `unavailable`, answered 503 below.
    const version = req.headers["mcp-protocol-version"];
    if (req.method === "POST" && (await sessions.relayElsewhere(local, req.body, Array.isArray(version) ? version[0] : version))) {
      return void res.status(202).end();
    }
    return local.serve(req, res, req.body);
  };

  app.post("/mcp", keepBodyHead(maxBodyBytes), express.json({ limit: maxBodyBytes, verify: screenBody }), jsonRpcEnvelope, handleMcp);
  app.get("/mcp", handleMcp);
  app.delete("/mcp", handleMcp);
  app.all("/mcp", (_req, res) => jsonRpcError(res, 405, -32000, "Method not allowed", { Allow: "GET, POST, DELETE" }));

  const onError: ErrorRequestHandler = (err: { type?: string; status?: number }, _req, res, next) => {
    if (res.headersSent) return next(err);
    if (err instanceof BodyRefused) return res.status(400).json(refusalResponse(err.refusal));
    if (err.type === "entity.too.large") {
      const id = idInBodyHead(res);
      if (id !== undefined) (res.locals as Locals).requestId = id;
      // The rest of the body is not read: the connection cannot carry another request after it.
      return jsonRpcError(res, 413, -32000, payloadTooLargeMessage(maxBodyBytes), { Connection: "close" });
    }
    if (err.type === "entity.parse.failed") return jsonRpcError(res, 400, -32700, "Parse error: Invalid JSON");
    if (err.type === "encoding.unsupported" || err.type === "charset.unsupported") {
      return jsonRpcError(res, 415, -32000, "Unsupported Media Type: the body must be UTF-8 JSON");
    }
    if (typeof err.status === "number" && err.status >= 400 && err.status < 500) {
      return jsonRpcError(res, err.status, -32600, "Invalid Request");
    }
    // The session store out of reach (Redis down): the session cannot be opened or checked now.
    if (err instanceof ChaosError && err.code === "unavailable") {
      return jsonRpcError(res, 503, -32000, err.message, { "Retry-After": "2" });
    }
    // This API key already holds as many sessions as it may.
    if (err instanceof ChaosError && err.code === "resource_exhausted") return jsonRpcError(res, 429, -32000, err.message);
    deps.logger.error({ err }, "HTTP request failed");
    jsonRpcError(res, 500, -32603, "Internal error");
  };
  app.use(onError);

  const server: Server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 3000, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  if (!hostCheck) deps.logger.warn({ host }, "no Host allow-list (MCP_ALLOWED_HOSTS): relying on API keys alone");

  return {
    url: `http://${urlHost}:${port}/mcp`,
    port,
    ...(serveConsole ? { consoleUrl: `${options.console?.publicUrl ?? `http://${urlHost}:${port}`}${CONSOLE_PATH}` } : {}),
    localSessionCount: () => sessions.size,
    modernTenantCount: () => modern.size,
    async close(graceMs = 10_000) {
      drain.draining = true;
      watchedKeys?.close();
      credentialWatch?.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      if (drain.inFlight > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, graceMs);
          drain.idle.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      await Promise.all([sessions.closeAll(), modern.closeAll()]);
      policyWatches.close();
      if (ownEvents) await events.close();
      server.closeAllConnections();
      await closed;
    },
  };
}
