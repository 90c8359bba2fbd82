import { expect } from "vitest";
import { MCP_HEADERS } from "./mcp-http.js";

// Streams a test watches the server end: a revoked key, a disabled tenant, an expired token.

/**
 * How long a test waits for a stream to end: the edge re-checks open streams' credentials every
 * second (CREDENTIAL_RECHECK_MS, docs/tenants.md); the rest is slack for a loaded machine. A
 * stream that outlives it was not ended by the change, the failure this looks for.
 */
export const STREAM_END_WAIT_MS = 8_000;

/** Polls `check` until it holds, failing after `timeoutMs` naming what it waited for. */
export async function eventually(check: () => boolean, what: string, timeoutMs = STREAM_END_WAIT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A response body read to its end in the background: whether the server has ended it. */
export function readToEnd(res: Response): { ended: () => boolean; cancel: () => Promise<void> } {
  const reader = res.body!.getReader();
  let ended = false;
  void (async () => {
    while (!(await reader.read()).done);
  })()
    .catch(() => undefined)
    .finally(() => (ended = true));
  return { ended: () => ended, cancel: () => reader.cancel().catch(() => undefined) };
}

/** What a listen stream asks for unless told otherwise: the policy resource and resource list changes. */
const POLICY_AND_RESOURCES = { resourcesListChanged: true, resourceSubscriptions: ["chaoscore://policy"] };

/**
 * Opens a 2026-07-28 `subscriptions/listen` request on `url` with `headers` (the credential) — to
 * `notifications` (the policy resource and list changes by default) — and returns the response,
 * its SSE stream unread.
 */
export function postListen(url: string, headers: Record<string, string>, id: string | number = "listen", notifications: Record<string, unknown> = POLICY_AND_RESOURCES): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { ...MCP_HEADERS, ...headers, "mcp-protocol-version": "2026-07-28", "mcp-method": "subscriptions/listen" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id,
      method: "subscriptions/listen",
      params: {
        notifications,
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {},
          "io.modelcontextprotocol/clientInfo": { name: "listen-e2e", version: "0" },
        },
      },
    }),
  });
}

/** A 2026-07-28 `subscriptions/listen` stream held open with `key`, once acknowledged. */
export async function listenStream(url: string, key: string): Promise<{ ended: () => boolean; cancel: () => Promise<void> }> {
  const res = await postListen(url, { Authorization: `Bearer ${key}` });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  return readToEnd(res);
}
