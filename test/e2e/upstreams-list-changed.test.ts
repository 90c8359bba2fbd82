import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ToolListChangedNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { MCP_HEADERS, sseStream } from "../support/mcp-http.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, stdioClient, tempDir, type ServeProcess } from "../support/processes.js";
import { eventually, postListen } from "../support/streams.js";

/**
 * Issue 32 item 4: when the upstream tools a tenant is offered change — here a tool quarantined
 * because its upstream changed it past its pin, then served again when the upstream goes back —
 * `notifications/tools/list_changed` reaches the client: a 2025-11-25 session over Streamable
 * HTTP (its GET stream) and over stdio, a 2026-07-28 `subscriptions/listen` stream. A stdio
 * connection answers before its stores open; the upstream tools read after that join its list.
 */

const CHANGING = join(ROOT, "test/support/upstreams/changing-server.mjs");
const object = (properties: Record<string, unknown>, required: string[]) => ({ type: "object", properties, required });
const tools = (echoRequired: string[]) => ({
  tools: [
    { name: "echo", description: "Echoes its message back", inputSchema: object({ message: { type: "string" }, to: { type: "string" } }, echoRequired), annotations: { readOnlyHint: true, openWorldHint: false } },
    { name: "ping", description: "Answers pong.", inputSchema: object({}, []), annotations: { readOnlyHint: true, openWorldHint: false } },
  ],
});
const PINNED = tools(["message"]);
const BREAKING = tools(["message", "to"]);

/** A client of the SDK counting the list_changed notifications it hears. */
function counting(client: Client): () => number {
  let heard = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => void (heard += 1));
  return () => heard;
}

const names = async (client: Client) => (await client.listTools()).tools.map((t) => t.name);

describe("the upstream tools change while clients are connected", () => {
  const dir = tempDir("chaos-core-list-changed-");
  const definitions = join(dir, "changing-tools.json");
  const env = { CHAOS_CORE_DATA_DIR: dir };

  beforeAll(async () => {
    await seedDataDir(dir);
    writeFileSync(definitions, JSON.stringify(PINNED));
    writeFileSync(join(dir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "changing", command: process.execPath, args: [CHANGING, definitions] }] }));
    const locked = await runToExit(["upstreams", "lock"], env, 60_000);
    expect(locked.code, locked.stderr).toBe(0);
  }, 120_000);

  afterAll(() => removeDir(dir));

  describe("over Streamable HTTP", () => {
    let serve: ServeProcess;
    let client: Client;

    beforeAll(async () => {
      writeFileSync(definitions, JSON.stringify(PINNED));
      serve = await startServe(env);
      client = await httpClient(serve.url);
    }, 120_000);

    afterAll(async () => {
      await client?.close().catch(() => {});
      await serve?.stop();
    });

    it("2026-07-28 discover promises tools.listChanged where change events are delivered", async () => {
      const res = await fetch(serve.url, {
        method: "POST",
        headers: { ...MCP_HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "server/discover",
          params: { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": { name: "e2e", version: "0" } } },
        }),
      });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(text).toMatch(/"tools":\{"listChanged":true\}/);
    });

    it("tells a 2025-11-25 session and a 2026-07-28 listen stream when a tool is quarantined and when it is served again", async () => {
      const heard = counting(client);
      const res = await postListen(serve.url, {}, "listen-tools", { toolsListChanged: true });
      expect(res.status).toBe(200);
      const stream = sseStream(res);
      const ack = await stream.next((e) => e.message !== undefined, "the acknowledgement");
      expect(ack.message).toMatchObject({ method: "notifications/subscriptions/acknowledged", params: { notifications: { toolsListChanged: true } } });
      const isToolsChanged = (e: { message?: Record<string, unknown> }) => e.message?.["method"] === "notifications/tools/list_changed";

      // The first call opens the upstream's connection, whose tools are then watched.
      expect(((await client.callTool({ name: "changing__ping", arguments: {} })) as CallToolResult).isError).toBeFalsy();
      expect(await names(client)).toContain("changing__echo");

      writeFileSync(definitions, JSON.stringify(BREAKING));
      await eventually(() => heard() >= 1, "the session to hear tools/list_changed after the quarantine", 20_000);
      await stream.next(isToolsChanged, "tools/list_changed on the listen stream after the quarantine", 20_000);
      expect(await names(client)).not.toContain("changing__echo");
      expect(await names(client)).toContain("changing__ping");

      // The upstream goes back to what was pinned: served again, and said so.
      const before = heard();
      writeFileSync(definitions, JSON.stringify(PINNED));
      await eventually(() => heard() > before, "the session to hear tools/list_changed when the tool is served again", 20_000);
      await stream.next(isToolsChanged, "tools/list_changed on the listen stream when the tool is served again", 20_000);
      expect(await names(client)).toContain("changing__echo");
    }, 90_000);
  });

  it("over stdio: the upstream tools read once the stores open join the session's list, and a quarantine is announced", async () => {
    writeFileSync(definitions, JSON.stringify(PINNED));
    const { client, stderr } = await stdioClient(env);
    try {
      const heard = counting(client);
      const first = await names(client);
      // The list answered before the stores opened lacks them; the client is then told to list again.
      if (!first.includes("changing__echo")) await eventually(() => heard() >= 1, "tools/list_changed once the upstream tools are read", 60_000);
      expect(await names(client), stderr()).toEqual(expect.arrayContaining(["changing__echo", "changing__ping"]));

      expect(((await client.callTool({ name: "changing__ping", arguments: {} })) as CallToolResult).isError, stderr()).toBeFalsy();
      const before = heard();
      writeFileSync(definitions, JSON.stringify(BREAKING));
      await eventually(() => heard() > before, "tools/list_changed after the quarantine", 20_000);
      expect(await names(client)).not.toContain("changing__echo");
    } finally {
      await client.close().catch(() => {});
      writeFileSync(definitions, JSON.stringify(PINNED));
    }
  }, 120_000);
});
