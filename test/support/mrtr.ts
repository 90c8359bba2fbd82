/**
 * 2026-07-28 multi-round-trip calls for tests: the v2 `Client` pinned to the revision (it
 * auto-fulfils `input_required` through its elicitation handler, or hands it back with
 * `allowInputRequired`), and raw POSTs that send exactly the `requestState` a test chooses
 * (tampered, replayed, another principal's) to any edge.
 */
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";

export const MODERN = "2026-07-28";

/** What a tool result looks like on the wire, and an `input_required` one. */
export interface WireResult {
  readonly resultType?: string;
  readonly isError?: boolean;
  readonly content?: Array<{ type: string; text?: string }>;
  readonly structuredContent?: Record<string, unknown>;
  readonly inputRequests?: Record<string, { method: string; params: Record<string, unknown> }>;
  readonly requestState?: string;
}

/** An elicitation answer a v2 client's user gives (recording the question). */
export type Answer = { action: "accept"; content: Record<string, string | number | boolean | string[]> } | { action: "decline" } | { action: "cancel" };

/**
 * The params of a manual retry through the v2 `Client` (`allowInputRequired`): the call, the
 * answers and the echoed state. The SDK sends them as given; its published params type does not
 * name the two MRTR fields.
 */
export function retryParams(
  name: string,
  args: Record<string, unknown>,
  more: { inputResponses?: Record<string, unknown>; requestState?: string | undefined },
): Parameters<V2Client["callTool"]>[0] {
  return { name, arguments: args, ...more } as Parameters<V2Client["callTool"]>[0];
}

/**
 * The v2 `Client` pinned to 2026-07-28 over HTTP, declaring `elicitation` (form, and URL when
 * asked) and answering every elicitation with `answer`, each question's message going to `asked`.
 * `autoFulfill: false` is the manual mode: `input_required` comes back to the caller.
 */
export async function modernClient(
  url: string,
  options: { headers?: Record<string, string>; answer?: Answer; asked?: string[]; url_mode?: boolean; autoFulfill?: boolean; name?: string } = {},
): Promise<V2Client> {
  const client = new V2Client(
    { name: options.name ?? "v2-mrtr", version: "1.0.0" },
    {
      capabilities: options.answer ? { elicitation: { form: {}, ...(options.url_mode ? { url: {} } : {}) } } : {},
      versionNegotiation: { mode: { pin: MODERN } },
      ...(options.autoFulfill === false ? { inputRequired: { autoFulfill: false } } : {}),
    },
  );
  if (options.answer) {
    const answer = options.answer;
    client.setRequestHandler("elicitation/create", async (req) => {
      options.asked?.push(String((req.params as { message?: string }).message));
      return answer;
    });
  }
  await client.connect(new V2Http(new URL(url), options.headers ? { requestInit: { headers: options.headers } } : {}));
  return client;
}

/** The per-request envelope of 2026-07-28. */
export function envelope(capabilities: Record<string, unknown> = { elicitation: { form: {} } }): Record<string, unknown> {
  return {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": capabilities,
    "io.modelcontextprotocol/clientInfo": { name: "raw-mrtr", version: "0" },
  };
}

/** A raw JSON-RPC error, or the tool result of a raw call. */
export type RawAnswer = { readonly error: { code: number; message: string; data?: unknown } } | { readonly result: WireResult };

let nextId = 1;

/**
 * A raw 2026-07-28 `tools/call` POST to `url` with the SEP-2243 headers, the envelope, and
 * whatever `requestState` / `inputResponses` the test gives.
 */
export async function rawToolCall(
  url: string,
  name: string,
  args: Record<string, unknown>,
  options: { headers?: Record<string, string>; requestState?: string; inputResponses?: Record<string, unknown>; capabilities?: Record<string, unknown> } = {},
): Promise<RawAnswer> {
  const params: Record<string, unknown> = {
    name,
    arguments: args,
    ...(options.requestState !== undefined ? { requestState: options.requestState } : {}),
    ...(options.inputResponses ? { inputResponses: options.inputResponses } : {}),
    _meta: envelope(options.capabilities),
  };
  const res = await fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": MODERN,
      "mcp-method": "tools/call",
      "mcp-name": name,
      ...options.headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: "tools/call", params }),
  });
  const text = await res.text();
  const message = parseBody(res.headers.get("content-type") ?? "", text);
  if (!message) throw new Error(`no JSON-RPC answer (HTTP ${res.status}): ${text.slice(0, 500)}`);
  if ("error" in message) return { error: message["error"] as { code: number; message: string; data?: unknown } };
  return { result: message["result"] as WireResult };
}

/**
 * The names of the tools a raw 2026-07-28 `tools/list` POST to `url` answers (the SEP-2243
 * headers, the envelope declaring no client capabilities, whatever `headers` adds: a key). Throws
 * naming the status and the body when it is not a 200 with a result.
 */
export async function rawToolNames(url: string, headers: Record<string, string> = {}): Promise<string[]> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": MODERN, "mcp-method": "tools/list", ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: "tools/list", params: { _meta: envelope({}) } }),
  });
  const text = await res.text();
  const message = res.status === 200 ? parseBody(res.headers.get("content-type") ?? "", text) : undefined;
  const tools = (message?.["result"] as { tools?: Array<{ name: string }> } | undefined)?.tools;
  if (!tools) throw new Error(`tools/list answered HTTP ${res.status}: ${text.slice(0, 500)}`);
  return tools.map((t) => t.name);
}

/** The JSON-RPC response in a JSON body or the last `data:` line of an event stream carrying one. */
function parseBody(contentType: string, text: string): Record<string, unknown> | undefined {
  if (contentType.includes("application/json")) return JSON.parse(text) as Record<string, unknown>;
  let found: Record<string, unknown> | undefined;
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (!data) continue;
    const message = JSON.parse(data) as Record<string, unknown>;
    if ("result" in message || "error" in message) found = message;
  }
  return found;
}

/** The result of a raw call, failing the test on a JSON-RPC error. */
export function resultOf(answer: RawAnswer): WireResult {
  if ("error" in answer) throw new Error(`JSON-RPC error ${answer.error.code}: ${answer.error.message}`);
  return answer.result;
}

/** The text of a tool result. */
export function textOf(result: WireResult): string {
  return (result.content ?? []).map((c) => c.text ?? "").join("\n");
}
