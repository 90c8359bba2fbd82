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
