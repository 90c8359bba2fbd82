import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { childEnv, removeDir, ROOT, stopProcess, tempDir } from "../support/processes.js";

const run = promisify(execFile);

type Structured = Record<string, unknown>;

/**
 * The README's Quick start and client configuration, as a new user follows them (issue 30): a
 * fresh clone of this commit, `npm ci && npm start`; `chaos-core` put on the PATH the way the
 * README says (`npm run pack`, `npm install -g --prefix …`); then, while the server runs, the
 * stdio configuration's command `chaos-core stdio` started by an MCP client as a host would, and
 * `chaos-core approvals` typed in a shell in a directory outside the clone, with only the
 * prefix's bin/ and node on the PATH, so nothing of the clone can stand in for what was installed.
 * (The data directory is seeded from the suite's template: creating a database is
 * standalone.test.ts's to prove.)
 */
describe("the README's quick start and client configuration, from a fresh clone", () => {
  const tmp = tempDir("chaos-core-readme-");
  const clone = join(tmp, "clone");
  const prefix = join(tmp, "prefix");
  const elsewhere = join(tmp, "elsewhere");
  const data = join(tmp, "data");
  const installed = join(prefix, "lib/node_modules/chaos-core");
  const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
  const env = (extra: Record<string, string | undefined> = {}) => ({
    ...childEnv(extra),
    PATH: [join(prefix, "bin"), dirname(process.execPath)].join(delimiter),
  });
  /** A command line as a person types it in a shell, in a directory outside the clone. */
  const shell = (line: string, extra: Record<string, string | undefined> = {}) =>
    run("sh", ["-c", line], { cwd: elsewhere, env: env(extra), encoding: "utf8", timeout: 60_000 });
  /** A README command run in the clone, with npm and node from this machine's PATH. */
  const inClone = (command: string, args: string[]) =>
    run(command, args, { cwd: clone, env: childEnv({}), encoding: "utf8", timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });

  /**
   * An MCP client that starts `chaos-core stdio` as a host's config names it (the command
   * `chaos-core`, the argument `stdio`), in a directory outside the clone; a start that fails says why.
   */
  async function hostStartsStdio(extra: Record<string, string | undefined>): Promise<{ client: Client; stderr: () => string }> {
    const transport = new StdioClientTransport({ command: "chaos-core", args: ["stdio"], cwd: elsewhere, env: env(extra) as Record<string, string>, stderr: "pipe" });
    let stderr = "";
    transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    const client = new Client({ name: "chaos-core-readme-test", version: "0.0.0" });
    await client.connect(transport).catch((err: Error) => {
      throw new Error(`chaos-core stdio did not answer initialize (${err.message}):\n${stderr}`);
    });
    return { client, stderr: () => stderr };
  }

  let npmStart: ChildProcess;
  let startOutput = "";

  beforeAll(async () => {
    mkdirSync(elsewhere);
    await seedDataDir(data);
    // The operator holds every memory write for a person: the stdio client's call waits for one.
    writeFileSync(join(data, "policy.json"), JSON.stringify({ requireConfirmationFor: ["http.request", "memory.remember"] }));
    await run("git", ["clone", "--quiet", ROOT, clone]);
    await inClone("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"]);

    // `npm start`, as the README runs it (a free port instead of 3000, which a test cannot count on).
    npmStart = spawn("npm", ["start"], { cwd: clone, env: childEnv({ CHAOS_CORE_DATA_DIR: data, PORT: "0" }), stdio: ["ignore", "pipe", "pipe"] });
    npmStart.stdout!.on("data", (d: Buffer) => (startOutput += d.toString()));
    npmStart.stderr!.on("data", (d: Buffer) => (startOutput += d.toString()));
    const deadline = Date.now() + 300_000;
    while (!/Chaos Core MCP endpoint: http:\/\/127\.0\.0\.1:\d+\/mcp/.test(startOutput)) {
      if (npmStart.exitCode !== null || Date.now() > deadline) throw new Error(`npm start did not serve:\n${startOutput}`);
      await new Promise((r) => setTimeout(r, 250));
    }

    // `chaos-core` on the PATH, as the README's Quick start puts it there.
    await inClone("npm", ["run", "pack", "--silent"]);
    await inClone("npm", ["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", `./chaos-core-${version}.tgz`]);
  }, 900_000);

  afterAll(async () => {
    if (npmStart) await stopProcess(npmStart);
    removeDir(tmp);
  });

  it("npm start says it builds, then serves", () => {
    expect(startOutput).toContain("npm start: building the TypeScript sources (tsc -b): a first build takes about a minute");
    expect(startOutput).toMatch(/npm start: built in \d+ s; starting chaos-core serve/);
  });

  it("chaos-core is a command: -v prints the version and help the commands", async () => {
    expect(realpathSync(join(prefix, "bin/chaos-core")).startsWith(`${installed}/`)).toBe(true);
    expect((await shell("chaos-core -v")).stdout).toBe(`${version}\n`);
    const help = (await shell("chaos-core help")).stdout;
    expect(help).toMatch(/^Usage: chaos-core <command> \[options\]/);
    expect(help).toMatch(/\n {2}approvals list \| approve/);
  });

  it("the stdio configuration's command serves beside npm start, and chaos-core approvals from the PATH answers what it waits for", async () => {
    const { client } = await hostStartsStdio({ CHAOS_CORE_DATA_DIR: data });
    try {
      expect(client.getServerVersion()).toMatchObject({ name: "chaos-core", version });

      const refused = await client.callTool({ name: "chaoscore_remember", arguments: { key: "deploy-window", value: "friday" } });
      const error = (refused.structuredContent as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("approval_required");
      const id = /approval ([0-9a-f-]{36}) waits/.exec(error.message)?.[1];
      expect(id, error.message).toBeDefined();

      // The operator's commands, from the PATH the README set up, reach the server npm start runs.
      const listed = await shell("chaos-core approvals list", { CHAOS_CORE_DATA_DIR: data });
      expect(listed.stdout).toContain(id);
      expect(listed.stdout).toContain("memory.remember");
      // The command the answer names, run as an operator would: in a shell.
      const command = / runs (chaos-core approvals approve .+) on its machine/.exec(error.message)?.[1];
      expect(command, error.message).toMatch(new RegExp(`^chaos-core approvals approve ${id}\\b`));
      expect((await shell(command!)).stdout).toContain(`Approved ${id}`);

      const ran = (await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } })).structuredContent as Structured;
      expect((ran.results as Structured[])[0]).toMatchObject({ status: "executed", ran: true });
      const recalled = (await client.callTool({ name: "chaoscore_recall", arguments: { key: "deploy-window" } })).structuredContent as Structured;
      expect(recalled.items).toMatchObject([{ key: "deploy-window", value: "friday" }]);
    } finally {
      await client.close();
    }
  });

  it("an installed chaos-core stdio on a directory of its own is held to the chaoscore.lock inside the package", async () => {
    const own = join(tmp, "own-data");
    await seedDataDir(own);
    const { client, stderr } = await hostStartsStdio({ CHAOS_CORE_DATA_DIR: own, LOG_LEVEL: "info" });
    try {
      // Every tool the lock pins but the opt-in finance reference ones (no operator enabled them
      // here), and only those: the served surface is the packed one.
      const lock = JSON.parse(readFileSync(join(installed, "chaoscore.lock"), "utf8")) as { tools: Record<string, unknown> };
      const finance = ["place_equity_order", "rebalance_portfolio", "wire_treasury_transfer"];
      expect(Object.keys(lock.tools)).toEqual(expect.arrayContaining(finance));
      const tools = (await client.listTools()).tools.map((t) => t.name).sort();
      expect(tools).toEqual(Object.keys(lock.tools).filter((name) => !finance.includes(name)).sort());
      // The start-up check read the lock the package ships (kit's appRoot), not one three folders up.
      expect(stderr()).toContain(`"lockFile":"${join(installed, "chaoscore.lock")}"`);
    } finally {
      await client.close();
    }
  });
});
