import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express, { type ErrorRequestHandler, type Request, type Response } from "express";
import { classifyInboundRequest, isInitializeRequest, SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/server";
import type { AuthInfo, InitializeRequest } from "@modelcontextprotocol/server";
import { hostHeaderValidation } from "@modelcontextprotocol/express";
import { ChaosError } from "@chaos-core/kit";
import { createApiKeyVerifier, watchApiKeysFile, type ApiKeyEntry, type ApiKeyVerifier, type WatchedApiKeys } from "../auth/api-keys.js";
import type { CredentialDirectory } from "../auth/directory.js";
import { authInfoOf } from "../auth/identity.js";
import { createOAuthVerifier, protectedResourceMetadataUrl, type OAuthOptions } from "../auth/oauth.js";
import { localAgentMatcher, type LocalAgentCredential } from "../auth/local-agent.js";
import { DEFAULT_MAX_SESSIONS_PER_KEY, isLoopbackHost, MAX_BODY_BYTES } from "../config.js";
import { consoleSigningKey } from "../console/csrf.js";
import { CONSOLE_PATH, type ConsoleLinks } from "../deps/console-links.js";
import { createConsoleOAuthSignIn } from "../console/oauth-sign-in.js";
import { createConsoleRouter } from "../console/router.js";
import type { ConsoleServeOptions } from "../console/options.js";
import { createMemoryConsoleSessionStore } from "../console/sessions.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { createMemoryEdgeEvents, publishingCouncil, publishUpstreamChanges, startPolicyWatches } from "../events/feeds.js";
import { checkReadiness } from "../server/readiness.js";
import { registryKeyDigest } from "../sessions/session-store.js";
import { askDirectory, authentication, protectedResourceMetadataRoute } from "./authentication.js";
import { CredentialWatch } from "./credential-watch.js";
import { hostValidation, originValidation } from "./host-and-origin.js";
import { homePage } from "./home-page.js";
import { BodyRefused, idInBodyHead, jsonRpcEnvelope, keepBodyHead, screenBody } from "./http-body.js";
import { jsonRpcError, type McpLocals } from "./http-errors.js";
import { ModernHandlers } from "./http-modern.js";
import { HttpSessionTable } from "./http-sessions.js";
import { payloadTooLargeMessage, refusalResponse } from "./incoming.js";

/** How long the edge keeps an idle keep-alive connection: past the 60 s of common proxies and load balancers. */
export const EDGE_KEEP_ALIVE_MS = 65_000;

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
  const upstreamChanges = deps.upstreams ? publishUpstreamChanges(deps.upstreams, events.buses, deps.logger) : undefined;
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
      const { identity, keySha256, tokenExpiresAt } = res.locals as McpLocals;
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
    const identity = (res.locals as McpLocals).identity;
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
      withAuth.auth ??= authInfoOf(identity, (res.locals as McpLocals).tenantGeneration);
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
      const { keySha256, oauth: byToken } = res.locals as McpLocals;
      return sessions.initialize(identity, byToken ? { oauth: true } : { ...(keySha256 ? { keySha256 } : {}) }, params, (local) => local.serve(req, res, req.body));
    }
    const local = SESSION_ID_RE.test(sessionId) ? await sessions.resolve(identity, sessionId, (res.locals as McpLocals).keySha256) : undefined;
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
      if (id !== undefined) (res.locals as McpLocals).requestId = id;
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
  // An idle keep-alive connection is kept longer than a client or proxy keeps its end (undici 4 s,
  // an ingress or load balancer 60 s): with Node's 5 s default, a client under load could reuse a
  // connection in the instant the edge closes it and see "socket hang up" instead of an answer.
  server.keepAliveTimeout = EDGE_KEEP_ALIVE_MS;
  server.headersTimeout = EDGE_KEEP_ALIVE_MS + 1000;
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
      upstreamChanges?.();
      if (ownEvents) await events.close();
      server.closeAllConnections();
      await closed;
    },
  };
}
