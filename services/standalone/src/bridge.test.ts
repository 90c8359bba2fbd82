/**
 * `chaos-core bridge`: real stdio MCP servers from npm (server-filesystem, server-everything)
 * served over Streamable HTTP, reached by the official SDK's client — one process per session,
 * progress routed to the call that asked, sessions bounded, idle ones ended, a bearer token
 * required beyond loopback.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { recordingLogger } from "../../../test/support/logger.js";
import { startBridge, type BridgeOptions, type RunningBridge } from "./bridge.js";
import { runBridgeCommand } from "./bridge-command.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const FILESYSTEM = join(ROOT, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
const EVERYTHING = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

/** The environment the bridged processes get: what a pod would give them. */
const ENV = { PATH: "/usr/bin:/bin", HOME: tmpdir() };
const dir = mkdtempSync(join(tmpdir(), "chaos-core-bridge-"));
writeFileSync(join(dir, "notes.txt"), "friday\n");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const running: RunningBridge[] = [];
const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
  await Promise.all(running.splice(0).map((b) => b.close()));
});

async function bridge(options: Partial<BridgeOptions> = {}): Promise<RunningBridge> {
  const b = await startBridge({ command: process.execPath, args: [FILESYSTEM, dir], env: ENV, host: "127.0.0.1", port: 0, maxSessions: 4, idleMs: 60_000, logger: recordingLogger().logger, ...options });
  running.push(b);
  return b;
}

async function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: "bridge-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  clients.push(client);
  return client;
}

const text = (result: unknown) => ((result as { content: Array<{ text?: string }> }).content[0]?.text ?? "");

describe("chaos-core bridge", () => {
  it("serves a stdio server's tools over Streamable HTTP, one process per session, stopped when the session ends", async () => {
    const b = await bridge();
    const a = await connect(b.url);
    const tools = (await a.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(["read_text_file", "write_file", "list_directory"]));
    expect(text(await a.callTool({ name: "read_text_file", arguments: { path: join(dir, "notes.txt") } }))).toBe("friday\n");

    const second = await connect(b.url);
    expect(b.sessions()).toBe(2);
    await second.callTool({ name: "write_file", arguments: { path: join(dir, "b.txt"), content: "from b" } });
    expect(text(await a.callTool({ name: "read_text_file", arguments: { path: join(dir, "b.txt") } }))).toBe("from b");

    // Ending a session (DELETE) stops its process; the other session goes on.
    await (second.transport as StreamableHTTPClientTransport).terminateSession();
    expect(b.sessions()).toBe(1);
    expect((await a.listTools()).tools.length).toBeGreaterThan(0);
  });

  it("routes a call's progress notifications to that call", async () => {
    const b = await bridge({ args: [EVERYTHING, "stdio"] });
    const client = await connect(b.url);
    const seen: number[] = [];
    const result = await client.callTool(
      { name: "trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } },
      { onprogress: (p) => seen.push(p.progress) },
    );
    expect(text(result)).toMatch(/Long running operation completed/);
    expect(seen).toEqual([1, 2, 3]);
  });

  it("answers a request on an ended session 404, so the client initializes again; ends idle sessions", async () => {
    const b = await bridge({ idleMs: 200 });
    const client = await connect(b.url);
    const id = (client.transport as StreamableHTTPClientTransport).sessionId!;
    await expect.poll(() => b.sessions(), { timeout: 5_000 }).toBe(0);
    const res = await fetch(b.url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/initialize again/);
    // A new client is served at once.
    expect((await (await connect(b.url)).listTools()).tools.length).toBeGreaterThan(0);
  });

  it("refuses initialize past its session limit, 503 with Retry-After", async () => {
    const b = await bridge({ maxSessions: 1 });
    await connect(b.url);
    const res = await fetch(b.url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("5");
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/at most 1 sessions/);
    expect(b.sessions()).toBe(1);
  });

  it("requires its bearer token when it has one, and refuses to listen beyond loopback without one", async () => {
    const token = "t".repeat(32);
    const b = await bridge({ token });
    const none = await fetch(b.url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe("Bearer");
    await expect(connect(b.url, { authorization: `Bearer ${"x".repeat(32)}` })).rejects.toThrow();
    expect(b.sessions()).toBe(0);
    expect((await (await connect(b.url, { authorization: `Bearer ${token}` })).listTools()).tools.length).toBeGreaterThan(0);

    await expect(startBridge({ command: process.execPath, args: [FILESYSTEM, dir], env: ENV, host: "0.0.0.0", port: 0, maxSessions: 1, idleMs: 1000, logger: recordingLogger().logger })).rejects.toThrow(
      /refusing to bridge on 0\.0\.0\.0 without a token: set --token-file/,
    );
  });

  it("answers a request that is not JSON-RPC, or not initialize without a session, with a clear 400; bad flags name themselves", async () => {
    const b = await bridge();
    const garbage = await fetch(b.url, { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    expect(garbage.status).toBe(400);
    expect(((await garbage.json()) as { error: { message: string } }).error.message).toMatch(/not JSON-RPC/);
    const early = await fetch(b.url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }) });
    expect(early.status).toBe(400);
    expect(((await early.json()) as { error: { message: string } }).error.message).toMatch(/initialize first/);
    expect(b.sessions()).toBe(0);

    const io = { stdout: process.stdout, stderr: process.stderr, env: {} };
    await expect(runBridgeCommand(["--port", "3000"], io)).rejects.toThrow(/needs the stdio server's command after --/);
    await expect(runBridgeCommand(["--port", "x", "--", "node"], io)).rejects.toThrow(/--port \(PORT\): must be an integer from 0 to 65535, not "x"/);
    await expect(runBridgeCommand(["--token-file", join(dir, "missing"), "--", "node"], io)).rejects.toThrow(/--token-file \(CHAOS_CORE_BRIDGE_TOKEN_FILE\): cannot read .*missing \(ENOENT\)/);
  });
});

describe("chaos-core bridge on loopback without a token", () => {
  it("answers only loopback Host names (DNS rebinding)", async () => {
    const b = await bridge();
    const { port } = new URL(b.url);
    const { request } = await import("node:http");
    const status = await new Promise<number>((done, fail) => {
      const req = request({ host: "127.0.0.1", port, path: "/mcp", method: "POST", headers: { host: `rebound.example:${port}`, "content-type": "application/json" } }, (res) => {
        res.resume();
        done(res.statusCode ?? 0);
      });
      req.on("error", fail);
      req.end("{}");
    });
    expect(status).toBe(403);
  });
});
