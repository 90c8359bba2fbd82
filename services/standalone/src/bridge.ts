import { randomUUID, timingSafeEqual, createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { NodeStreamableHTTPServerTransport } from "@modelcontextprotocol/node";
import { isInitializeRequest, isJSONRPCErrorResponse, isJSONRPCResultResponse, type RequestId } from "@modelcontextprotocol/server";
import { isLoopbackHost, type Logger } from "@chaos-core/kit";

/**
 * `chaos-core bridge -- CMD ARGS` (docs/federation-platform.md §2): a stdio MCP server served over
 * Streamable HTTP, so an upstream that only speaks stdio runs as its own Deployment and Service
 * in a cluster and cognition reaches it like any HTTP upstream. Each MCP session is one process of
 * the command — an MCP stdio server serves one client — started at `initialize` and stopped when
 * the session ends (DELETE, idle past its bound, or the bridge stopping); a process that exits
 * ends its session, and the client's next request is answered 404 so it initializes again.
 *
 * The bridge forwards JSON-RPC messages as they are (it is a transport, not an MCP peer): a
 * response goes to the request it answers, a progress notification to the request whose
 * progress token it carries, anything else the process sends to the session's GET stream.
 *
 * Safe by default: it binds 127.0.0.1; beyond loopback it needs a bearer token (`--token-file`),
 * compared in constant time, or it refuses to start. On loopback without a token, Host headers
 * other than loopback names are refused (DNS rebinding).
 */
export interface BridgeOptions {
  readonly command: string;
  readonly args: readonly string[];
  /** The environment the command's processes get (the bridge's own). */
  readonly env: Readonly<Record<string, string>>;
  readonly host: string;
  readonly port: number;
  /** The bearer token every request must carry; required beyond loopback. */
  readonly token?: string;
  /** Sessions (processes) at once; past it `initialize` is answered 503 with Retry-After. */
  readonly maxSessions: number;
  /** A session with no request for this long is ended and its process stopped. */
  readonly idleMs: number;
  readonly logger: Logger;
  /** The path MCP is served at. */
  readonly path?: string;
}

export interface RunningBridge {
  /** `http://host:port/mcp`. */
  readonly url: string;
  /** Sessions open now (one process each). */
  sessions(): number;
  /** Stops taking requests, ends every session and stops its process. */
  close(): Promise<void>;
}

interface Session {
  readonly http: NodeStreamableHTTPServerTransport;
  readonly child: StdioClientTransport;
  /** When its last POST ended (or it opened). */
  lastSeen: number;
  /** POSTs being answered now: a session with one is not idle, however long the call takes. */
  inFlight: number;
  /** Progress tokens of the requests in flight, to the request that carries each. */
  readonly progress: Map<string, RequestId>;
}

export const DEFAULT_BRIDGE_PORT = 8080;
export const DEFAULT_BRIDGE_MAX_SESSIONS = 32;
export const DEFAULT_BRIDGE_IDLE_MS = 10 * 60_000;

const digest = (text: string) => createHash("sha256").update(text).digest();

function jsonRpcError(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

function isInitialize(body: unknown): boolean {
  return isInitializeRequest(Array.isArray(body) ? body[0] : body);
}

async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new Error(`the request body is over ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/** The largest request body taken: an MCP request is small; a tool's arguments may not be. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export async function startBridge(options: BridgeOptions): Promise<RunningBridge> {
  const path = options.path ?? "/mcp";
  const loopback = isLoopbackHost(options.host);
  if (!loopback && !options.token) {
    throw new Error(`refusing to bridge on ${options.host} without a token: set --token-file (CHAOS_CORE_BRIDGE_TOKEN_FILE), or bind 127.0.0.1`);
  }
  const expected = options.token ? digest(`Bearer ${options.token}`) : undefined;
  const sessions = new Map<string, Session>();
  const log = options.logger;

  const authorized = (req: IncomingMessage): boolean => {
    if (!expected) return true;
    const given = req.headers.authorization;
    return typeof given === "string" && timingSafeEqual(digest(given), expected);
  };

  // On loopback without a token, a page a browser loaded under a rebound name could reach it: only loopback Host names are answered.
  const hostAllowed = (req: IncomingMessage): boolean => {
    if (!loopback || expected) return true;
    const host = req.headers.host ?? "";
    const name = host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.split(":")[0];
    return name === "127.0.0.1" || name === "localhost" || name === "[::1]";
  };

  const open = async (): Promise<Session> => {
    // The process gets the bridge's environment: in its own pod, that is the upstream's.
    const child = new StdioClientTransport({ command: options.command, args: [...options.args], env: { ...options.env }, stderr: "inherit" });
    const progress = new Map<string, RequestId>();
    const http = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, session);
        log.info({ session: id, pid: child.pid, sessions: sessions.size }, "bridge session opened");
      },
    });
    http.onmessage = (message) => {
      if ("method" in message && "id" in message) {
        const token = (message.params as { _meta?: { progressToken?: unknown } } | undefined)?._meta?.progressToken;
        if (typeof token === "string" || typeof token === "number") progress.set(String(token), message.id);
      }
      child.send(message).catch((err: unknown) => log.warn({ err: (err as Error).message }, "bridge could not pass a message to the process"));
    };
    child.onmessage = (message) => {
      let related: RequestId | undefined;
      if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
        for (const [token, id] of progress) if (id === message.id) progress.delete(token);
      } else if ("method" in message && message.method === "notifications/progress") {
        related = progress.get(String((message.params as { progressToken?: unknown }).progressToken));
      }
      http.send(message, related !== undefined ? { relatedRequestId: related } : undefined).catch((err: unknown) => {
        log.debug({ err: (err as Error).message }, "bridge could not pass a message to the client (its stream has gone)");
      });
    };
    let ended = false;
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      const id = http.sessionId;
      if (id) sessions.delete(id);
      log.info({ session: id, pid: child.pid, why, sessions: sessions.size }, "bridge session ended");
      void http.close().catch(() => {});
      void child.close().catch(() => {});
    };
    child.onclose = () => end("the process exited");
    child.onerror = (err) => log.warn({ err: err.message, pid: child.pid }, "bridge process error");
    http.onclose = () => end("the session was closed");
    const session: Session = { http, child, lastSeen: Date.now(), inFlight: 0, progress };
    await child.start();
    return session;
  };

  /** One request on a session; a POST counts as activity from its start to its answer's end (a GET stream does not). */
  const serveOn = async (session: Session, req: IncomingMessage, res: ServerResponse, body?: unknown): Promise<void> => {
    if (req.method === "POST") {
      session.inFlight++;
      res.once("close", () => {
        session.inFlight--;
        session.lastSeen = Date.now();
      });
    }
    await session.http.handleRequest(req, res, body);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://bridge");
    if (url.pathname === "/healthz" || url.pathname === "/readyz") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: "ok", sessions: sessions.size }));
      return;
    }
    if (url.pathname !== path) return jsonRpcError(res, 404, `not found: MCP is served at ${path}`);
    if (!hostAllowed(req)) return jsonRpcError(res, 403, `Host ${JSON.stringify(req.headers.host ?? "")} is not a loopback name: a bridge on loopback without a token answers only 127.0.0.1, localhost and [::1]`);
    if (!authorized(req)) return jsonRpcError(res, 401, "a bearer token is required (Authorization: Bearer …)", { "www-authenticate": "Bearer" });
    const id = req.headers["mcp-session-id"];
    if (typeof id === "string") {
      const session = sessions.get(id);
      if (!session) return jsonRpcError(res, 404, "no such session (it ended, or its process exited): initialize again");
      await serveOn(session, req, res);
      return;
    }
    if (req.method !== "POST") return jsonRpcError(res, 400, "Mcp-Session-Id is required: initialize first (POST)");
    let body: unknown;
    try {
      body = await readJson(req, MAX_BODY_BYTES);
    } catch (err) {
      return jsonRpcError(res, 400, `the request body is not JSON-RPC: ${(err as Error).message}`);
    }
    if (!isInitialize(body)) return jsonRpcError(res, 400, "Mcp-Session-Id is required: initialize first");
    if (sessions.size >= options.maxSessions) {
      log.warn({ sessions: sessions.size, max: options.maxSessions }, "bridge at its session limit; initialize refused");
      return jsonRpcError(res, 503, `the bridge serves at most ${options.maxSessions} sessions at once; retry later`, { "retry-after": "5" });
    }
    let session: Session;
    try {
      session = await open();
    } catch (err) {
      log.error({ err: (err as Error).message, command: options.command }, "bridge could not start the process");
      return jsonRpcError(res, 502, `the bridged command could not be started: ${(err as Error).message}`);
    }
    await serveOn(session, req, res, body);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error({ err: (err as Error).message }, "bridge request failed");
      if (!res.headersSent) jsonRpcError(res, 500, "the bridge failed to handle the request");
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [id, s] of sessions) {
      if (s.inFlight === 0 && now - s.lastSeen > options.idleMs) {
        log.info({ session: id, idle_ms: now - s.lastSeen }, "bridge session idle past its bound; ending it");
        void s.http.close();
      }
    }
  }, Math.min(options.idleMs, 30_000));
  sweep.unref();
  const address = server.address() as AddressInfo;
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}${path}`,
    sessions: () => sessions.size,
    async close() {
      clearInterval(sweep);
      await Promise.all([...sessions.values()].map((s) => s.http.close().catch(() => {})));
      await Promise.all([...sessions.values()].map((s) => s.child.close().catch(() => {})));
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
    },
  };
}
