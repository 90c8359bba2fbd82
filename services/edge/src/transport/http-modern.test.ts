import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_TOOLSETS } from "@chaos-core/kit";
import { hashApiKey } from "../auth/api-keys.js";
import { authInfoOf, LOCAL_IDENTITY } from "../auth/identity.js";
import { ModernHandlers } from "./http-modern.js";
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import { InMemoryServerEventBus } from "@modelcontextprotocol/server";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { httpClient, MCP_HEADERS, openSession, postWithHost, readJsonRpc, sseStream } from "../test-support/http.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { PROMPT_DEFINITIONS } from "../prompts/index.js";
import { TOOL_DEFINITIONS } from "../tools/index.js";
import { CACHE_HINTS } from "../server/create-server.js";
import { startHttpTransport, type RunningHttpTransport } from "./http.js";

const MODERN = "2026-07-28";

let services: TestServices;
let deps: EdgeDeps;
let edge: RunningHttpTransport;

beforeAll(async () => {
  services = await startTestServices("http_modern");
  deps = services.deps(createMemorySessionStore());
  edge = await startHttpTransport(deps, { host: "127.0.0.1", port: 0 });
});

afterAll(async () => {
  await edge?.close();
  await services?.close();
});

/** The per-request envelope of 2026-07-28 (docs/protocol.md §1). */
function envelope(extra: Record<string, unknown> = {}) {
  return {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": { name: "raw-modern", version: "0" },
    ...extra,
  };
}

/** A raw 2026-07-28 POST: the headers SEP-2243 asks for, unless `headers` replaces them. */
async function modernPost(
  method: string,
  params: Record<string, unknown> = {},
  headers: Record<string, string> = {},
  meta: Record<string, unknown> = envelope(),
): Promise<{ status: number; headers: Headers; message: Record<string, unknown> | undefined }> {
  const name: Record<string, string> = typeof params["name"] === "string" ? { "mcp-name": params["name"] } : {};
  const res = await fetch(edge.url, {
    method: "POST",
    headers: { ...MCP_HEADERS, "mcp-protocol-version": String(meta["io.modelcontextprotocol/protocolVersion"]), "mcp-method": method, ...name, ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 7, method, params: { ...params, _meta: meta } }),
  });
  return { status: res.status, headers: res.headers, message: await readJsonRpc(res) };
}

describe("2026-07-28 on /mcp beside 2025-11-25", () => {
  it("answers server/discover with both revisions' fields, the cache hints and serverInfo, and no session", async () => {
    const res = await modernPost("server/discover");
    expect(res.status).toBe(200);
    expect(res.headers.get("mcp-session-id")).toBeNull();
    const result = res.message?.["result"] as Record<string, unknown>;
    expect(result["supportedVersions"]).toEqual([MODERN]);
    expect(result["resultType"]).toBe("complete");
    expect(result).toMatchObject({ ttlMs: CACHE_HINTS["server/discover"].ttlMs, cacheScope: "public" });
    // The prompt list never changes while serving: not promised. The tools change with the
    // upstream tools served (docs/federation.md §6), resources with the policy and the council
    // (the policy watch and the council publisher feed the tenant's listen streams).
    expect(result["capabilities"]).toMatchObject({
      tools: { listChanged: true },
      prompts: { listChanged: false },
      resources: { subscribe: true, listChanged: true },
      logging: {},
    });
    expect(String(result["instructions"])).toContain("governed control plane");
    expect((result["_meta"] as Record<string, unknown>)["io.modelcontextprotocol/serverInfo"]).toMatchObject({ name: "chaos-core" });
  });

  it("refuses a Mcp-Method header that disagrees with the body: 400, -32020, and no session", async () => {
    const res = await modernPost("tools/list", {}, { "mcp-method": "prompts/list" });
    expect(res.status).toBe(400);
    expect(res.message?.["error"]).toMatchObject({ code: -32020 });
    expect(res.message?.["id"]).toBe(7);
    expect(res.headers.get("mcp-session-id")).toBeNull();
    // A tools/call whose Mcp-Name names another tool than the body.
    const named = await modernPost("tools/call", { name: "chaoscore_recall", arguments: { key: "k" } }, { "mcp-name": "chaoscore_remember" });
    expect(named.status).toBe(400);
    expect(named.message?.["error"]).toMatchObject({ code: -32020 });
  });

  it("refuses a revision it does not serve: 400, -32022, naming the supported ones and the requested one", async () => {
    const res = await modernPost("tools/list", {}, {}, envelope({ "io.modelcontextprotocol/protocolVersion": "2099-01-01" }));
    expect(res.status).toBe(400);
    const error = res.message?.["error"] as { code: number; data: { supported: string[]; requested: string } };
    expect(error.code).toBe(-32022);
    expect(error.data.supported).toContain(MODERN);
    expect(error.data.requested).toBe("2099-01-01");
    expect(res.headers.get("mcp-session-id")).toBeNull();
  });

  it("answers the methods 2026-07-28 removed with 404 and -32601", async () => {
    for (const [method, params] of [
      ["ping", {}],
      ["logging/setLevel", { level: "debug" }],
      ["resources/subscribe", { uri: "chaoscore://policy" }],
    ] as const) {
      const res = await modernPost(method, params);
      expect(res.status, method).toBe(404);
      expect(res.message?.["error"], method).toMatchObject({ code: -32601 });
      expect(res.headers.get("mcp-session-id"), method).toBeNull();
    }
  });

  it("refuses a request without the required envelope fields: 400, -32602", async () => {
    const res = await modernPost("tools/list", {}, {}, { "io.modelcontextprotocol/protocolVersion": MODERN });
    expect(res.status).toBe(400);
    expect(res.message?.["error"]).toMatchObject({ code: -32602 });
  });

  it("lists the same tools and prompts as a 2025-11-25 session, with the cache hints, never opening a session", async () => {
    const tools = await modernPost("tools/list");
    expect(tools.status).toBe(200);
    expect(tools.headers.get("mcp-session-id")).toBeNull();
    const listed = tools.message?.["result"] as { tools: { name: string }[]; ttlMs: number; cacheScope: string };
    expect(listed).toMatchObject({ ttlMs: 60_000, cacheScope: "private" });
    const prompts = await modernPost("prompts/list");
    const promptList = prompts.message?.["result"] as { prompts: { name: string }[]; ttlMs: number; cacheScope: string };
    expect(promptList).toMatchObject({ ttlMs: 300_000, cacheScope: "public" });

    const { client } = await httpClient(edge.url);
    try {
      const legacyTools = (await client.listTools()).tools;
      expect(listed.tools.map((t) => t.name)).toEqual(legacyTools.map((t) => t.name));
      // The default toolsets: this tenant's operator chose none.
      expect(listed.tools.map((t) => t.name).sort()).toEqual(TOOL_DEFINITIONS.filter((t) => (DEFAULT_TOOLSETS as readonly string[]).includes(t.toolset)).map((t) => t.name).sort());
      // The same published schemas and descriptions on both revisions.
      const byName = new Map(legacyTools.map((t) => [t.name, t]));
      for (const tool of listed.tools as unknown as { name: string; description: string; inputSchema: unknown }[]) {
        expect(tool.description).toBe(byName.get(tool.name)?.description);
        expect(tool.inputSchema).toEqual(byName.get(tool.name)?.inputSchema);
      }
      const legacyPrompts = (await client.listPrompts()).prompts;
      expect(promptList.prompts.map((p) => p.name)).toEqual(legacyPrompts.map((p) => p.name));
      expect(promptList.prompts).toHaveLength(PROMPT_DEFINITIONS.length);
    } finally {
      await client.close();
    }
  });

  it("still gives a 2025-11-25 initialize its session on the same endpoint", async () => {
    const id = await openSession(edge.url);
    expect(id).toMatch(/^[\x21-\x7e]+$/);
    expect(edge.localSessionCount()).toBeGreaterThan(0);
  });

  it("serves the v2 Client pinned to 2026-07-28: memory round trip, a request of its own, no session", async () => {
    const client = new V2Client({ name: "v2-pinned", version: "1" }, { versionNegotiation: { mode: { pin: MODERN } } });
    const transport = new V2Http(new URL(edge.url));
    await client.connect(transport);
    try {
      expect(client.getProtocolEra()).toBe("modern");
      expect(transport.sessionId).toBeUndefined();
      const stored = await client.callTool({ name: "chaoscore_remember", arguments: { key: "modern-http", value: { n: 1 } } });
      expect(stored.isError).toBeFalsy();
      const recalled = await client.callTool({ name: "chaoscore_recall", arguments: { key: "modern-http" } });
      expect(recalled.structuredContent).toMatchObject({ items: [{ key: "modern-http", value: { n: 1 } }] });
      const first = await client.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } });
      const second = await client.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } });
      const a = (first.structuredContent as { request: { request_ref: string; protocol_version: string; client_info: unknown } }).request;
      const b = (second.structuredContent as { request: { request_ref: string } }).request;
      expect(first.structuredContent).toMatchObject({ what: "sessions", available: true });
      expect((first.structuredContent as { session?: unknown }).session).toBeUndefined();
      expect(a.protocol_version).toBe(MODERN);
      expect(a.client_info).toMatchObject({ name: "v2-pinned" });
      // 128 random bits, base64url, minted per request.
      expect(a.request_ref).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(b.request_ref).not.toBe(a.request_ref);
    } finally {
      await client.close();
    }
  });

  it("sends log notifications only at or above the request's logLevel, and none without one", async () => {
    const call = (meta: Record<string, unknown>) =>
      fetch(edge.url, {
        method: "POST",
        headers: { ...MCP_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "chaoscore_remember" },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 9,
          method: "tools/call",
          params: { name: "chaoscore_remember", arguments: { key: "logged", value: 1 }, _meta: meta },
        }),
      }).then((r) => r.text());
    // chaoscore_remember logs "policy allows memory.write" at debug.
    expect(await call(envelope({ "io.modelcontextprotocol/logLevel": "debug" }))).toContain("notifications/message");
    expect(await call(envelope())).not.toContain("notifications/message");
    expect(await call(envelope({ "io.modelcontextprotocol/logLevel": "warning" }))).not.toContain("notifications/message");
  });
});

describe("subscriptions/listen (2026-07-28) fed by the policy watch and the council publisher", () => {
  it("acknowledges what it honours, then sends resources/updated for a policy change and list changes, stamped with its id", async () => {
    const res = await fetch(edge.url, {
      method: "POST",
      headers: { ...MCP_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: "listen-1",
        method: "subscriptions/listen",
        params: {
          notifications: { toolsListChanged: true, resourcesListChanged: true, resourceSubscriptions: ["chaoscore://policy"] },
          _meta: envelope(),
        },
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
    const stream = sseStream(res);
    try {
      const ack = await stream.next((e) => e.message !== undefined, "the acknowledgement");
      expect(ack.message).toMatchObject({ method: "notifications/subscriptions/acknowledged" });
      // All of it is honoured: the tools change with the upstream tools served.
      expect((ack.message?.["params"] as { notifications: unknown }).notifications).toEqual({
        toolsListChanged: true,
        resourcesListChanged: true,
        resourceSubscriptions: ["chaoscore://policy"],
      });
      await services.putPolicy("default", { requireConfirmationFor: ["http.request"] });
      const updated = await stream.next((e) => e.message?.["method"] === "notifications/resources/updated", "resources/updated");
      expect(updated.message?.["params"]).toMatchObject({
        uri: "chaoscore://policy",
        _meta: { "io.modelcontextprotocol/subscriptionId": "listen-1" },
      });
      const started = await modernPost("tools/call", { name: "council_init", arguments: { task: "decide the listen test" } });
      expect((started.message?.["result"] as { isError?: boolean }).isError).toBeFalsy();
      const changed = await stream.next((e) => typeof e.message?.["method"] === "string", "a notification");
      expect(changed.message).toMatchObject({
        method: "notifications/resources/list_changed",
        params: { _meta: { "io.modelcontextprotocol/subscriptionId": "listen-1" } },
      });
    } finally {
      await stream.cancel();
      await services.putPolicy("default", {});
    }
  });
});

describe("2026-07-28 behind the same checks as 2025-11-25", () => {
  const body = (args: unknown) =>
    `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"chaoscore_recall","arguments":${args},"_meta":${JSON.stringify(envelope())}}}`;
  const headers = { ...MCP_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "chaoscore_recall" };

  it("refuses a foreign Host before the request is classified", async () => {
    const status = await postWithHost(edge.url, "evil.example", headers, JSON.parse(body('{"key":"k"}')));
    expect(status).toBe(403);
  });

  it("screens the body first: a NaN literal is refused with the request's id, an unknown tool as on 2025-11-25", async () => {
    const nan = await fetch(edge.url, { method: "POST", headers, body: body('{"key":NaN}') });
    expect(nan.status).toBe(400);
    expect(await nan.json()).toMatchObject({ id: 11, error: { code: -32700 } });
    const deep = await fetch(edge.url, { method: "POST", headers, body: body(`{"key":"k","tags":${"[".repeat(200)}${"]".repeat(200)}}`) });
    // The structural screen found it before dispatch; the handler answers it, with resultType.
    const refused = (await readJsonRpc(deep))?.["result"] as { isError: boolean; resultType: string; structuredContent: { error: { code: string; message: string } } };
    expect(refused).toMatchObject({ isError: true, resultType: "complete", structuredContent: { error: { code: "invalid_argument" } } });
    expect(refused.structuredContent.error.message).toContain("nests deeper than 64 levels");
    expect(deep.headers.get("mcp-session-id")).toBeNull();
    // Our guard's protocol refusal: HTTP 200 on this leg (docs/protocol.md §14 feared a 400).
    const unknown = await modernPost("tools/call", { name: "no_such_tool", arguments: {} });
    expect(unknown.status).toBe(200);
    expect(unknown.message?.["error"]).toMatchObject({ code: -32602, message: "Unknown tool: no_such_tool" });
  });
});

describe("2026-07-28 with API keys: tenant and principal from the key only", () => {
  const keyA = randomBytes(24).toString("base64url");
  const keyB = randomBytes(24).toString("base64url");
  let keyed: RunningHttpTransport;

  beforeAll(async () => {
    keyed = await startHttpTransport(deps, {
      host: "127.0.0.1",
      port: 0,
      apiKeys: [
        { tenant: "acme", principal: "ci-bot", sha256: hashApiKey(keyA) },
        { tenant: "globex", principal: "ops", sha256: hashApiKey(keyB) },
      ],
    });
  });

  afterAll(async () => {
    await keyed?.close();
  });

  it("refuses a modern request without a key (401) before any handler exists", async () => {
    const res = await fetch(keyed.url, {
      method: "POST",
      headers: { ...MCP_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "server/discover" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: envelope() } }),
    });
    expect(res.status).toBe(401);
    expect(keyed.modernTenantCount()).toBe(0);
  });

  it("serves each key as its own tenant and principal, one handler per tenant", async () => {
    const inspect = async (key: string) => {
      const client = new V2Client({ name: "v2-keyed", version: "1" }, { versionNegotiation: { mode: { pin: MODERN } } });
      await client.connect(new V2Http(new URL(keyed.url), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
      try {
        await client.callTool({ name: "chaoscore_remember", arguments: { key: "whose", value: key === keyA ? "a" : "b" } });
        return (await client.callTool({ name: "chaoscore_recall", arguments: { key: "whose" } })).structuredContent;
      } finally {
        await client.close();
      }
    };
    expect(await inspect(keyA)).toMatchObject({ items: [{ key: "whose", value: "a" }] });
    expect(await inspect(keyB)).toMatchObject({ items: [{ key: "whose", value: "b" }] });
    // Each tenant kept its own value: acme's was not overwritten by globex's.
    expect(await inspect(keyA)).toMatchObject({ items: [{ key: "whose", value: "a" }] });
    expect(keyed.modernTenantCount()).toBe(2);
  });
});

describe("per-tenant 2026-07-28 handlers are let go when idle", () => {
  const IDLE_MS = 60_000;
  let handlers: ModernHandlers;
  let server: Server;
  let url: string;
  /** When set, the server sweeps as of this time right after handing each request over. */
  let sweepWhileServing: number | undefined;
  const sweptWhileServing: number[] = [];

  beforeAll(async () => {
    handlers = new ModernHandlers(deps, { maxBodyBytes: 1 << 20, idleMs: IDLE_MS, bus: () => new InMemoryServerEventBus() });
    // The leg alone, behind what http.ts puts in front of it: a parsed body and a verified identity.
    server = createServer((req: IncomingMessage & { auth?: ReturnType<typeof authInfoOf> }, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        req.auth = authInfoOf(LOCAL_IDENTITY);
        void handlers.serve(req, res, JSON.parse(Buffer.concat(chunks).toString("utf8")));
        if (sweepWhileServing !== undefined) sweptWhileServing.push(handlers.sweepIdle(sweepWhileServing));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });

  afterAll(async () => {
    await handlers?.closeAll();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => server?.close(() => resolve()));
  });

  const post = (method: string, params: Record<string, unknown>, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: "POST",
      headers: { ...MCP_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": method, ...headers },
      body: JSON.stringify({ jsonrpc: "2.0", id: 3, method, params: { ...params, _meta: envelope() } }),
    });

  it("keeps a used handler, closes it once idle, and makes a new one on the next request", async () => {
    const first = await post("server/discover", {});
    expect(first.status).toBe(200);
    await first.text();
    expect(handlers.size).toBe(1);
    expect(handlers.sweepIdle(Date.now())).toBe(0);
    expect(handlers.size).toBe(1);
    // The server counts the request answered once its response closed, just after the client read it.
    await expect.poll(() => (handlers.sweepIdle(Date.now() + IDLE_MS + 1), handlers.size)).toBe(0);
    const again = await post("tools/list", {});
    expect(again.status).toBe(200);
    expect((await readJsonRpc(again))?.["result"]).toMatchObject({ tools: expect.any(Array) });
    expect(handlers.size).toBe(1);
  });

  it("never closes a handler while one of its requests is being answered", async () => {
    const later = Date.now() + 10 * IDLE_MS;
    sweepWhileServing = later;
    try {
      const res = await post("tools/call", { name: "chaoscore_recall", arguments: { key: "nothing-here" } }, { "mcp-name": "chaoscore_recall" });
      expect(res.status).toBe(200);
      expect((await readJsonRpc(res))?.["result"]).toMatchObject({ structuredContent: { items: [] } });
    } finally {
      sweepWhileServing = undefined;
    }
    // Swept the moment the request was handed over, far past the idle time: nothing closed.
    expect(sweptWhileServing).toEqual([0]);
    expect(handlers.size).toBe(1);
    // Once it was answered, the same sweep closes it.
    await expect.poll(() => (handlers.sweepIdle(later), handlers.size)).toBe(0);
  });
});
