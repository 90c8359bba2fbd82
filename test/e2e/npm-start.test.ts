import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { childEnv, removeDir, ROOT, runToExit, stopProcess, tempDir } from "../support/processes.js";

/** Holds a port on 127.0.0.1 for the test, as another program would. */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as { port: number }).port, server };
}

/** `npm start` as the README runs it: the package's start script, from the repository. */
function npmStart(env: Record<string, string | undefined>, args: string[] = []) {
  const proc = spawn("npm", ["start", "--silent", ...(args.length > 0 ? ["--", ...args] : [])], { cwd: ROOT, env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  proc.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  return { proc, output: () => out, exited };
}

describe("npm start says what it does, and a taken port before anything slow", () => {
  const dirs: string[] = [];
  const held: Server[] = [];
  afterAll(async () => {
    for (const s of held) s.close();
    for (const d of dirs) removeDir(d);
  });

  it("refuses a taken port before it builds anything, naming --port and PORT", async () => {
    const { port, server } = await holdPort();
    held.push(server);
    const dir = tempDir();
    dirs.push(dir);
    const start = npmStart({ CHAOS_CORE_DATA_DIR: dir, PORT: String(port) });
    expect(await start.exited).toBe(1);
    expect(start.output()).toContain(`npm start: port ${port} on 127.0.0.1 is in use by another process: choose another with \`npm start -- --port N\` (or PORT=N npm start)`);
    expect(start.output()).not.toContain("building");
  });

  it("chaos-core serve on a taken port says so before it creates the data directory, naming --port", async () => {
    const { port, server } = await holdPort();
    held.push(server);
    const dir = join(tempDir(), "never-created");
    dirs.push(dir);
    const serve = await runToExit(["serve", "--port", String(port)], { CHAOS_CORE_DATA_DIR: dir }, 30_000);
    expect(serve.code).toBe(1);
    expect(serve.stderr).toContain(`chaos-core: port ${port} on 127.0.0.1 is in use by another process: choose another with --port N (or PORT=N)`);
    expect(existsSync(dir)).toBe(false);
  });

  it("says it is building, then that it built, before the server's own lines", async () => {
    const dir = tempDir();
    dirs.push(dir);
    await seedDataDir(dir);
    const start = npmStart({ CHAOS_CORE_DATA_DIR: dir, PORT: "0" });
    try {
      const deadline = Date.now() + 120_000;
      while (!start.output().includes("Chaos Core MCP endpoint:") && Date.now() < deadline) {
        if (start.proc.exitCode !== null) throw new Error(`npm start exited:\n${start.output()}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      const out = start.output();
      const building = out.indexOf("npm start: building the TypeScript sources (tsc -b)");
      const built = out.search(/npm start: built in \d+ s; starting chaos-core serve/);
      expect(building).toBeGreaterThanOrEqual(0);
      expect(built).toBeGreaterThan(building);
      expect(out.indexOf("Chaos Core MCP endpoint:")).toBeGreaterThan(built);
    } finally {
      await stopProcess(start.proc);
    }
  });
});
