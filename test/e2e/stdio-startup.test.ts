import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, describe, expect, it } from "vitest";
import { Client as V2Client } from "@modelcontextprotocol/client";
import { StdioClientTransport as V2Stdio } from "@modelcontextprotocol/client/stdio";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { childEnv, CLI, removeDir, ROOT, stopProcess, tempDir } from "../support/processes.js";

/**
 * `chaos-core stdio` as a host starts it, with a real SDK client on the child's stdin/stdout.
 * The SDK's stdio framing is the same in both directions, so its transport over the child's
 * pipes is the client side (StdioClientTransport would hide the exit code this file checks).
 */
async function startStdio(dir: string): Promise<{ client: Client; proc: ChildProcess; stderr: () => string; exit: Promise<number | null> }> {
  const proc = spawn(process.execPath, [CLI, "stdio"], {
    cwd: ROOT,
    env: childEnv({ CHAOS_CORE_DATA_DIR: dir }),
    stdio: ["pipe", "pipe", "pipe"],
  });
  let err = "";
  proc.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  const client = new Client({ name: "chaos-core-e2e", version: "0.0.0" });
  const exitedFirst = exit.then((code) => {
    throw new Error(`chaos-core stdio exited with ${code} before answering initialize:\n${err}`);
  });
  await Promise.race([client.connect(new StdioServerTransport(proc.stdout!, proc.stdin!)), exitedFirst]);
  exitedFirst.catch(() => {});
  return { client, proc, stderr: () => err, exit };
}

describe("chaos-core stdio answers before its stores are open", () => {
  const dirs: string[] = [];
  const procs: ChildProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.map((p) => stopProcess(p)));
    for (const dir of dirs) removeDir(dir);
  });

  it("on a damaged database: initialize and tools/list answer, a tool call fails `unavailable` naming the database, and the process exits 1", async () => {
    const dir = tempDir();
    dirs.push(dir);
    mkdirSync(join(dir, "pg"));
    writeFileSync(join(dir, "pg", "PG_VERSION"), "18\n");

    const { client, proc, stderr, exit } = await startStdio(dir);
    procs.push(proc);
    expect(client.getServerVersion()?.name).toBe("chaos-core");
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);

    const result = await client.callTool({ name: "chaoscore_recall", arguments: { key: "k" } });
    expect(result.isError).toBe(true);
    const error = (result.structuredContent as { error: { code: string; message: string } }).error;
    expect(error.code).toBe("unavailable");
    expect(error.message).toContain(`the embedded database in ${join(dir, "pg")} did not open`);

    expect(await exit).toBe(1);
    expect(stderr()).toContain(`chaos-core: the embedded database in ${join(dir, "pg")} did not open`);
  });
  // A second stdio process on a held directory relays through the holder: test/e2e/stdio-beside-serve.test.ts.
});

/**
 * A 2026-07-28 client's version probe, as `@modelcontextprotocol/client` 2.4.0 runs it over stdio:
 * a sibling `chaos-core stdio` is sent `server/discover` alone, then its stdin is closed and it
 * is sent SIGTERM (SIGKILL a second later). The sibling must answer, touch no store, and be gone
 * with the directory's lock, so the real process started next takes the directory (docs/protocol.md §14).
 */
describe("chaos-core stdio as a 2026-07-28 client's version probe", () => {
  const dirs: string[] = [];
  const procs: ChildProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.map((p) => stopProcess(p)));
    for (const dir of dirs) removeDir(dir);
  });

  const discover = {
    jsonrpc: "2.0",
    id: 0,
    method: "server/discover",
    params: {
      _meta: {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { name: "probe", version: "1" },
      },
    },
  };

  /** Starts `chaos-core stdio` on `dir`, sends `server/discover` alone and resolves with its answer. */
  async function probe(dir: string) {
    const proc = spawn(process.execPath, [CLI, "stdio"], { cwd: ROOT, env: childEnv({ CHAOS_CORE_DATA_DIR: dir, LOG_LEVEL: "info" }), stdio: ["pipe", "pipe", "pipe"] });
    procs.push(proc);
    let stderr = "";
    proc.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      proc.once("exit", (code, signal) => resolve({ code, signal })),
    );
    const lines: string[] = [];
    const answered = new Promise<Record<string, unknown>>((resolve, reject) => {
      createInterface({ input: proc.stdout! }).on("line", (line) => {
        lines.push(line);
        resolve(JSON.parse(line) as Record<string, unknown>);
      });
      void exit.then(({ code }) => reject(new Error(`chaos-core stdio exited with ${code} before answering server/discover:\n${stderr}`)));
    });
    proc.stdin!.write(`${JSON.stringify(discover)}\n`);
    const answer = await answered;
    return { proc, answer, exit, lines, stderr: () => stderr };
  }

  /** What a probe must not have left in the data directory: a database, the policy file, the lock, the admin endpoint's file. */
  const leftovers = (dir: string) => readdirSync(dir).filter((name) => ["pg", "pg.creating", "policy.json", "policy.state.json", ".chaos-core.lock", "admin.json"].includes(name));

  it("answers server/discover without opening a store, and exits 0 on the SDK's stdin close and SIGTERM, the lock released", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const sibling = await probe(dir);
    expect(sibling.answer).toMatchObject({ id: 0, result: { supportedVersions: ["2026-07-28"] } });
    // The SDK's reaping: stdin closed and SIGTERM at once.
    sibling.proc.stdin!.end();
    sibling.proc.kill("SIGTERM");
    expect(await sibling.exit).toEqual({ code: 0, signal: null });
    expect(sibling.lines).toHaveLength(1);
    expect(leftovers(dir)).toEqual([]);
    expect(sibling.stderr()).not.toMatch(/embedded database|could not open/);
  });

  it("exits 0 with nothing opened when only its stdin closes", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const sibling = await probe(dir);
    sibling.proc.stdin!.end();
    expect(await sibling.exit).toEqual({ code: 0, signal: null });
    expect(leftovers(dir)).toEqual([]);
  });

  it("lets a v2 Client in auto mode land on 2026-07-28 on a fresh data directory: the probe sibling gone, the real process opens the database", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const client = new V2Client({ name: "probe-e2e", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    const transport = new V2Stdio({
      command: process.execPath,
      args: [CLI, "stdio"],
      cwd: ROOT,
      env: childEnv({ CHAOS_CORE_DATA_DIR: dir }) as Record<string, string>,
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    await client.connect(transport);
    expect(client.getProtocolEra()).toBe("modern");
    expect(client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
    // The first call waits for the first run's database: past the SDK's 60 s default on a busy machine.
    const stored = (await client.callTool({ name: "chaoscore_remember", arguments: { key: "probe:first-run", value: 1 } }, { timeout: 170_000 })) as {
      isError?: boolean;
    };
    expect(stored.isError, stderr).toBeFalsy();
    const recalled = (await client.callTool({ name: "chaoscore_recall", arguments: { key: "probe:first-run" } })) as { structuredContent: { items: unknown[] } };
    expect(recalled.structuredContent.items).toEqual([expect.objectContaining({ value: 1 })]);
    expect(existsSync(join(dir, "pg", "PG_VERSION"))).toBe(true);
    const pid = transport.pid!;
    await client.close();
    // The real process leaves by itself once its stdin closed (the stores were open): no signal needed.
    await waitForExit(pid);
    expect(leftovers(dir).sort()).toEqual(["pg", "policy.json", "policy.state.json"]);
    // A first run creates the database: seconds, more on a busy machine.
  }, 180_000);
});

/** Resolves once the process `pid` is gone (an OS-level wait: it is not this process's child here). */
async function waitForExit(pid: number): Promise<void> {
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
