import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response } from "express";
import {
  hostHeaderValidation,
  localhostHostValidation,
} from "@modelcontextprotocol/sdk/server/middleware/hostHeaderValidation.js";
import { requestBodyTooLargeMessage } from "@modelcontextprotocol/sdk/server/requestBody.js";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import { isInitializeRequest, type InitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { createApiKeyVerifier, loadApiKeysFile, type ApiKeyEntry, type ApiKeyVerifier } from "../auth/api-keys.js";
import { authInfoOf, LOCAL_IDENTITY, type Identity } from "../auth/identity.js";
import { isLoopbackHost, MAX_BODY_BYTES } from "../config.js";
import type { EdgeDeps } from "../deps.js";
import { checkReadiness } from "../server/readiness.js";
import { homePage } from "./home-page.js";
import { HttpSessionTable } from "./http-sessions.js";

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
  /** A JSON list of `{tenant, principal, sha256, roles?}`; when set, every /mcp request needs a bearer key. */
  readonly apiKeysFile?: string;
  /** The same list, given directly (tests, embedding). */
  readonly apiKeys?: readonly ApiKeyEntry[];
  /** How often idle local sessions are swept (default: half the session TTL, at most a minute). */
  readonly sweepIntervalMs?: number;
}

/** A running HTTP transport. */
export interface RunningHttpTransport {
  /** The MCP endpoint, e.g. `http://127.0.0.1:3000/mcp`. */
  readonly url: string;
  readonly port: number;
  /** How many sessions this replica holds in memory (metrics, tests). */
  localSessionCount(): number;
  /** Stops listening and closes this replica's sessions; their records stay for other replicas. */
  close(): Promise<void>;
}

type Locals = { identity: Identity };

function jsonRpcError(res: Response, status: number, code: number, message: string, headers: Record<string, string> = {}) {
  res.status(status).set(headers).json({ jsonrpc: "2.0", error: { code, message }, id: null });
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

function originValidation(allowed: readonly string[]): RequestHandler {
  return (req, res, next) => {
    const origin = req.headers.origin;
    if (origin === undefined || isLoopbackOrigin(origin) || allowed.includes(origin)) return next();
    jsonRpcError(res, 403, -32000, `Forbidden: Origin ${origin} is not allowed`);
  };
}

function hostValidation(host: string, allowedHosts: readonly string[] | undefined): RequestHandler | undefined {
  if (allowedHosts && allowedHosts.length > 0) return hostHeaderValidation([...allowedHosts]);
  if (isLoopbackHost(host)) return localhostHostValidation();
  // A non-loopback bind without a Host list: bearer keys (required there) stop DNS rebinding.
  return undefined;
}

function authentication(verifier: ApiKeyVerifier | undefined): RequestHandler {
  return (req, res, next) => {
    if (!verifier) {
      (res.locals as Locals).identity = LOCAL_IDENTITY;
      return next();
    }
    const match = /^Bearer +([^\s]+) *$/i.exec(req.headers.authorization ?? "");
    if (!match) {
      return jsonRpcError(res, 401, -32001, "Unauthorized: send Authorization: Bearer <API key>", {
        "WWW-Authenticate": 'Bearer realm="chaos-core"',
      });
    }
    const identity = verifier.verify(match[1]!);
    if (!identity) {
      return jsonRpcError(res, 401, -32001, "Unauthorized: the API key is not valid", {
        "WWW-Authenticate": 'Bearer realm="chaos-core", error="invalid_token"',
      });
    }
    (res.locals as Locals).identity = identity;
    // Roles reach the tools through the SDK's per-request authInfo, never from the session.
    (req as Request & { auth?: AuthInfo }).auth = authInfoOf(identity);
    next();
  };
}

function initializeParams(body: unknown): InitializeRequest["params"] | undefined {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  const init = messages.find((m) => isInitializeRequest(m));
  return init ? (init as InitializeRequest).params : undefined;
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
  let verifier: ApiKeyVerifier | undefined;
  if (options.apiKeysFile) verifier = await loadApiKeysFile(options.apiKeysFile);
  else if (options.apiKeys) verifier = createApiKeyVerifier(options.apiKeys);
  if (!verifier && !isLoopbackHost(host)) {
    // Fail closed: without keys anyone who can reach the port would be tenant "default".
    throw new Error(
      `refusing to serve MCP on ${host} without API keys: set CHAOS_CORE_API_KEYS_FILE, or bind HOST=127.0.0.1 for local use`,
    );
  }

  const sessions = new HttpSessionTable(deps, {
    maxBodyBytes,
    ...(options.sweepIntervalMs ? { sweepIntervalMs: options.sweepIntervalMs } : {}),
  });
  // Not createMcpExpressApp: it mounts express.json() with body-parser's fixed 100 kB limit ahead
  // of anything added later, so bodies up to the configured limit could never arrive, and its 413
  // is an HTML page. The Host check below is the same SDK middleware it applies.
  const app = express();
  app.disable("x-powered-by");

  // Probes come from the cluster (kubelet) with pod-IP Host headers: they sit before the checks.
  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  app.get("/readyz", async (_req, res) => {
    const readiness = await checkReadiness(deps);
    res.status(readiness.ready ? 200 : 503).json({ status: readiness.ready ? "ready" : "not ready", checks: readiness.checks });
  });

  const hostCheck = hostValidation(host, options.allowedHosts);
  if (hostCheck) app.use("/mcp", hostCheck);
  app.use("/mcp", originValidation(options.allowedOrigins ?? []), authentication(verifier));
  // A page for people, not probes: behind the same Host and Origin checks as /mcp (a rebound
  // DNS name gets nothing), without authentication (it says how to authenticate).
  app.get(
    "/",
    ...(hostCheck ? [hostCheck] : []),
    originValidation(options.allowedOrigins ?? []),
    homePage({ version: deps.version, apiKeys: verifier !== undefined }),
  );

  const handleMcp = async (req: Request, res: Response) => {
    const identity = (res.locals as Locals).identity;
    const header = req.headers["mcp-session-id"];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (sessionId === undefined) {
      if (req.method === "POST" && !req.is("application/json")) {
        return jsonRpcError(res, 415, -32000, "Unsupported Media Type: Content-Type must be application/json");
      }
      const params = req.method === "POST" ? initializeParams(req.body) : undefined;
      if (!params) return jsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
      return sessions.initialize(identity, params, (transport) => transport.handleRequest(req, res, req.body));
    }
    const local = SESSION_ID_RE.test(sessionId) ? await sessions.resolve(identity, sessionId) : undefined;
    if (!local) return jsonRpcError(res, 404, -32001, "Session not found");
    return local.transport.handleRequest(req, res, req.body);
  };

  app.post("/mcp", express.json({ limit: maxBodyBytes }), handleMcp);
  app.get("/mcp", handleMcp);
  app.delete("/mcp", handleMcp);
  app.all("/mcp", (_req, res) => jsonRpcError(res, 405, -32000, "Method not allowed", { Allow: "GET, POST, DELETE" }));

  const onError: ErrorRequestHandler = (err: { type?: string; status?: number }, _req, res, next) => {
    if (res.headersSent) return next(err);
    if (err.type === "entity.too.large") return jsonRpcError(res, 413, -32000, requestBodyTooLargeMessage(maxBodyBytes));
    if (err.type === "entity.parse.failed") return jsonRpcError(res, 400, -32700, "Parse error: Invalid JSON");
    if (err.type === "encoding.unsupported" || err.type === "charset.unsupported") {
      return jsonRpcError(res, 415, -32000, "Unsupported Media Type: the body must be UTF-8 JSON");
    }
    if (typeof err.status === "number" && err.status >= 400 && err.status < 500) {
      return jsonRpcError(res, err.status, -32600, "Invalid Request");
    }
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
    localSessionCount: () => sessions.size,
    async close() {
      await sessions.closeAll();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
