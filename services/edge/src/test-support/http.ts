import { request } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ConnectOptions } from "./in-memory.js";

export {
  initializeBody,
  MCP_HEADERS,
  openSession,
  PROTOCOL_VERSION,
  readJsonRpc,
  rpc,
} from "../../../../test/support/mcp-http.js";

export const listTools = { jsonrpc: "2.0", id: 2, method: "tools/list" } as const;

export function toolCall(id: number, name: string, args: Record<string, unknown>) {
  return { jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } };
}

/**
 * A real SDK client over Streamable HTTP; with `sessionId` it joins an existing session. Like
 * the in-memory client, it can declare capabilities and set request handlers before it connects.
 */
export async function httpClient(
  url: string,
  options: { headers?: Record<string, string>; sessionId?: string } & ConnectOptions = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    ...(options.headers ? { requestInit: { headers: options.headers } } : {}),
    ...(options.sessionId ? { sessionId: options.sessionId } : {}),
  });
  const client = new Client({ name: "edge-http-test", version: "1.0.0" }, { capabilities: options.capabilities ?? {} });
  options.setup?.(client);
  await client.connect(transport);
  return { client, transport };
}

/**
 * A POST through node:http, which sends the Host header it is given (fetch silently replaces
 * it with the URL's host, so it cannot test Host validation).
 */
export function postWithHost(url: string, host: string, headers: Record<string, string>, body: unknown): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", headers: { ...headers, host } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

/** One server-sent event as it came: its `id`, `retry` and `data` lines (data joined), when present. */
export interface SseEvent {
  readonly id?: string;
  readonly retry?: number;
  readonly data: string;
  /** `data` parsed, when it is JSON. */
  readonly message?: Record<string, unknown>;
}

/** Parses one SSE event block (the text between two blank lines); undefined for a comment-only block. */
function parseSseEvent(block: string): SseEvent | undefined {
  let id: string | undefined;
  let retry: number | undefined;
  const data: string[] = [];
  let any = false;
  for (const line of block.split("\n")) {
    if (line.startsWith(":") || line.length === 0) continue;
    const at = line.indexOf(":");
    const field = at < 0 ? line : line.slice(0, at);
    const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
    any = true;
    if (field === "id") id = value;
    else if (field === "retry") retry = Number(value);
    else if (field === "data") data.push(value);
  }
  if (!any) return undefined;
  const text = data.join("\n");
  let message: Record<string, unknown> | undefined;
  try {
    message = text.trim() ? (JSON.parse(text) as Record<string, unknown>) : undefined;
  } catch {
    message = undefined;
  }
  return { ...(id !== undefined ? { id } : {}), ...(retry !== undefined ? { retry } : {}), data: text, ...(message ? { message } : {}) };
}

/**
 * Reads an SSE response as it arrives: `next(match)` resolves with the first event from here on
 * that `match` accepts, and rejects naming what it waited for when the stream ends first or
 * `timeoutMs` passes (a failure, never a timing assertion). `all()` reads to the end.
 */
export function sseStream(res: Response) {
  if (!res.body) throw new Error("the response has no body");
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const queued: SseEvent[] = [];
  let ended = false;
  const pull = async (): Promise<boolean> => {
    if (ended) return false;
    const { value, done } = await reader.read();
    if (done) {
      ended = true;
      return false;
    }
    buffer += value.replace(/\r\n/g, "\n");
    let cut: number;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = parseSseEvent(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (event) queued.push(event);
    }
    return true;
  };
  return {
    async next(match: (e: SseEvent) => boolean = () => true, what = "an event", timeoutMs = 15_000): Promise<SseEvent> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const at = queued.findIndex(match);
        if (at >= 0) return queued.splice(0, at + 1).at(-1)!;
        queued.length = 0;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no ${what} on the stream within ${timeoutMs} ms`);
        let timer: NodeJS.Timeout | undefined;
        const more = await Promise.race([
          pull(),
          new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), left))),
        ]).finally(() => clearTimeout(timer));
        if (more === "timeout") throw new Error(`no ${what} on the stream within ${timeoutMs} ms`);
        if (!more && queued.findIndex(match) < 0) throw new Error(`the stream ended before ${what}`);
      }
    },
    async all(): Promise<SseEvent[]> {
      while (await pull());
      return queued.splice(0);
    },
    cancel: () => reader.cancel().catch(() => {}),
  };
}
