import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "node:http";
import { MCP_HEADERS, openSession, rpc } from "../support/mcp-http.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { removeDir, startServe, tempDir, type ServeProcess } from "../support/processes.js";

const listTools = { jsonrpc: "2.0", id: 2, method: "tools/list" };

describe("bad input against chaos-core serve", () => {
  const dir = tempDir();
  let serve: ServeProcess;
  let session: string;

  beforeAll(async () => {
    await seedDataDir(dir);
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dir });
    session = await openSession(serve.url);
  });

  afterAll(async () => {
    await serve?.stop();
    removeDir(dir);
  });

  /** After every bad request the same session must still be served. */
  async function stillServing() {
    const ok = await rpc(serve.url, session, listTools);
    expect(ok.status).toBe(200);
    expect((ok.message?.result as { tools: unknown[] }).tools.length).toBeGreaterThan(0);
  }

  it("answers malformed JSON with a JSON-RPC parse error", async () => {
    const res = await rpc(serve.url, session, "{not json");
    expect(res.status).toBe(400);
    expect((res.message?.error as { code: number }).code).toBe(-32700);
    await stillServing();
  });

  it("echoes the request's id in the errors the HTTP layer writes itself, once the body could be read", async () => {
    const cases: Array<[string, Awaited<ReturnType<typeof rpc>>, number, number, string | number]> = [
      ["unparseable body", await rpc(serve.url, session, '{"jsonrpc":"2.0","id":"r-400","method":"ping",}'), 400, -32700, "r-400"],
      ["NaN in the body", await rpc(serve.url, session, '{"jsonrpc":"2.0","id":"r-nan","method":"ping","params":{"x":NaN}}'), 400, -32700, "r-nan"],
      ["no JSON-RPC message", await rpc(serve.url, session, { jsonrpc: "2.0", id: "r-env" }), 400, -32700, "r-env"],
      ["no session id", await rpc(serve.url, undefined, { ...listTools, id: "r-nosession" }), 400, -32000, "r-nosession"],
      ["unknown session", await rpc(serve.url, "no-such-session", { ...listTools, id: 404 }), 404, -32001, 404],
      ["Accept without event streams", await rpc(serve.url, session, { ...listTools, id: 406 }, { accept: "application/json" }), 406, -32000, 406],
      [
        "an unsupported protocol version",
        await rpc(serve.url, session, { ...listTools, id: "r-version" }, { "mcp-protocol-version": "1999-01-01" }),
        400,
        -32000,
        "r-version",
      ],
    ];
    for (const [what, res, status, code, id] of cases) {
      expect(res.status, what).toBe(status);
      expect(res.message, what).toMatchObject({ jsonrpc: "2.0", id, error: { code } });
    }
    await stillServing();
  });

  it("refuses a foreign Origin with 403", async () => {
    const res = await rpc(serve.url, session, listTools, { origin: "https://evil.example" });
    expect(res.status).toBe(403);
    await stillServing();
  });

  it("refuses a foreign Host with 403 (DNS rebinding)", async () => {
    // fetch() always sends the URL's host, so this one goes through node:http.
    const { port } = new URL(serve.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        { host: "127.0.0.1", port, path: "/mcp", method: "POST", headers: { ...MCP_HEADERS, host: `evil.example:${port}`, "mcp-session-id": session } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify(listTools));
    });
    expect(status).toBe(403);
    await stillServing();
  });

  it("answers an unknown session with 404 and a missing one with 400", async () => {
    expect((await rpc(serve.url, "no-such-session", listTools)).status).toBe(404);
    expect((await rpc(serve.url, undefined, listTools)).status).toBe(400);
    await stillServing();
  });

  it("refuses an oversized body with 413", async () => {
    const huge = {
      jsonrpc: "2.0",
      id: 3,
      method: "tools/call",
      params: { name: "chaoscore_remember", arguments: { key: "big", value: "x".repeat(5 * 1024 * 1024) } },
    };
    const res = await rpc(serve.url, session, huge);
    expect(res.status).toBe(413);
    // Never parsed, but its id sits in its first bytes: the answer names the request it refuses.
    expect(res.message).toMatchObject({ id: 3, error: { code: -32000 } });
    await stillServing();
  });

  it("echoes the id of an oversized body sent without a Content-Length (chunked) in its 413", async () => {
    const text = JSON.stringify({
      jsonrpc: "2.0",
      id: "big-chunked",
      method: "tools/call",
      params: { name: "chaoscore_remember", arguments: { key: "big", value: "x".repeat(5 * 1024 * 1024) } },
    });
    const bytes = new TextEncoder().encode(text);
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 256 * 1024) controller.enqueue(bytes.subarray(i, i + 256 * 1024));
        controller.close();
      },
    });
    const res = await fetch(serve.url, {
      method: "POST",
      headers: { ...MCP_HEADERS, "mcp-protocol-version": "2025-11-25", "mcp-session-id": session },
      body,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ id: "big-chunked", error: { code: -32000 } });
    await stillServing();
  });

  it("names the argument that fails the tool's schema", async () => {
    const res = await rpc(serve.url, session, {
      jsonrpc: "2.0",
      id: 4,
      method: "tools/call",
      params: { name: "chaoscore_remember", arguments: { key: 42, value: "v" } },
    });
    expect(res.status).toBe(200);
    const text = JSON.stringify(res.message);
    expect(text).toMatch(/key/);
    const result = res.message?.result as { isError?: boolean } | undefined;
    const isProblem = result?.isError === true || res.message?.error !== undefined;
    expect(isProblem).toBe(true);
    await stillServing();
  });

  it("takes a field written loosely under the tool's own name, and refuses one given twice that way", async () => {
    const call = (id: number, name: string, args: Record<string, unknown>) =>
      rpc(serve.url, session, { jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } });
    const stored = await call(5, "chaoscore_remember", { Key: "loose", Value: { n: 1 }, ttlSeconds: 60 });
    expect(stored.message?.result).toMatchObject({ structuredContent: { item: { key: "loose", value: { n: 1 } } } });
    expect((stored.message?.result as { structuredContent: { item: { expires_at?: string } } }).structuredContent.item.expires_at).toBeDefined();
    const read = await call(6, "chaoscore_recall", { KEY: "loose" });
    expect(read.message?.result).toMatchObject({ structuredContent: { items: [{ key: "loose", value: { n: 1 } }] } });
    const twice = await call(7, "chaoscore_remember", { key: "loose", value: 2, ttl_seconds: 5, "TTL-SECONDS": 6 });
    expect(twice.message?.result).toMatchObject({
      isError: true,
      structuredContent: { error: { code: "invalid_argument", message: "TTL-SECONDS: the same field as ttl_seconds; give it once" } },
    });
    await stillServing();
  });

  it("ends a session on DELETE", async () => {
    const other = await openSession(serve.url);
    const del = await fetch(serve.url, { method: "DELETE", headers: { "mcp-session-id": other } });
    expect(del.status).toBe(200);
    expect((await rpc(serve.url, other, listTools)).status).toBe(404);
    await stillServing();
  });
});
