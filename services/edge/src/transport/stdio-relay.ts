import type { Readable, Writable } from "node:stream";
import { SdkHttpError, StreamableHTTPClientTransport, type JSONRPCMessage } from "@modelcontextprotocol/client";
import type { Logger } from "@chaos-core/kit";
import { refusalResponse, type RequestId } from "./incoming.js";
import { readScreenedLines } from "./stdio-lines.js";
import type { RunningStdioTransport } from "./stdio.js";

/** Where a relay sends its host's messages, and as whom. */
export interface StdioRelayOptions {
  /** The serving process's MCP endpoint on loopback (`http://127.0.0.1:PORT/mcp`). */
  readonly url: string;
  /** The local agent's credential that process published (auth/local-agent.ts). */
  readonly token: string;
  /** The serving process in words, for answers that say it cannot be reached (`chaos-core serve (pid 42) at …`). */
  readonly upstream: string;
  readonly logger: Logger;
  /** Defaults to process.stdin. */
  readonly stdin?: Readable;
  /** Defaults to process.stdout, which then carries JSON-RPC and nothing else. */
  readonly stdout?: Writable;
  /** Called once when the connection ends: stdin closed, stdout failed, or close. */
  readonly onClose?: () => void;
}

/** The fields a relay looks at; every message is passed on whole, whatever else it holds. */
type Envelope = { id?: RequestId; method?: string; params?: { requestId?: RequestId }; result?: { protocolVersion?: unknown } };

/** JSON-RPC's implementation-defined server error, as the edge answers a transport-level failure. */
const SERVER_ERROR = -32000;

/**
 * The answer to a request the relay could not deliver, or whose delivery failed: the serving
 * process's own JSON-RPC error when its HTTP answer carried one (a refused credential, an unknown
 * session), else what happened and the way out.
 */
function failedDelivery(id: RequestId, err: unknown, upstream: string): JSONRPCMessage {
  if (err instanceof SdkHttpError) {
    const text = typeof err.data.text === "string" ? err.data.text : "";
    try {
      const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
      if (typeof body.error?.code === "number" && typeof body.error.message === "string") {
        return { jsonrpc: "2.0", id, error: { code: body.error.code, message: body.error.message } };
      }
    } catch {
      // Not a JSON-RPC body: described below.
    }
    return { jsonrpc: "2.0", id, error: { code: SERVER_ERROR, message: `${upstream} answered HTTP ${err.status}${text ? `: ${text.slice(0, 500)}` : ""}` } };
  }
  const cause = err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err);
  return {
    jsonrpc: "2.0",
    id,
    error: {
      code: SERVER_ERROR,
      message:
        `this chaos-core stdio process relays to ${upstream}, which does not answer (${cause}): nothing ran. ` +
        "Start that server again (or restart this MCP server in your host, which then serves the data directory itself).",
    },
  };
}

/**
 * Serves one MCP connection over stdio by relaying it to the chaos-core process that already
 * serves the data directory (docs/protocol.md §16): every line from the host, screened on its raw
 * bytes as stdio screens it, goes to that process's `/mcp` over Streamable HTTP with the local
 * agent's credential, and everything that process sends back — answers, progress, server→client
 * requests such as elicitation, list changes on the session's stream — comes out on stdout. Both
 * revisions: the SDK's client transport keeps the 2025-11-25 session id and derives the 2026-07-28
 * per-request headers from each message's `_meta`. The relay holds no MCP state of its own: what it
 * serves is exactly what that process serves to the local user.
 */
export async function runStdioRelay(options: StdioRelayOptions): Promise<RunningStdioTransport> {
  const stdin = options.stdin ?? process.stdin;
  const stdout = options.stdout ?? process.stdout;
  const log = options.logger.child({ relay: options.url });
  const http = new StreamableHTTPClientTransport(new URL(options.url), {
    requestInit: { headers: { authorization: `Bearer ${options.token}` } },
  });

  // Requests sent and not yet answered, for idle() and for answering them when delivery fails.
  const open = new Set<RequestId>();
  let idleWaiters: Array<() => void> = [];
  const settle = (id: RequestId) => {
    if (!open.delete(id) || open.size > 0) return;
    for (const wake of idleWaiters) wake();
    idleWaiters = [];
  };
  let closed = false;
  const write = (message: unknown) => {
    if (closed) return;
    stdout.write(`${JSON.stringify(message)}\n`);
  };

  // A 2025-11-25 session's later requests carry the version its initialize agreed on.
  let initializeId: RequestId | undefined;
  http.onmessage = (message) => {
    const m = message as Envelope;
    const answer = m.method === undefined && m.id !== undefined ? m.id : undefined;
    if (answer !== undefined && answer === initializeId && typeof m.result?.protocolVersion === "string") {
      http.setProtocolVersion(m.result.protocolVersion);
    }
    write(message);
    if (answer !== undefined) settle(answer);
  };
  http.onerror = (err) => log.debug({ err }, "relay: the serving process's stream reported an error");
  await http.start();

  const deliver = (message: JSONRPCMessage) => {
    const m = message as Envelope;
    const request = m.method !== undefined && m.id !== undefined ? { id: m.id, method: m.method } : undefined;
    if (request) {
      open.add(request.id);
      if (request.method === "initialize") initializeId = request.id;
    } else if (m.method === "notifications/cancelled" && m.params?.requestId !== undefined) {
      settle(m.params.requestId);
    }
    http.send(message).catch((err: unknown) => {
      log.warn({ err: err instanceof Error ? err.message : String(err), method: request?.method }, "relay: delivering a message failed");
      // Only a request has anyone waiting; a notification or an answer that did not arrive is logged.
      if (request && open.has(request.id)) {
        write(failedDelivery(request.id, err, options.upstream));
        settle(request.id);
      }
    });
  };

  const end = async (reason: string) => {
    if (closed) return;
    closed = true;
    reader.stop();
    stdout.off("error", onStdoutError);
    log.info({ reason }, "stdio relay ended");
    // A 2025-11-25 session is ended at the server too, as a client that leaves ends it.
    await http.terminateSession().catch(() => {});
    await http.close().catch(() => {});
    options.onClose?.();
  };
  const onStdoutError = (err: Error) => void end(`stdout failed: ${err.message}`);
  stdout.on("error", onStdoutError);
  const reader = readScreenedLines(stdin, {
    refuse: (refusal) => write(refusalResponse(refusal)),
    accept: (message) => deliver(message),
    end: () => void end("stdin closed"),
    error: (err) => void end(`stdin failed: ${err.message}`),
  });
  log.info({ upstream: options.upstream }, "stdio relay started");

  return {
    idle: () => (open.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve))),
    close: () => end("closed"),
  };
}

/**
 * Serves a host that this process cannot serve at all: every request is answered with a JSON-RPC
 * error carrying `message` (what holds the data directory, and the way out), which a host shows
 * where it would otherwise show only "connection closed"; notifications are dropped. Ends when
 * stdin closes.
 */
export function runStdioRefusal(message: string, options: Pick<StdioRelayOptions, "stdin" | "stdout" | "onClose" | "logger">): RunningStdioTransport {
  const stdin = options.stdin ?? process.stdin;
  const stdout = options.stdout ?? process.stdout;
  let closed = false;
  const write = (value: unknown) => {
    if (!closed) stdout.write(`${JSON.stringify(value)}\n`);
  };
  const end = () => {
    if (closed) return Promise.resolve();
    closed = true;
    reader.stop();
    options.onClose?.();
    return Promise.resolve();
  };
  const reader = readScreenedLines(stdin, {
    refuse: (refusal) => write(refusalResponse(refusal)),
    accept: (m) => {
      const { id, method } = m as Envelope;
      if (method !== undefined && id !== undefined) write({ jsonrpc: "2.0", id, error: { code: SERVER_ERROR, message } });
    },
    end: () => void end(),
    error: () => void end(),
  });
  options.logger.error({ reason: message }, "stdio cannot serve: answering every request with the reason");
  return { idle: () => Promise.resolve(), close: end };
}
