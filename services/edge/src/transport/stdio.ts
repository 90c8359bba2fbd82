import { randomUUID } from "node:crypto";
import { PassThrough, type Readable, type Writable } from "node:stream";
import { isInitializeRequest, isJSONRPCNotification, isJSONRPCRequest } from "@modelcontextprotocol/server";
import type { InitializeRequest, JSONRPCMessage, JSONRPCRequest, McpServer, McpServerFactory } from "@modelcontextprotocol/server";
import { serveStdio, StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { ChaosError } from "@chaos-core/kit";
import type { CredentialDirectory } from "../auth/directory.js";
import { LOCAL_IDENTITY } from "../auth/identity.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import type { EdgeSession, ModernScope } from "../sessions/server-scope.js";
import { announceToolsChanged, createChaosCoreServer } from "../server/create-server.js";
import { sessionRecordFromInitialize } from "../sessions/initialize.js";
import type { NewSessionRecord } from "../sessions/session-store.js";
import { refusalResponse, type Refusal } from "./incoming.js";
import { localToolsets } from "./local-toolsets.js";
import { MAX_LINE_BYTES, readScreenedLines } from "./stdio-lines.js";

/** Where the stdio transport reads and writes, and whom it tells when the connection ends. */
export interface StdioTransportOptions {
  /** Defaults to process.stdin. */
  readonly stdin?: Readable;
  /** Defaults to process.stdout, which then carries JSON-RPC and nothing else. */
  readonly stdout?: Writable;
  /** Called once when the connection ends: stdin closed, stdout failed, or {@link close}. */
  readonly onClose?: () => void;
  /**
   * Called once, when the first request arrives that the services may have to answer: any
   * request but `server/discover`. A 2026-07-28 client's version probe (a process that is sent
   * `server/discover` alone and then stopped) never calls it, so a caller that opens its stores
   * here never opens them for a probe (docs/protocol.md §14).
   */
  readonly onDemand?: () => void;
  /**
   * The tenant registry, once it can be read (the standalone's opens with its stores): the local
   * tenant's toolsets are read through it (cached by generation) before every `tools/call` and,
   * once it answered, every `tools/list`, so the ones its operator enabled (`chaos-core tenants
   * settings default --toolsets`) hold over stdio as over HTTP (local-toolsets.ts). Unset, or while
   * it cannot be read: the default toolsets.
   */
  readonly directory?: Promise<CredentialDirectory>;
  /** How long a request waits for {@link directory} to open before the defaults serve it (default: kit's `START_WAIT_MS`, as a call waits for the stores). */
  readonly directoryWaitMs?: number;
}

/** A running stdio transport. */
export interface RunningStdioTransport {
  /**
   * Resolves once every request received so far has been answered (at once when none is open),
   * so a process that must stop can first let the client read why its calls failed.
   */
  idle(): Promise<void>;
  /** Ends the connection and removes its session record, if it had one. */
  close(): Promise<void>;
}

/**
 * The lines of `stdin` the SDK may read (see stdio-lines.ts), in the order they were read, each
 * after its `before`. This is the one place that sees every message before the SDK does:
 * `serveStdio` owns the transport's `onmessage`.
 */
function screenedLines(stdin: Readable, hooks: LineHooks): { lines: Readable; stop: () => void } {
  const lines = new PassThrough();
  let queue: Promise<void> = Promise.resolve();
  const reader = readScreenedLines(stdin, {
    refuse: hooks.refuse,
    accept: (message, line) => {
      hooks.observe(message);
      const framed = Buffer.concat([line, Buffer.from("\n")]);
      queue = queue.then(() => hooks.before(message)).then(() => void lines.write(framed));
    },
    end: () => void queue.then(() => lines.end()),
    error: (err) => lines.emit("error", err),
  });
  return { lines, stop: reader.stop };
}

/** Whether a request carries a 2026-07-28 `_meta` envelope (which every request of that revision does). */
function carriesEnvelope(message: JSONRPCRequest): boolean {
  const meta = (message.params as { _meta?: Record<string, unknown> } | undefined)?._meta;
  return typeof meta?.["io.modelcontextprotocol/protocolVersion"] === "string";
}

/** What {@link screenedLines} asks of its caller for each line. */
interface LineHooks {
  /** Answers a refused line; the SDK never sees it. */
  refuse(refusal: Refusal): void;
  /** Sees an accepted message as it is read, in order, before anything is answered. */
  observe(message: JSONRPCMessage): void;
  /** Runs before the message goes on to the SDK; the next line waits for it. */
  before(message: JSONRPCMessage): Promise<void>;
}

/**
 * Serves one MCP connection over stdio as the local user (tenant `default`, principal `local`):
 * whoever can start the process already is that user. Both revisions, through the SDK's own
 * `serveStdio` (docs/protocol.md §3): the opening exchange pins the connection's era, `initialize`
 * to a 2025-11-25 session, `server/discover` or an enveloped request to 2026-07-28 (no session).
 * stdout carries JSON-RPC only; every diagnostic goes through the logger to stderr. The only
 * stdio-aware module.
 */
export async function runStdioTransport(deps: EdgeDeps, options: StdioTransportOptions = {}): Promise<RunningStdioTransport> {
  const stdin = options.stdin ?? process.stdin;
  const stdout = options.stdout ?? process.stdout;
  const session: EdgeSession = { id: randomUUID(), ...LOCAL_IDENTITY };
  const modern: ModernScope = { era: "modern", tenant: LOCAL_IDENTITY.tenant, principal: LOCAL_IDENTITY.principal };
  const log = deps.logger.child({ tenant: session.tenant, principal: session.principal, session: session.id });

  // The session record is kept like an HTTP one (inspect and log levels read it), for a
  // 2025-11-25 connection only; the process is the session.
  let initialize: InitializeRequest["params"] | undefined;
  let record: NewSessionRecord | undefined;
  // An outage is logged once when it starts (kit's Redis client logs its end), not per request.
  let storeDown = false;
  const storeFailed = (err: unknown) => {
    const outage = err instanceof ChaosError && err.code === "unavailable";
    if (!outage) log.warn({ err }, "the session store refused to keep the session record");
    else if (!storeDown) log.warn({ err }, "session store unavailable: serving this session without its record until it is back");
    storeDown = outage;
  };
  const stored = (write: Promise<unknown>) =>
    write.then(
      () => void (storeDown = false),
      (err: unknown) => storeFailed(err),
    );

  // The local tenant's toolsets from the registry (docs/tenants.md); without one, the defaults.
  // A 2025-11-25 session that listed the defaults before the registry answered otherwise is told
  // to list again (its server declares tools.listChanged).
  let legacyServer: McpServer | undefined;
  const toolsets = options.directory
    ? localToolsets(session.tenant, options.directory, log, () => legacyServer?.sendToolListChanged(), options.directoryWaitMs)
    : undefined;
  const served: EdgeDeps = toolsets ? { ...deps, enabledToolsets: (tenant) => toolsets.enabled(tenant) } : deps;
  // The upstream tools, read once the stores open and changed by a pin, an approval or a
  // quarantine (docs/federation.md §6): a 2025-11-25 session gets the new ones and is told.
  const stopUpstreamChanges = deps.upstreams?.onChange(() => {
    if (legacyServer) void announceToolsChanged(legacyServer).catch((err: unknown) => log.debug({ err }, "telling the client its tools changed failed"));
  });

  // serveStdio builds one server for the connection's era (and one for a `server/discover`
  // probe, kept if the connection goes on modern). A legacy one exists only once `initialize`
  // (or a claim-less request) opened the connection: its record is written before the SDK
  // answers that request, as before.
  const factory: McpServerFactory = async ({ era }) => {
    const server = createChaosCoreServer(served, era === "modern" ? modern : session);
    if (era === "legacy") legacyServer = server;
    server.server.onerror = (err) => log.warn({ err }, "MCP protocol error");
    if (era === "legacy" && initialize && !record) {
      record = sessionRecordFromInitialize(session, "stdio", initialize);
      await stored(deps.sessions.create(record));
    }
    return server;
  };

  // Requests received and not yet answered: a response is the message with an id and no method;
  // a request the client cancelled gets none.
  const open = new Set<unknown>();
  let idleWaiters: Array<() => void> = [];
  const settle = (id: unknown) => {
    if (!open.delete(id) || open.size > 0) return;
    for (const wake of idleWaiters) wake();
    idleWaiters = [];
  };
  let demanded = false;

  const input = screenedLines(stdin, {
    refuse: (refusal) => {
      // JSON-RPC wants `"id": null` when the id could not be read; the SDK's type leaves it out instead.
      transport.send(refusalResponse(refusal) as unknown as JSONRPCMessage).catch((err: unknown) => log.warn({ err }, "answering a refused message failed"));
    },
    observe: (message) => {
      if (isJSONRPCRequest(message)) {
        open.add(message.id);
        if (!demanded && message.method !== "server/discover") {
          demanded = true;
          options.onDemand?.();
        }
        if (!initialize && isInitializeRequest(message)) initialize = message.params;
      } else if (isJSONRPCNotification(message) && message.method === "notifications/cancelled") settle(message.params?.requestId);
    },
    before: async (message) => {
      if (!isJSONRPCRequest(message)) return;
      if (message.method === "tools/call") await toolsets?.beforeCall();
      if (message.method === "tools/list") await toolsets?.beforeList(carriesEnvelope(message));
      // A record that expired while the client sat idle is written again.
      if (!record) return;
      const current = record;
      await stored(deps.sessions.touch(session.tenant, session.id).then((alive) => (alive ? undefined : deps.sessions.create(current))));
    },
  });
  // Room for the longest line and its newline: lines are measured (and refused) above.
  const transport = new StdioServerTransport(input.lines, stdout, { maxBufferSize: MAX_LINE_BYTES + 1 });
  const send = transport.send.bind(transport);
  transport.send = async (message: JSONRPCMessage) => {
    await send(message);
    if ("id" in message && !("method" in message)) settle(message.id);
  };

  let closed = false;
  const end = async (reason: string) => {
    if (closed) return;
    closed = true;
    stopUpstreamChanges?.();
    stdin.off("end", onEnd).off("close", onEnd);
    input.stop();
    stdout.off("error", onStdoutError);
    log.info({ reason }, "stdio connection ended");
    await handle.close().catch((err: unknown) => log.warn({ err }, "closing the server failed"));
    if (record) await deps.sessions.delete(session.tenant, session.id).catch((err: unknown) => log.warn({ err }, "removing the session failed"));
    options.onClose?.();
  };
  const onEnd = () => void end("stdin closed");
  // A client that went away makes writes fail with EPIPE: that ends the connection, it is not a crash.
  const onStdoutError = (err: Error) => void end(`stdout failed: ${err.message}`);
  stdin.once("end", onEnd).once("close", onEnd);
  stdout.on("error", onStdoutError);

  // Rejections of the opening exchange (a bad envelope, an unsupported revision) are answered on
  // the wire by the SDK; this only hears of them.
  const handle = serveStdio(factory, { legacy: "serve", transport, onerror: (err) => log.debug({ err }, "stdio: refused or failed") });
  log.info("stdio connection started");

  return {
    idle: () => (open.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve))),
    close: () => end("closed"),
  };
}
