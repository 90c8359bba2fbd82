import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult, Progress } from "@modelcontextprotocol/sdk/types.js";
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import { seedDataDir } from "../support/data-dir-template.js";
import { freePort, waitForPort } from "../support/ports.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, stdioClient, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * Issue 32, item 5: an upstream's requests back to Chaos Core during a call (sampling,
 * elicitation, roots) are refused, saying so, and the upstream keeps serving; its progress and log
 * notifications reach an MCP caller that asked for progress, naming the upstream — over
 * Streamable HTTP on both revisions and over stdio. Upstreams: server-everything from npm, over
 * stdio and in its Streamable HTTP mode (its long-running operation reports progress), and a small SDK server that asks for what Chaos Core
 * does not give (its sampling and elicitation tools are ones server-everything lists only to a
 * client that declares those capabilities, which Chaos Core does not).
 */

const EVERYTHING = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const ASKING = join(ROOT, "test/support/upstreams/asking-server.mjs");
const errorOf = (r: CallToolResult) => (r.structuredContent as { error?: { code: string; message: string } }).error;
const text = (r: CallToolResult) => r.content.map((c) => (c.type === "text" ? c.text : "")).join("");

describe("an upstream talking back during a call", () => {
  const dir = tempDir("chaos-core-talk-back-");
  const env = { CHAOS_CORE_DATA_DIR: dir };
  let serve: ServeProcess;
  let client: Client;
  let remote: ChildProcess | undefined;

  beforeAll(async () => {
    const port = await freePort();
    remote = spawn(process.execPath, [EVERYTHING, "streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdio: "ignore" });
    await waitForPort(port);
    await seedDataDir(dir);
    writeFileSync(
      join(dir, "upstreams.json"),
      JSON.stringify({
        upstreams: [
          { name: "everything", command: process.execPath, args: [EVERYTHING, "stdio"] },
          { name: "remote", url: `http://127.0.0.1:${port}/mcp` },
          // The tenant's own process: its log lines can only be the call in flight's.
          { name: "asking", command: process.execPath, args: [ASKING], isolation: "tenant" },
        ],
      }),
    );
    const locked = await runToExit(["upstreams", "lock"], env, 90_000);
    expect(locked.code, locked.stderr).toBe(0);
    serve = await startServe(env);
    client = await httpClient(serve.url);
  }, 150_000);

  afterAll(async () => {
    await client?.close().catch(() => {});
    await serve?.stop();
    remote?.kill();
    removeDir(dir);
  });

  /** Calls a tool with onprogress (the SDK sends a progressToken) and keeps what arrived. */
  async function withProgress(c: Pick<Client, "callTool">, name: string, args: Record<string, unknown>) {
    const seen: Progress[] = [];
    const result = (await c.callTool({ name, arguments: args }, undefined, { onprogress: (p) => seen.push(p) })) as CallToolResult;
    return { result, seen };
  }
  const increasing = (seen: Progress[]) => seen.every((p, i) => i === 0 || p.progress > seen[i - 1]!.progress);

  it("passes server-everything's progress to a caller that asked for it, naming the upstream", async () => {
    const { result, seen } = await withProgress(client, "everything__trigger_long_running_operation", { duration: 1, steps: 4 });
    expect(result.isError).toBeFalsy();
    expect(text(result)).toContain("Long running operation completed");
    expect(seen.map((p) => p.message)).toEqual(["everything: 1/4", "everything: 2/4", "everything: 3/4", "everything: 4/4"]);
    expect(increasing(seen)).toBe(true);
  });

  it("passes the progress of an upstream reached over Streamable HTTP", async () => {
    const { result, seen } = await withProgress(client, "remote__trigger_long_running_operation", { duration: 0.6, steps: 3 });
    expect(result.isError).toBeFalsy();
    expect(seen.map((p) => p.message)).toEqual(["remote: 1/3", "remote: 2/3", "remote: 3/3"]);
  });

  it("passes an upstream's progress and its log lines as progress, and sends none to a caller that did not ask", async () => {
    const { result, seen } = await withProgress(client, "asking__steps", { count: 3, ms: 50 });
    expect(text(result)).toBe("3 steps done");
    const messages = seen.map((p) => p.message);
    expect(messages).toEqual([1, 2, 3].flatMap((i) => [`asking: ${i}/3 copying item ${i}`, `asking: [info] copied item ${i}`]));
    expect(increasing(seen)).toBe(true);

    const notified: string[] = [];
    client.fallbackNotificationHandler = (n) => Promise.resolve(void notified.push(n.method));
    const quiet = (await client.callTool({ name: "asking__steps", arguments: { count: 2, ms: 20 } })) as CallToolResult;
    expect(text(quiet)).toBe("2 steps done");
    expect(notified.filter((m) => m === "notifications/progress")).toEqual([]);
  });

  it.each([
    ["ask_model", "sampling/createMessage"],
    ["ask_user", "elicitation/create"],
    ["list_roots", "roots/list"],
  ])("refuses the upstream's %s request (%s) saying Chaos Core does not support it, and the upstream keeps serving", async (tool, method) => {
    const before = text((await client.callTool({ name: "asking__echo", arguments: { text: "before" } })) as CallToolResult);
    const started = Date.now();
    const refused = (await client.callTool({ name: `asking__${tool}`, arguments: {} })) as CallToolResult;
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(refused.isError).toBe(true);
    expect(errorOf(refused)!.message).toContain(`upstream "asking" answered ${tool} with an error: refused (-32601): MCP error -32601: ${method} is not supported by Chaos Core`);
    const after = text((await client.callTool({ name: "asking__echo", arguments: { text: "after" } })) as CallToolResult);
    // The same process answers: the refusal cost the upstream nothing.
    expect(after.replace("after", "")).toBe(before.replace("before", ""));
    expect(serve.stderr()).toContain(`upstream \\"asking\\" sent ${method} to Chaos Core during a call; refused`);
  });

  it("passes progress to a 2026-07-28 caller too", async () => {
    const modern = new V2Client({ name: "chaos-core-e2e", version: "0.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await modern.connect(new V2Http(new URL(serve.url)));
    try {
      const seen: Array<{ progress: number; message?: string }> = [];
      const result = await modern.callTool({ name: "asking__steps", arguments: { count: 3, ms: 50 } }, { onprogress: (p) => seen.push(p) });
      expect(JSON.stringify(result.content)).toContain("3 steps done");
      expect(seen.map((p) => p.message).slice(0, 2)).toEqual(["asking: 1/3 copying item 1", "asking: [info] copied item 1"]);
    } finally {
      await modern.close();
    }
  });

  it("passes progress to a caller over stdio", async () => {
    const { client: local } = await stdioClient(env);
    try {
      const { result, seen } = await withProgress(local, "everything__trigger_long_running_operation", { duration: 0.6, steps: 3 });
      expect(result.isError).toBeFalsy();
      // Over stdio the SDK's client may drop a notification read in the same chunk as the answer: the first two always arrive.
      expect(seen.map((p) => p.message).slice(0, 2)).toEqual(["everything: 1/3", "everything: 2/3"]);
    } finally {
      await local.close();
    }
  }, 60_000);
});
