/**
 * The one place the edge depends on how the SDK restores a session's state from its `initialize`.
 *
 * Why: the SDK's Streamable HTTP transport keeps a session in memory (typescript-sdk issues
 * #330, #843), so a replica that did not see a session's `initialize` answers 404 for it.
 * To let any replica serve any session, the edge rehydrates: it builds a fresh server and
 * transport for the stored session and replays the client's original `initialize` into them,
 * locally. The SDK's own code then sets everything initialize sets (the transport's session id
 * and initialized flag, the server's client capabilities and client info), so nothing is
 * copied field by field. With SDK v2 the edge holds the web-standard transport itself, so the
 * replay goes through its public `handleRequest(Request, { parsedBody })`: no private member is
 * read any more (v1 needed the Node wrapper's `_webStandardTransport`). What stays SDK-specific
 * is the expectation that the replay leaves exactly that state; the checks below say so.
 *
 * `sdk-internals.test.ts` fails loudly if an SDK upgrade changes any of this.
 */
import type { InitializeRequest, McpServer, WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/server";
import type { SessionRecord } from "../sessions/session-store.js";

const REPLAY_ID = "chaoscore-rehydrate";

/**
 * Makes `transport` (connected to `server`, built with a session id generator that returns
 * `record.id`) serve the stored session as if it had seen its `initialize`. Throws when the
 * SDK does not end up in that state.
 */
export async function replayInitialize(
  server: McpServer,
  transport: WebStandardStreamableHTTPServerTransport,
  record: SessionRecord,
): Promise<void> {
  const message: InitializeRequest & { jsonrpc: "2.0"; id: string } = {
    jsonrpc: "2.0",
    id: REPLAY_ID,
    method: "initialize",
    params: {
      protocolVersion: record.protocolVersion,
      // The record holds what the client declared, as JSON: exactly what the SDK parsed from it.
      capabilities: { ...record.clientCapabilities } as InitializeRequest["params"]["capabilities"],
      clientInfo: { ...record.clientInfo },
    },
  };
  const request = new Request("http://127.0.0.1/mcp", {
    method: "POST",
    headers: { accept: "application/json, text/event-stream", "content-type": "application/json" },
    body: JSON.stringify(message),
  });
  const response = await transport.handleRequest(request, { parsedBody: message });
  // The body ends once the server has answered the replayed initialize; the answer is discarded.
  const body = await response.text();
  if (response.status !== 200 || !body.includes(`"id":"${REPLAY_ID}"`) || !body.includes('"result"')) {
    throw new Error(`replaying initialize failed (HTTP ${response.status}): ${body.slice(0, 300)}`);
  }
  if (transport.sessionId !== record.id) {
    throw new Error(
      `@modelcontextprotocol/server changed: a replayed initialize left session id ${String(transport.sessionId)}, ` +
        `not ${record.id}; update services/edge/src/transport/sdk-internals.ts`,
    );
  }
  if (server.server.getClientVersion()?.name !== record.clientInfo.name) {
    throw new Error(
      "@modelcontextprotocol/server changed: a replayed initialize did not restore the client info; " +
        "update services/edge/src/transport/sdk-internals.ts",
    );
  }
}
