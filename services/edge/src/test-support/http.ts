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
  sseStream,
} from "../../../../test/support/mcp-http.js";
export type { SseEvent } from "../../../../test/support/mcp-http.js";

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

