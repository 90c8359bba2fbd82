import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { childEnv, removeDir, ROOT, tempDir } from "../support/processes.js";

const run = promisify(execFile);

type Structured = Record<string, unknown>;

/**
 * What a person does with a clone (README, "Put chaos-core on the PATH"): pack it, install the
 * tarball into a prefix, and from then on type `chaos-core` in any directory — here a temporary one
 * outside the clone, with the prefix's bin/ and node alone on the PATH, so nothing of the clone
 * (its node_modules/.bin, its chaoscore.lock) can stand in for what was installed.
 */
describe("the packed chaos-core installs into a prefix and runs from outside the clone", () => {
  const tmp = tempDir("chaos-core-install-");
  const prefix = join(tmp, "prefix");
  const elsewhere = join(tmp, "elsewhere");
  const installed = join(prefix, "lib/node_modules/chaos-core");
  const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
  const env = (extra: Record<string, string | undefined> = {}) => ({
    ...childEnv(extra),
    PATH: [join(prefix, "bin"), dirname(process.execPath)].join(delimiter),
  });
  /** A command line as a person types it in a shell, in a directory outside the clone. */
  const shell = (line: string, extra: Record<string, string | undefined> = {}) =>
    run("sh", ["-c", line], { cwd: elsewhere, env: env(extra), encoding: "utf8", timeout: 60_000 });

  beforeAll(async () => {
    mkdirSync(elsewhere);
    // About 10 s to pack and 20-30 s to install from npm's cache on a loaded two-core machine.
    const packed = await run(process.execPath, [join(ROOT, "scripts/pack.mjs"), "--out", tmp], { cwd: ROOT, encoding: "utf8" });
    const tarball = packed.stdout.trim();
    expect(tarball).toBe(join(tmp, `chaos-core-${version}.tgz`));
    await run("npm", ["install", "--global", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], {
      cwd: elsewhere,
      encoding: "utf8",
    });
  }, 300_000);

  afterAll(() => removeDir(tmp));

  it("is a command: chaos-core -v prints the version and chaos-core help the commands", async () => {
    expect(realpathSync(join(prefix, "bin/chaos-core")).startsWith(`${installed}/`)).toBe(true);
    expect((await shell("chaos-core -v")).stdout).toBe(`${version}\n`);
    const help = (await shell("chaos-core help")).stdout;
    expect(help).toMatch(/^Usage: chaos-core <command> \[options\]/);
    expect(help).toMatch(/\n {2}stdio {5}Serve MCP over stdio/);
    expect(help).toMatch(/\n {2}approvals list \| approve/);
  });

  it("chaos-core stdio serves a host, held to the chaoscore.lock inside the package, and the approve command its answer names runs in a shell", async () => {
    const data = join(tmp, "data");
    mkdirSync(data);
    writeFileSync(join(data, "policy.json"), JSON.stringify({ requireConfirmationFor: ["memory.remember"] }));
    // As a host's config names it: the command `chaos-core`, the argument `stdio`.
    const transport = new StdioClientTransport({
      command: "chaos-core",
      args: ["stdio"],
      cwd: elsewhere,
      env: env({ CHAOS_CORE_DATA_DIR: data, LOG_LEVEL: "info" }) as Record<string, string>,
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    const client = new Client({ name: "chaos-core-install-test", version: "0.0.0" });
    try {
      // A start that fails (a lock it cannot find) closes the connection: say why.
      await client.connect(transport).catch((err: Error) => {
        throw new Error(`chaos-core stdio did not answer initialize (${err.message}):\n${stderr}`);
      });
      expect(client.getServerVersion()).toMatchObject({ name: "chaos-core", version });

      // Every tool the lock pins, and only those: the served surface is the packed one.
      const lock = JSON.parse(readFileSync(join(installed, "chaoscore.lock"), "utf8")) as { tools: Record<string, unknown> };
      const tools = (await client.listTools()).tools.map((t) => t.name).sort();
      expect(tools).toEqual(Object.keys(lock.tools).sort());
      // The start-up check read the lock the package ships (kit's appRoot), not one three folders up.
      expect(stderr).toContain(`"lockFile":"${join(installed, "chaoscore.lock")}"`);

      const refused = await client.callTool({ name: "chaoscore_remember", arguments: { key: "deploy-window", value: "friday" } });
      expect(refused.isError).toBe(true);
      const message = (refused.structuredContent as { error: { code: string; message: string } }).error;
      expect(message.code).toBe("approval_required");
      const id = /approval ([0-9a-f-]{36}) waits/.exec(message.message)?.[1];
      expect(id, message.message).toBeDefined();
      // The command the answer tells the operator to run, run as they would: in a shell.
      const command = / runs (chaos-core approvals approve .+) on its machine/.exec(message.message)?.[1];
      expect(command, message.message).toMatch(new RegExp(`^chaos-core approvals approve ${id}\\b`));
      const approved = await shell(command!);
      expect(approved.stdout).toContain(`Approved ${id}`);

      const ran = (await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } })).structuredContent as Structured;
      expect((ran.results as Structured[])[0]).toMatchObject({ status: "executed", ran: true });
      const recalled = (await client.callTool({ name: "chaoscore_recall", arguments: { key: "deploy-window" } })).structuredContent as Structured;
      expect(recalled.items).toMatchObject([{ key: "deploy-window", value: "friday" }]);
    } finally {
      await client.close();
    }
  }, 180_000);
});
