import { randomUUID } from "node:crypto";
import type { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { isInitializeRequest, isJSONRPCNotification, isJSONRPCRequest, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { LOCAL_IDENTITY } from "../auth/identity.js";
import type { EdgeDeps, EdgeSession } from "../deps.js";
import { createChaosCoreServer } from "../server/create-server.js";
import { sessionRecordFromInitialize } from "../sessions/initialize.js";
import type { NewSessionRecord } from "../sessions/session-store.js";

/** Where the stdio transport reads and writes, and whom it tells when the session ends. */
export interface StdioTransportOptions {
  /** Defaults to process.stdin. */
  readonly stdin?: Readable;
  /** Defaults to process.stdout, which then carries JSON-RPC and nothing else. */
  readonly stdout?: Writable;
  /** Called once when the session ends: stdin closed, stdout failed, or {@link close}. */
  readonly onClose?: () => void;
}

/** A running stdio transport. */
export interface RunningStdioTransport {
  /**
   * Resolves once every request received so far has been answered (at once when none is open),
   * so a process that must stop can first let the client read why its calls failed.
   */
  idle(): Promise<void>;
  /** Ends the session and removes its record. */
  close(): Promise<void>;
}

/**
 * Serves one MCP session over stdio as the local user (tenant `default`, principal `local`):
 * whoever can start the process already is that user. stdout carries JSON-RPC only; every
 * diagnostic goes through the logger to stderr. The only stdio-aware module.
 */
export async function runStdioTransport(deps: EdgeDeps, options: StdioTransportOptions = {}): Promise<RunningStdioTransport> {
  const stdin = options.stdin ?? process.stdin;
  const stdout = options.stdout ?? process.stdout;
  const session: EdgeSession = { id: randomUUID(), ...LOCAL_IDENTITY };
  const log = deps.logger.child({ tenant: session.tenant, principal: session.principal, session: session.id });
  const server = createChaosCoreServer(deps, session);
  const transport = new StdioServerTransport(stdin, stdout);
  server.server.onerror = (err) => log.warn({ err }, "MCP protocol error");

  let closed = false;
  let record: NewSessionRecord | undefined;
  const end = async (reason: string) => {
    if (closed) return;
    closed = true;
    stdin.off("end", onEnd).off("close", onEnd);
    stdout.off("error", onStdoutError);
    log.info({ reason }, "stdio session ended");
    await server.close().catch((err: unknown) => log.warn({ err }, "closing the server failed"));
    await deps.sessions.delete(session.tenant, session.id).catch((err: unknown) => log.warn({ err }, "removing the session failed"));
    options.onClose?.();
  };
  const onEnd = () => void end("stdin closed");
  // A client that went away makes writes fail with EPIPE: that ends the session, it is not a crash.
  const onStdoutError = (err: Error) => void end(`stdout failed: ${err.message}`);
  stdin.once("end", onEnd).once("close", onEnd);
  stdout.on("error", onStdoutError);

  await server.connect(transport);

  // Requests received and not yet answered: a response is the message with an id and no method;
  // a request the client cancelled gets none.
  const open = new Set<unknown>();
  let idleWaiters: Array<() => void> = [];
  const settle = (id: unknown) => {
    if (!open.delete(id) || open.size > 0) return;
    for (const wake of idleWaiters) wake();
    idleWaiters = [];
  };
  const send = transport.send.bind(transport);
  transport.send = async (message: JSONRPCMessage) => {
    await send(message);
    if ("id" in message && !("method" in message)) settle(message.id);
  };

  // The session record is kept like an HTTP one (inspect and log levels read it), but the
  // process is the session: a record that expired while the client sat idle is written again.
  const dispatch = transport.onmessage!;
  let queue: Promise<void> = Promise.resolve();
  transport.onmessage = (message: JSONRPCMessage) => {
    if (isJSONRPCRequest(message)) open.add(message.id);
    else if (isJSONRPCNotification(message) && message.method === "notifications/cancelled") settle(message.params?.requestId);
    queue = queue
      .then(async () => {
        if (isInitializeRequest(message)) {
          record = sessionRecordFromInitialize(session, "stdio", message.params);
          await deps.sessions.create(record);
        } else if (record && isJSONRPCRequest(message)) {
          if (!(await deps.sessions.touch(session.tenant, session.id))) await deps.sessions.create(record);
        }
      })
      .catch((err: unknown) => log.warn({ err }, "session store unavailable"))
      .then(() => dispatch(message));
  };
  log.info("stdio session started");

  return {
    idle: () => (open.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve))),
    close: () => end("closed"),
  };
}
