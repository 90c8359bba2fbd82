import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChaosError, DEFAULT_TOOLSETS } from "@chaos-core/kit";
import { hashApiKey } from "../auth/api-keys.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import {
  httpClient,
  initializeBody,
  listTools,
  MCP_HEADERS,
  openSession,
  postWithHost,
  PROTOCOL_VERSION,
  readJsonRpc,
  rpc,
  sseStream,
  toolCall,
} from "../test-support/http.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { TOOL_DEFINITIONS } from "../tools/index.js";
import { startHttpTransport, type RunningHttpTransport } from "./http.js";
import { SSE_RETRY_MS } from "./http-sessions.js";

let services: TestServices;

beforeAll(async () => {
  services = await startTestServices("http");
});

afterAll(async () => {
  await services?.close();
});

describe("Streamable HTTP on loopback, without API keys", () => {
  let deps: EdgeDeps;
  let edge: RunningHttpTransport;
  let session: string;

  beforeAll(async () => {
    deps = services.deps(createMemorySessionStore());
    edge = await startHttpTransport(deps, { host: "127.0.0.1", port: 0 });
    session = await openSession(edge.url);
  });

  afterAll(async () => {
    await edge?.close();
  });

  /** After every refused request the same session must still be served. */
  async function stillServing() {
    const res = await rpc(edge.url, session, listTools);
    expect(res.status).toBe(200);
    // The local user's tenant chose no toolsets: the default ones.
    expect((res.message?.result as { tools: unknown[] }).tools).toHaveLength(TOOL_DEFINITIONS.filter((t) => (DEFAULT_TOOLSETS as readonly string[]).includes(t.toolset)).length);
  }

  it("serves a real SDK client: initialize, tools, and the local tenant", async () => {
    const { client } = await httpClient(edge.url);
    expect(client.getServerVersion()).toMatchObject({ name: "chaos-core", version: "0.0.0-test" });
    const stored = await client.callTool({ name: "chaoscore_remember", arguments: { key: "over-http", value: [1, 2] } });
    expect(stored.isError).toBeFalsy();
    const recalled = await client.callTool({ name: "chaoscore_recall", arguments: { key: "over-http" } });
    expect((recalled.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value).toEqual([1, 2]);
    const inspected = await client.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } });
    expect(inspected.structuredContent).toMatchObject({
      session: { tenant: "default", principal: "local", transport: "http", client_info: { name: "edge-http-test" } },
    });
    await client.close();
  });

  it("answers a non-initialize request without a session id with 400", async () => {
    const res = await rpc(edge.url, undefined, listTools);
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.message)).toMatch(/Mcp-Session-Id/);
    const get = await fetch(edge.url, { headers: { accept: "text/event-stream" } });
    expect(get.status).toBe(400);
    await stillServing();
  });

  it("answers an unknown session id with 404", async () => {
    expect((await rpc(edge.url, "no-such-session", listTools)).status).toBe(404);
    expect((await rpc(edge.url, "bad id with spaces", listTools)).status).toBe(404);
    await stillServing();
  });

  it("ends a session on DELETE, everywhere, after which it is 404", async () => {
    const other = await openSession(edge.url);
    expect(await deps.sessions.get("default", other)).toBeDefined();
    const del = await fetch(edge.url, { method: "DELETE", headers: { "mcp-session-id": other } });
    expect(del.status).toBe(200);
    expect(await deps.sessions.get("default", other)).toBeUndefined();
    expect((await rpc(edge.url, other, listTools)).status).toBe(404);
    expect((await fetch(edge.url, { method: "DELETE", headers: { "mcp-session-id": other } })).status).toBe(404);
    await stillServing();
  });

  it("keeps no record of an initialize the SDK refuses", async () => {
    const before = (await deps.sessions.listByTenant("default")).length;
    const res = await rpc(edge.url, undefined, [initializeBody(1), initializeBody(2)]);
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.message)).toMatch(/Only one initialization request/);
    expect(await deps.sessions.listByTenant("default")).toHaveLength(before);
    expect(edge.localSessionCount()).toBe(before);
    await stillServing();
  });

  it("refuses a foreign Host with 403", async () => {
    const headers = { ...MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION };
    expect(await postWithHost(edge.url, "evil.example", headers, listTools)).toBe(403);
    expect(await postWithHost(edge.url, "evil.example:80", MCP_HEADERS, initializeBody())).toBe(403);
    expect(await postWithHost(edge.url, new URL(edge.url).host, headers, listTools)).toBe(200);
    await stillServing();
  });

  it("refuses a foreign browser Origin with 403 and accepts a loopback one", async () => {
    expect((await rpc(edge.url, session, listTools, { origin: "https://evil.example" })).status).toBe(403);
    expect((await rpc(edge.url, session, listTools, { origin: "null" })).status).toBe(403);
    expect((await rpc(edge.url, session, listTools, { origin: "http://localhost:5173" })).status).toBe(200);
    await stillServing();
  });

  it("refuses a body over 4 MiB with 413 and a JSON-RPC error", async () => {
    const huge = toolCall(3, "chaoscore_remember", { key: "big", value: "x".repeat(4 * 1024 * 1024 + 1) });
    const res = await rpc(edge.url, session, huge);
    expect(res.status).toBe(413);
    expect(res.message).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 } });
    expect(JSON.stringify(res.message)).toMatch(/4194304 bytes/);
    await stillServing();
  });

  it("accepts a body well over body-parser's 100 kB default", async () => {
    const res = await rpc(edge.url, session, toolCall(4, "chaoscore_remember", { key: "large", value: "y".repeat(512 * 1024) }));
    expect(res.status).toBe(200);
    expect((res.message?.result as { isError?: boolean }).isError).toBeFalsy();
  });

  it("answers malformed JSON with a JSON-RPC parse error", async () => {
    const res = await rpc(edge.url, session, "{not json");
    expect(res.status).toBe(400);
    expect(res.message).toMatchObject({ error: { code: -32700 } });
    await stillServing();
  });

  it("names the argument that fails a tool's schema", async () => {
    const res = await rpc(edge.url, session, toolCall(5, "chaoscore_remember", { key: 42, value: "v" }));
    expect(res.status).toBe(200);
    const result = res.message?.result as { isError: boolean; content: Array<{ text: string }> };
    expect(result.isError).toBe(true);
    expect(result.content[0]!.text).toBe("invalid_argument: key: expected string, got number");
    await stillServing();
  });

  it("answers a body that is not JSON with 415", async () => {
    const headers = { accept: MCP_HEADERS.accept, "content-type": "text/plain" };
    const init = await fetch(edge.url, { method: "POST", headers, body: JSON.stringify(initializeBody()) });
    expect(init.status).toBe(415);
    const call = await fetch(edge.url, {
      method: "POST",
      headers: { ...headers, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION },
      body: JSON.stringify(listTools),
    });
    expect(call.status).toBe(415);
    await stillServing();
  });

  it("answers other methods with 405", async () => {
    const res = await fetch(edge.url, { method: "PUT", headers: { "mcp-session-id": session } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, POST, DELETE");
    await stillServing();
  });

  it("serves /healthz and /readyz outside /mcp", async () => {
    const base = edge.url.replace(/\/mcp$/, "");
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      status: "ready",
      checks: { policy: { ok: true }, memory: { ok: true }, cognition: { ok: true }, council: { ok: true }, sessions: { ok: true } },
    });
  });
});

describe("readiness", () => {
  it("is 503 when a service of its own process (the standalone's) does not answer", async () => {
    const deps = services.deps(createMemorySessionStore());
    const broken = { ...deps, policy: { ...deps.policy, getPolicy: () => Promise.reject(new Error("connection refused")) } };
    const edge = await startHttpTransport(broken, { port: 0 });
    try {
      const res = await fetch(edge.url.replace(/\/mcp$/, "/readyz"));
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ status: "not ready", checks: { policy: { ok: false }, memory: { ok: true } } });
    } finally {
      await edge.close();
    }
  });

  it("stays ready, degraded, when a service of the edge alone does not answer, naming it", async () => {
    const deps = services.deps(createMemorySessionStore());
    const broken = { ...deps, servicesRemote: true, memory: { ...deps.memory, stats: () => Promise.reject(new ChaosError("unavailable", "the memory service is unreachable")) } };
    const edge = await startHttpTransport(broken, { port: 0 });
    try {
      const res = await fetch(edge.url.replace(/\/mcp$/, "/readyz"));
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ status: "degraded", checks: { memory: { ok: false, error: "unavailable" }, policy: { ok: true } } });
    } finally {
      await edge.close();
    }
  });

  it("stays ready, degraded, when only the session store (Redis) is out of reach, so Kubernetes keeps routing to it", async () => {
    const broken = services.deps({
      ...createMemorySessionStore(),
      ping: () => Promise.reject(new ChaosError("unavailable", "Redis is unavailable")),
    });
    const edge = await startHttpTransport(broken, { port: 0 });
    try {
      const res = await fetch(edge.url.replace(/\/mcp$/, "/readyz"));
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        status: "degraded",
        checks: { sessions: { ok: false, error: "unavailable" }, policy: { ok: true } },
      });
    } finally {
      await edge.close();
    }
  });
});

describe("idle sessions", () => {
  it("expire in the store and are dropped from this replica", async () => {
    const deps = services.deps(createMemorySessionStore({ ttlSeconds: 1 }));
    const edge = await startHttpTransport(deps, { port: 0, sweepIntervalMs: 100 });
    try {
      const idle = await openSession(edge.url);
      expect(edge.localSessionCount()).toBe(1);
      await new Promise((r) => setTimeout(r, 1500));
      expect(edge.localSessionCount()).toBe(0);
      expect((await rpc(edge.url, idle, listTools)).status).toBe(404);
    } finally {
      await edge.close();
    }
  });
});

describe("binding beyond loopback", () => {
  it("refuses to start without API keys, and says why", async () => {
    await expect(startHttpTransport(services.deps(), { host: "0.0.0.0", port: 0 })).rejects.toThrow(
      /refusing to serve MCP on 0\.0\.0\.0 without API keys or OAuth: set CHAOS_CORE_API_KEYS_FILE or CHAOS_CORE_OAUTH_ISSUER/,
    );
  });

  it("starts with API keys", async () => {
    const edge = await startHttpTransport(services.deps(), {
      host: "0.0.0.0",
      port: 0,
      apiKeys: [{ tenant: "acme", principal: "svc", sha256: hashApiKey("k".repeat(40)) }],
    });
    await edge.close();
  });
});

describe("API keys", () => {
  const keyA = randomBytes(24).toString("base64url");
  const keyA2 = randomBytes(24).toString("base64url");
  const keyB = randomBytes(24).toString("base64url");
  const tenantA = `tenant-a-${randomBytes(3).toString("hex")}`;
  const tenantB = `tenant-b-${randomBytes(3).toString("hex")}`;
  const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
  let edge: RunningHttpTransport;

  beforeAll(async () => {
    edge = await startHttpTransport(services.deps(createMemorySessionStore()), {
      port: 0,
      apiKeys: [
        { tenant: tenantA, principal: "alice", sha256: hashApiKey(keyA) },
        { tenant: tenantA, principal: "agent-2", sha256: hashApiKey(keyA2) },
        { tenant: tenantB, principal: "bob", sha256: hashApiKey(keyB) },
      ],
    });
  });

  afterAll(async () => {
    await edge?.close();
  });

  it("answers a missing or wrong key with 401 and WWW-Authenticate, never echoing the key", async () => {
    const missing = await fetch(edge.url, { method: "POST", headers: MCP_HEADERS, body: JSON.stringify(initializeBody()) });
    expect(missing.status).toBe(401);
    expect(missing.headers.get("www-authenticate")).toMatch(/^Bearer realm="chaos-core"/);
    const wrongKey = "wrong-" + keyA;
    const wrong = await fetch(edge.url, {
      method: "POST",
      headers: { ...MCP_HEADERS, ...bearer(wrongKey) },
      body: JSON.stringify(initializeBody()),
    });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("www-authenticate")).toMatch(/error="invalid_token"/);
    expect(await wrong.text()).not.toContain(wrongKey);
  });

  it("serves a valid key as its tenant and principal", async () => {
    const { client } = await httpClient(edge.url, { headers: bearer(keyA) });
    const res = await client.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } });
    expect(res.structuredContent).toMatchObject({ session: { tenant: tenantA, principal: "alice" } });
    expect(JSON.stringify(res)).not.toContain(keyA);
    await client.close();
  });

  it("keeps a session and its memory to the tenant and principal that opened it", async () => {
    const a = await openSession(edge.url, bearer(keyA));
    const b = await openSession(edge.url, bearer(keyB));
    const wrote = await rpc(edge.url, a, toolCall(6, "chaoscore_remember", { key: "plan", value: "a's secret" }), bearer(keyA));
    expect((wrote.message?.result as { isError?: boolean }).isError).toBeFalsy();

    // B presenting A's session id is told exactly what an unknown id is told.
    const stolen = await rpc(edge.url, a, listTools, bearer(keyB));
    const unknown = await rpc(edge.url, "00000000-0000-0000-0000-000000000000", listTools, bearer(keyB));
    expect(stolen).toEqual(unknown);
    expect(stolen.status).toBe(404);
    // So is another principal of the same tenant, and a DELETE does not end A's session.
    expect((await rpc(edge.url, a, listTools, bearer(keyA2))).status).toBe(404);
    expect((await fetch(edge.url, { method: "DELETE", headers: { "mcp-session-id": a, ...bearer(keyB) } })).status).toBe(404);
    // A session id plus no key is still no key.
    expect((await rpc(edge.url, a, listTools)).status).toBe(401);

    // B's own session does not see A's memory.
    for (const args of [{ key: "plan" }, { query: "secret" }]) {
      const res = await rpc(edge.url, b, toolCall(7, "chaoscore_recall", args), bearer(keyB));
      expect((res.message?.result as { structuredContent: { items: unknown[] } }).structuredContent.items).toEqual([]);
    }
    const mine = await rpc(edge.url, a, toolCall(8, "chaoscore_recall", { key: "plan" }), bearer(keyA));
    expect(JSON.stringify(mine.message)).toContain("a's secret");
  });
});

describe("protocol details", () => {
  it("streams a tool's progress on the request's own SSE stream", async () => {
    const edge = await startHttpTransport(services.deps(), { port: 0 });
    try {
      const session = await openSession(edge.url);
      const res = await fetch(edge.url, {
        method: "POST",
        headers: { ...MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 9,
          method: "tools/call",
          params: { name: "chaoscore_inspect", arguments: { what: "policy", capability: "memory.recall" }, _meta: { progressToken: "p1" } },
        }),
      });
      expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
      const body = await res.clone().text();
      expect(body.match(/notifications\/progress/g)).toHaveLength(2);
      expect((await readJsonRpc(res))?.id).toBe(9);
    } finally {
      await edge.close();
    }
  });

  // The SDK's keep-alive comment comes every 15 s: both waits below end well before it, so
  // neither can pass by waiting for it (the Node adapter alone sends headers, and notices a
  // client that left, only when something is written).
  it("answers a GET stream's headers before any event, and lets a client that dropped it open it again", async () => {
    const edge = await startHttpTransport(services.deps(), { port: 0 });
    try {
      const session = await openSession(edge.url);
      const headers = { accept: "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION };
      const open = async () => {
        const dropped = new AbortController();
        const res = await fetch(edge.url, { headers, signal: AbortSignal.any([dropped.signal, AbortSignal.timeout(5_000)]) });
        return { status: res.status, type: res.headers.get("content-type"), drop: () => dropped.abort() };
      };
      const first = await open();
      expect(first).toMatchObject({ status: 200, type: "text/event-stream" });
      first.drop();
      // One stream per session: until the server has seen the drop, a new GET is refused with 409.
      const deadline = Date.now() + 5_000;
      let again = await open();
      while (again.status === 409 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        again = await open();
      }
      expect(again).toMatchObject({ status: 200, type: "text/event-stream" });
      again.drop();
    } finally {
      await edge.close();
    }
  });
});

describe("resumable 2025-11-25 streams and change events (SEP-1699, docs/protocol.md §10)", () => {
  let edge: RunningHttpTransport;

  beforeAll(async () => {
    edge = await startHttpTransport(services.deps(), { port: 0 });
  });

  afterAll(async () => {
    await edge?.close();
  });

  const post = (session: string, body: unknown) =>
    fetch(edge.url, {
      method: "POST",
      headers: { ...MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION },
      body: JSON.stringify(body),
    });
  const resume = (session: string, lastEventId: string) =>
    fetch(edge.url, {
      headers: { accept: "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION, "last-event-id": lastEventId },
    });

  it("opens each POST stream with a priming event carrying retry:, and replays what followed it after Last-Event-ID", async () => {
    const session = await openSession(edge.url);
    const events = await sseStream(await post(session, listTools)).all();
    const [priming, answer] = events;
    // The priming event: an id, the reconnect delay, and empty data (no message).
    expect(priming).toMatchObject({ retry: SSE_RETRY_MS, data: "" });
    expect(priming?.id).toMatch(/^[0-9a-f-]{36}:\d+-\d+$/);
    expect(answer?.message).toMatchObject({ id: 2, result: { tools: expect.any(Array) } });
    expect(answer?.id).toBeDefined();

    // A client that lost the stream after the priming event gets the answer again, with its id.
    const replayed = await resume(session, priming!.id!);
    expect(replayed.status).toBe(200);
    const again = await sseStream(replayed).all();
    expect(again.map((e) => ({ id: e.id, message: e.message }))).toEqual([{ id: answer!.id, message: answer!.message }]);
    // After the last event there is nothing more to send.
    expect(await sseStream(await resume(session, answer!.id!)).all()).toEqual([]);
  });

  it("refuses a Last-Event-ID this store never wrote, and never replays another session's events", async () => {
    const session = await openSession(edge.url);
    const other = await openSession(edge.url);
    const [priming] = await sseStream(await post(session, listTools)).all();
    const bad = await resume(session, "not-an-event-id");
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/Invalid event ID/);
    // The other session's store has no such stream: nothing of the first session comes back.
    const foreign = await resume(other, priming!.id!);
    expect(foreign.status).toBe(200);
    expect(await sseStream(foreign).all()).toEqual([]);
  });

  it("sends resources/updated for the policy to a session that subscribed to it, and list changes for a new council session", async () => {
    const session = await openSession(edge.url);
    const subscribed = await rpc(edge.url, session, { jsonrpc: "2.0", id: 3, method: "resources/subscribe", params: { uri: "chaoscore://policy" } });
    expect(subscribed.message).toMatchObject({ id: 3, result: {} });
    const get = await fetch(edge.url, { headers: { accept: "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION } });
    expect(get.status).toBe(200);
    const stream = sseStream(get);
    try {
      // A policy change is seen by the watch (the SQL store polls it) and published for the tenant.
      await services.putPolicy("default", { requireConfirmationFor: ["http.request"] });
      const updated = await stream.next((e) => e.message?.["method"] === "notifications/resources/updated", "resources/updated");
      expect(updated.message?.["params"]).toEqual({ uri: "chaoscore://policy" });
      expect(updated.id).toMatch(/^_GET_stream:/);

      const started = await rpc(edge.url, session, toolCall(4, "council_init", { task: "decide the stream test" }));
      expect((started.message?.["result"] as { isError?: boolean }).isError).toBeFalsy();
      // The new session changes the resource list; it was not subscribed to, so no update for it.
      const next = await stream.next((e) => typeof e.message?.["method"] === "string", "a notification");
      expect(next.message?.["method"]).toBe("notifications/resources/list_changed");

      const left = await rpc(edge.url, session, { jsonrpc: "2.0", id: 5, method: "resources/unsubscribe", params: { uri: "chaoscore://policy" } });
      expect(left.message).toMatchObject({ id: 5, result: {} });
      await services.putPolicy("default", {});
      // Unsubscribed: the next thing on the stream is the list change of another new council session.
      await rpc(edge.url, session, toolCall(6, "council_init", { task: "another" }));
      const after = await stream.next((e) => typeof e.message?.["method"] === "string", "a notification");
      expect(after.message?.["method"]).toBe("notifications/resources/list_changed");
    } finally {
      await stream.cancel();
      await services.putPolicy("default", {});
    }
  });

  it("refuses a subscription URI over the limit, naming the field", async () => {
    const session = await openSession(edge.url);
    const res = await rpc(edge.url, session, { jsonrpc: "2.0", id: 3, method: "resources/subscribe", params: { uri: `x://${"a".repeat(2100)}` } });
    expect(res.message?.["error"]).toMatchObject({ code: -32602, message: expect.stringMatching(/params\.uri: longer than 2048/) });
  });
});
