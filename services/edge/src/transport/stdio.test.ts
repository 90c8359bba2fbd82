import { PassThrough } from "node:stream";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import type { EdgeDeps } from "../deps.js";
import { runStdioTransport } from "./stdio.js";

let services: TestServices;

beforeAll(async () => {
  services = await startTestServices("stdio");
});

afterAll(async () => {
  await services?.close();
});

/** A stdio session over in-memory pipes: lines in, every stdout line collected. */
async function start(deps: EdgeDeps) {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const lines: string[] = [];
  const waiters = new Map<number, (msg: Record<string, unknown>) => void>();
  createInterface({ input: stdout }).on("line", (line) => {
    lines.push(line);
    const msg = JSON.parse(line) as Record<string, unknown>;
    if (typeof msg.id === "number") waiters.get(msg.id)?.(msg);
  });
  let closed = 0;
  const running = await runStdioTransport(deps, { stdin, stdout, onClose: () => closed++ });
  const send = (msg: Record<string, unknown>) => stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
  const request = (id: number, method: string, params: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((resolve) => {
      waiters.set(id, resolve);
      send({ id, method, params });
    });
  return { stdin, lines, send, request, running, closed: () => closed };
}

describe("runStdioTransport", () => {
  it("writes only JSON-RPC to stdout, serves the local tenant, and ends when stdin closes", async () => {
    const deps = services.deps(createMemorySessionStore());
    const io = await start(deps);
    const init = await io.request(1, "initialize", {
      protocolVersion: "2025-11-25",
      capabilities: {},
      clientInfo: { name: "stdio-test", version: "1" },
    });
    expect(init.result).toMatchObject({ serverInfo: { name: "chaos-core" }, capabilities: { logging: {} } });
    io.send({ method: "notifications/initialized" });

    const [record] = await deps.sessions.listByTenant("default");
    expect(record).toMatchObject({ tenant: "default", principal: "local", transport: "stdio", clientInfo: { name: "stdio-test" } });

    await io.request(2, "logging/setLevel", { level: "debug" });
    const stored = await io.request(3, "tools/call", { name: "chaoscore_remember", arguments: { key: "via-stdio", value: true } });
    expect((stored.result as { isError?: boolean }).isError).toBeFalsy();
    const bad = await io.request(4, "tools/call", { name: "chaoscore_recall", arguments: { limit: "ten" } });
    expect(JSON.stringify(bad.result)).toMatch(/limit/);

    // Every line on stdout is a JSON-RPC message: results and the log notifications asked for.
    expect(io.lines.length).toBeGreaterThanOrEqual(5);
    for (const line of io.lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" });
    expect(io.lines.some((l) => l.includes("notifications/message"))).toBe(true);

    io.stdin.end();
    await new Promise((r) => setTimeout(r, 50));
    expect(io.closed()).toBe(1);
    expect(await deps.sessions.listByTenant("default")).toEqual([]);
    await io.running.close();
    expect(io.closed()).toBe(1);
  });

  it("writes the session record again if it expired while the client sat idle", async () => {
    const deps = services.deps(createMemorySessionStore({ ttlSeconds: 1 }));
    const io = await start(deps);
    await io.request(1, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "idle", version: "1" } });
    await new Promise((r) => setTimeout(r, 1100));
    expect(await deps.sessions.listByTenant("default")).toEqual([]);
    const res = await io.request(2, "tools/call", { name: "chaoscore_inspect", arguments: { what: "sessions" } });
    expect(res.result).toMatchObject({ structuredContent: { available: true, session: { client_info: { name: "idle" } } } });
    await io.running.close();
  });
});
