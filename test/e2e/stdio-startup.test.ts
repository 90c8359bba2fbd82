import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { childEnv, CLI, removeDir, ROOT, runToExit, stopProcess, tempDir } from "../support/processes.js";

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

  it("a second process on the same data directory fails at once and writes nothing to stdout", async () => {
    const dir = tempDir();
    dirs.push(dir);
    // The first has answered initialize, so it holds the directory (its database is still being created).
    const first = await startStdio(dir);
    procs.push(first.proc);

    const second = await runToExit(["stdio"], { CHAOS_CORE_DATA_DIR: dir }, 30_000);
    expect(second.code).not.toBe(0);
    expect(second.stderr).toMatch(/in use by another chaos-core process/);
    expect(second.stdout).toBe("");
  });
});
