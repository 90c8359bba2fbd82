import { randomUUID } from "node:crypto";
import { PassThrough, type Readable, type Writable } from "node:stream";
import { STDIO_DEFAULT_MAX_BUFFER_SIZE, isInitializeRequest, isJSONRPCNotification, isJSONRPCRequest } from "@modelcontextprotocol/server";
import type { JSONRPCMessage } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { ChaosError } from "@chaos-core/kit";
import { LOCAL_IDENTITY } from "../auth/identity.js";
import type { EdgeDeps, EdgeSession } from "../deps.js";
import { createChaosCoreServer } from "../server/create-server.js";
import { sessionRecordFromInitialize } from "../sessions/initialize.js";
import type { NewSessionRecord } from "../sessions/session-store.js";
import { envelopeRefusal, payloadTooLargeMessage, refusalResponse, screenMessage, type Refusal } from "./incoming.js";

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

/** Why a line cannot go on to the SDK, which would drop it without an answer (bad JSON) or decode it lossily. */
function lineRefusal(line: Buffer): Refusal | undefined {
  const screened = screenMessage(line);
  if (screened.refusal) return screened.refusal;
  let value: unknown;
  try {
    value = JSON.parse(line.toString("utf8"));
  } catch {
    return { id: screened.id ?? null, error: { code: -32700, message: "Parse error: Invalid JSON" } };
  }
  return envelopeRefusal(value, screened.id);
}

/** The longest line served: the SDK's own limit, which used to end the session when a line passed it. */
const MAX_LINE_BYTES = STDIO_DEFAULT_MAX_BUFFER_SIZE;

/**
 * The lines of `stdin` the SDK may read, each screened on its raw bytes first (see incoming.ts);
 * a refused line is answered through `refuse` and never reaches the SDK. A line longer than
 * {@link MAX_LINE_BYTES} is skipped to its end and refused as HTTP refuses a body too large.
 */
function screenedLines(stdin: Readable, refuse: (refusal: Refusal) => void): { lines: Readable; stop: () => void } {
  const lines = new PassThrough();
  let pending: Buffer[] = [];
  let size = 0;
  let skipping = false;
  const tooLarge: Refusal = { id: null, error: { code: -32000, message: payloadTooLargeMessage(MAX_LINE_BYTES) } };
  const onData = (chunk: Buffer) => {
    for (let start = 0; start < chunk.length; ) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      if (!skipping) {
        pending.push(chunk.subarray(start, end));
        size += end - start;
        if (size > MAX_LINE_BYTES) {
          skipping = true;
          pending = [];
          refuse(tooLarge);
        }
      }
      if (newline === -1) break;
      if (!skipping) {
        const line = Buffer.concat(pending);
        // A blank line is no message: nothing to answer, nothing for the SDK.
        if (line.toString("latin1").trim() !== "") {
          const refusal = lineRefusal(line);
          if (refusal) refuse(refusal);
          else lines.write(Buffer.concat([line, Buffer.from("\n")]));
        }
      }
      pending = [];
      size = 0;
      skipping = false;
      start = newline + 1;
    }
  };
  const onEnd = () => lines.end();
  const onError = (err: Error) => lines.emit("error", err);
  stdin.on("data", onData).once("end", onEnd).on("error", onError);
  return {
    lines,
    stop: () => {
      stdin.off("data", onData).off("end", onEnd).off("error", onError);
      if (stdin.listenerCount("data") === 0) stdin.pause();
    },
  };
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
  const input = screenedLines(stdin, (refusal) => {
    // JSON-RPC wants `"id": null` when the id could not be read; the SDK's type leaves it out instead.
    transport.send(refusalResponse(refusal) as unknown as JSONRPCMessage).catch((err: unknown) => log.warn({ err }, "answering a refused message failed"));
  });
  // Room for the longest line and its newline: lines are measured (and refused) above.
  const transport = new StdioServerTransport(input.lines, stdout, { maxBufferSize: MAX_LINE_BYTES + 1 });
  server.server.onerror = (err) => log.warn({ err }, "MCP protocol error");

  let closed = false;
  let record: NewSessionRecord | undefined;
  const end = async (reason: string) => {
    if (closed) return;
    closed = true;
    stdin.off("end", onEnd).off("close", onEnd);
    input.stop();
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
  // An outage is logged once when it starts (kit's Redis client logs its end), not per request.
  let storeDown = false;
  const storeFailed = (err: unknown) => {
    const outage = err instanceof ChaosError && err.code === "unavailable";
    if (!outage) log.warn({ err }, "the session store refused to keep the session record");
    else if (!storeDown) log.warn({ err }, "session store unavailable: serving this session without its record until it is back");
    storeDown = outage;
  };
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
        storeDown = false;
      })
      .catch(storeFailed)
      .then(() => dispatch(message));
  };
  log.info("stdio session started");

  return {
    idle: () => (open.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve))),
    close: () => end("closed"),
  };
}
