import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client as V2Client } from "@modelcontextprotocol/client";
import { StdioClientTransport as V2Stdio } from "@modelcontextprotocol/client/stdio";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ResourceListChangedNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { lockDataDir } from "@chaos-core/kit";
import { autoAcceptingClient } from "../support/elicitation.js";
import { ConsoleBrowser } from "../support/console-client.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { childEnv, CLI, httpClient, removeDir, ROOT, runToExit, startServe, stdioClient, stopProcess, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * The README's two ways to run Chaos Core at once (issue 30, item 1): `npm start` serving the
 * console and `chaos-core stdio` started by a host, on the same data directory. The stdio process
 * serves its client through the running server, as the local agent, with the credential the
 * server publishes for it (agent.json) — which no operator or approver path takes.
 */

interface AgentFile {
  url: string;
  token: string;
  pid: number;
  mode: string;
}
const agentFile = (dir: string) => JSON.parse(readFileSync(join(dir, "agent.json"), "utf8")) as AgentFile;
const structured = <T>(res: unknown) => (res as CallToolResult).structuredContent as T;

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("chaos-core stdio while chaos-core serve runs on the same data directory", () => {
  const dir = tempDir();
  let serve: ServeProcess;
  const clients: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    await seedDataDir(dir);
    writeFileSync(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["http.request", "memory.forget"] }));
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dir });
  });

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await serve?.stop();
    removeDir(dir);
  });

  async function viaStdio(options: Parameters<typeof stdioClient>[2] = {}): Promise<{ client: Client; stderr: () => string }> {
    const opened = await stdioClient({ CHAOS_CORE_DATA_DIR: dir }, ROOT, options);
    clients.push(opened.client);
    return opened;
  }

  it("serves the host's client through the server, as the local user, on the same stores", async () => {
    const { client, stderr } = await viaStdio();
    const http = await httpClient(serve.url);
    clients.push(http);
    // The same tool surface as the server's own clients see.
    const names = (c: Client) => c.listTools().then((r) => r.tools.map((t) => t.name).sort());
    expect(await names(client)).toEqual(await names(http));

    // The server holds the data directory and its embedded database: what one stores, the other reads.
    await client.callTool({ name: "chaoscore_remember", arguments: { key: "relayed", value: "through serve" } });
    const read = await http.callTool({ name: "chaoscore_recall", arguments: { key: "relayed" } });
    expect(structured<{ items: Array<{ value: unknown }> }>(read).items[0]?.value).toBe("through serve");
    expect(stderr()).not.toMatch(/in use/);
  });

  it("publishes the agent credential readable by its owner only, and no operator or approver path takes it", async () => {
    const agent = agentFile(dir);
    expect(statSync(join(dir, "agent.json")).mode & 0o777).toBe(0o600);
    expect(agent).toMatchObject({ url: serve.url, mode: "serve", pid: serve.proc.pid });
    const admin = JSON.parse(readFileSync(join(dir, "admin.json"), "utf8")) as { url: string; token: string };
    expect(agent.token).not.toBe(admin.token);

    // The operator's admin endpoint.
    const asOperator = await fetch(`${admin.url}/v1/approvals`, { headers: { authorization: `Bearer ${agent.token}` } });
    expect(asOperator.status).toBe(401);
    // The console's sign-in, where an approver's key signs in.
    const console = new ConsoleBrowser(new URL(serve.url).origin);
    const signIn = await console.signIn(agent.token);
    expect(signIn.status).toBe(401);
    expect(signIn.body).toContain("The API key is not valid.");
    // chaoscore_approve through the relay: the local agent holds no role.
    const { client } = await viaStdio();
    const pending = structured<{ results: Array<{ approval?: { approval_id: string } }> }>(
      await client.callTool({ name: "chaoscore_execute", arguments: { steps: [{ id: "f1", capability: "memory.forget", input: { key: "relayed" } }] } }),
    );
    const approvalId = pending.results[0]!.approval!.approval_id;
    const approve = await client.callTool({ name: "chaoscore_approve", arguments: { approval_id: approvalId, approve: true } });
    expect(approve.isError).toBe(true);
    expect(structured<{ error: { code: string } }>(approve).error.code).toBe("permission_denied");
    // Nothing was approved: the operator still sees it pending.
    const list = await runToExit(["approvals", "list", "--json"], { CHAOS_CORE_DATA_DIR: dir });
    expect(list.stdout).toContain(approvalId);
  });

  it("passes elicitation and progress through, both ways", async () => {
    const asked: string[] = [];
    const { client } = await viaStdio(autoAcceptingClient(asked));
    await client.callTool({ name: "chaoscore_remember", arguments: { key: "deploy-window", value: "friday" } });
    const first = structured<{ results: Array<{ status: string; approval?: { approval_id: string } }> }>(
      await client.callTool({ name: "chaoscore_execute", arguments: { steps: [{ id: "f1", capability: "memory.forget", input: { key: "deploy-window" } }] } }),
    );
    expect(first.results[0]!.status).toBe("pending_approval");
    // The server asks the host's user through the relay (elicitation/create), and hears the answer back.
    const ran = structured<{ results: Array<{ status: string }> }>(
      await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: first.results[0]!.approval!.approval_id } }),
    );
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("memory.forget");
    expect(ran.results.map((r) => r.status)).toEqual(["executed"]);

    const progress: number[] = [];
    await client.callTool({ name: "chaoscore_achieve", arguments: { objective: "recall the deploy window" } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    expect(progress.length).toBeGreaterThanOrEqual(3);
  });

  it("passes list changes from the session's stream through", async () => {
    const { client } = await viaStdio();
    let changed = 0;
    client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void (changed += 1));
    // The session's GET stream opens just after initialize; a council session started before it
    // is up is announced to nobody, so a new one is started until one is heard.
    for (let attempt = 1; changed === 0; attempt++) {
      await client.callTool({ name: "council_init", arguments: { task: "decide where the relay lives" } });
      await waitFor("resources/list_changed", () => (changed > 0 ? changed : undefined), 3_000).catch((err: unknown) => {
        if (attempt >= 5) throw err;
      });
    }
  });

  it("serves a 2026-07-28 client through the relay", async () => {
    const transport = new V2Stdio({ command: process.execPath, args: [CLI, "stdio"], cwd: ROOT, env: childEnv({ CHAOS_CORE_DATA_DIR: dir }) as Record<string, string>, stderr: "pipe" });
    const client = new V2Client({ name: "chaos-core-e2e", version: "0.0.0" }, { versionNegotiation: { mode: "auto" } });
    await client.connect(transport);
    clients.push(client);
    expect(client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
    const read = await client.callTool({ name: "chaoscore_recall", arguments: { key: "relayed" } });
    expect((read.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value).toBe("through serve");
  });

  it("answers a relayed request with a JSON-RPC error naming the server once it stops", async () => {
    const { client } = await viaStdio();
    await serve.stop();
    const error = await client.callTool({ name: "chaoscore_recall", arguments: { key: "relayed" } }).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(error?.message).toMatch(/relays to chaos-core serve \(pid \d+\) at http:\/\/127\.0\.0\.1:\d+\/mcp, which does not answer/);
    // The server removed what it published.
    expect(existsSync(join(dir, "agent.json"))).toBe(false);
  });
});

describe("two hosts start chaos-core stdio on one data directory", () => {
  const dir = tempDir();
  const procs: ChildProcess[] = [];
  const clients: Client[] = [];
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await Promise.all(procs.map((p) => stopProcess(p)));
    removeDir(dir);
  });

  it("the first serves, the second relays through it, and a serve started after them names the holder and the way out", async () => {
    await seedDataDir(dir);
    const first = await stdioClient({ CHAOS_CORE_DATA_DIR: dir });
    clients.push(first.client);
    // Its first request opens the stores; then it offers its endpoint to relays.
    await first.client.callTool({ name: "chaoscore_remember", arguments: { key: "who", value: "the first" } });
    const agent = await waitFor("agent.json", () => (existsSync(join(dir, "agent.json")) ? agentFile(dir) : undefined));
    expect(agent.mode).toBe("stdio");

    const second = await stdioClient({ CHAOS_CORE_DATA_DIR: dir });
    clients.push(second.client);
    const read = await second.client.callTool({ name: "chaoscore_recall", arguments: { key: "who" } });
    // The first holds the directory and its embedded database: the second could only have read it through the first.
    expect(structured<{ items: Array<{ value: unknown }> }>(read).items[0]?.value).toBe("the first");
    expect(agentFile(dir).pid).toBe(agent.pid);

    const serve = await runToExit(["serve"], { CHAOS_CORE_DATA_DIR: dir, PORT: "0" }, 30_000);
    expect(serve.code).toBe(1);
    expect(serve.stderr).toContain(`is in use: chaos-core stdio (pid ${agent.pid}) serves it`);
    expect(serve.stderr).toContain("start this server on another --data-dir");
    expect(serve.stdout).toBe("");
  });
});

describe("chaos-core stdio on a data directory it can neither take nor relay through", () => {
  const dir = tempDir();
  let release: (() => Promise<void>) | undefined;
  afterAll(async () => {
    await release?.();
    removeDir(dir);
  });

  it("answers the host's initialize with a JSON-RPC error naming the holder and the way out", async () => {
    // A holder that offers no endpoint: this test process, as an older server would look.
    release = await lockDataDir(dir);
    writeFileSync(join(dir, "admin.json"), JSON.stringify({ url: "http://127.0.0.1:9", token: "x".repeat(43), pid: process.pid }), { mode: 0o600 });
    const proc = spawn(process.execPath, [CLI, "stdio"], {
      cwd: ROOT,
      env: childEnv({ CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_STDIO_ATTACH_SECONDS: "1" }),
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    proc.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
    proc.stdin!.write(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "host", version: "1" } } })}\n`);
    const line = await waitFor("the answer to initialize", () => (out.includes("\n") ? out.split("\n")[0] : undefined), 20_000);
    const answer = JSON.parse(line!) as { id: number; error: { code: number; message: string } };
    expect(answer.id).toBe(1);
    expect(answer.error.message).toContain(`chaos-core process ${process.pid} (its operator endpoint http://127.0.0.1:9) holds it`);
    expect(answer.error.message).toContain("set CHAOS_CORE_DATA_DIR (or pass --data-dir DIR) in the host's configuration");
    proc.stdin!.end();
    expect(await exited).toBe(1);
  });
});
