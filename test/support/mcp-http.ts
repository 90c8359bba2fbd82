/** Raw Streamable HTTP requests, for the cases an SDK client would never send. */

export const MCP_HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
};

export const PROTOCOL_VERSION = "2025-11-25";

export function initializeBody(id = 1) {
  return {
    jsonrpc: "2.0",
    id,
    method: "initialize",
    params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "raw", version: "0" } },
  };
}

/** Reads a JSON-RPC message from a JSON or SSE response body. */
export async function readJsonRpc(res: Response): Promise<Record<string, unknown> | undefined> {
  const text = await res.text();
  if (!text) return undefined;
  if ((res.headers.get("content-type") ?? "").includes("text/event-stream")) {
    const data = text
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).trim())
      .filter(Boolean);
    return data.length ? (JSON.parse(data[data.length - 1]!) as Record<string, unknown>) : undefined;
  }
  return JSON.parse(text) as Record<string, unknown>;
}

/** Initializes a session with raw requests and returns its id. */
export async function openSession(url: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(url, { method: "POST", headers: { ...MCP_HEADERS, ...headers }, body: JSON.stringify(initializeBody()) });
  if (res.status !== 200) throw new Error(`initialize failed: ${res.status} ${await res.text()}`);
  const id = res.headers.get("mcp-session-id");
  await res.text();
  if (!id) throw new Error("no Mcp-Session-Id");
  await fetch(url, {
    method: "POST",
    headers: { ...MCP_HEADERS, ...headers, "mcp-session-id": id, "mcp-protocol-version": PROTOCOL_VERSION },
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  }).then((r) => r.text());
  return id;
}

/** Sends one JSON-RPC request on a session and returns status and message. */
export async function rpc(
  url: string,
  sessionId: string | undefined,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; message: Record<string, unknown> | undefined }> {
  const res = await fetch(url, {
    method: "POST",
    headers: {
      ...MCP_HEADERS,
      "mcp-protocol-version": PROTOCOL_VERSION,
      ...(sessionId ? { "mcp-session-id": sessionId } : {}),
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, message: await readJsonRpc(res).catch(() => undefined) };
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
