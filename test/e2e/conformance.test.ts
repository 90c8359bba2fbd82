import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { afterOutput, removeDir, ROOT, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance 0.2.0-alpha.12, on the
 * Node 22 that scripts/ci/conformance.sh caches in .cache/) against `chaos-core serve` at
 * protocol revisions 2025-11-25 and 2026-07-28, both on its one /mcp endpoint, one scenario per
 * run of the script (docs/protocol.md §12).
 */
const SCRIPT = join(ROOT, "scripts/ci/conformance.sh");

/**
 * The scenarios issue 11 names that pass today, per revision; step 10 adds server-sse-polling
 * (2025-11-25).
 */
const REQUIRED_PROTOCOL_SCENARIOS: Record<string, string[]> = {
  "2025-11-25": [
    "server-initialize",
    "server-session-lifecycle",
    "ping",
    "logging-set-level",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "resources-list",
    "resources-subscribe",
    "resources-unsubscribe",
  ],
  // server-stateless runs as a fixture scenario: every check passes but the four its baseline names.
  "2026-07-28": [
    "http-header-validation",
    "caching",
    "sep-2164-resource-not-found",
    "dns-rebinding-protection",
    "tools-list",
    "prompts-list",
    "resources-list",
    "server-sse-multiple-streams",
  ],
};

function listed(path: string): string[] {
  return readFileSync(join(ROOT, path), "utf8")
    .split("\n")
    .map((line) => line.replace(/#.*/, "").trim())
    .filter((line) => line !== "");
}

/** `scenario:check` per entry of the baseline's `server:` list (the script reads it the same way). */
function baselineEntries(path: string): string[] {
  return readFileSync(join(ROOT, path), "utf8")
    .split("\n")
    .flatMap((line) => /^ {2}- ([^ #]+)/.exec(line)?.[1] ?? []);
}

function runScript(args: string[]): Promise<{ code: number | null; output: string }> {
  const proc = spawn("bash", [SCRIPT, ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  proc.stdout.on("data", (d: Buffer) => (output += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (output += d.toString()));
  // Once its output is read: the script can exit before its last line (the verdict) reaches us.
  return new Promise((resolve) => afterOutput(proc, (code) => resolve({ code, output })));
}

describe("official MCP conformance suite (0.2.0-alpha.12, Node 22) against chaos-core serve", () => {
  const dir = tempDir();
  let serve: ServeProcess;

  beforeAll(async () => {
    // Fails every test below with the script's own message (which names the command to run)
    // when .cache/ does not hold Node 22 and the suite at the pinned versions.
    const ready = await runScript(["--check"]);
    if (ready.code !== 0) throw new Error(ready.output.trim());
    await seedDataDir(dir);
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dir });
  });

  afterAll(async () => {
    await serve?.stop();
    removeDir(dir);
  });

  describe.each(Object.keys(REQUIRED_PROTOCOL_SCENARIOS))("at revision %s", (revision) => {
    const PROTOCOL = listed(`test/conformance/scenarios.${revision}.txt`);
    const BASELINE = baselineEntries(`test/conformance/expected-failures.${revision}.yaml`);
    const FIXTURE = [...new Set(BASELINE.map((entry) => entry.split(":")[0]!))];
    const run = (scenario: string, url = serve.url) => runScript(["--url", url, "--spec-version", revision, "--scenario", scenario]);

    it("lists the issue's protocol scenarios, and none of them in the expected failures", () => {
      expect(PROTOCOL).toEqual(expect.arrayContaining(REQUIRED_PROTOCOL_SCENARIOS[revision]!));
      expect(FIXTURE.filter((scenario) => PROTOCOL.includes(scenario))).toEqual([]);
      expect(FIXTURE.length).toBeGreaterThan(0);
    });

    it.concurrent.each(PROTOCOL)("protocol scenario %s: every check passes", async (scenario) => {
      const { code, output } = await run(scenario);
      expect(code, output).toBe(0);
      expect(output, output).toMatch(/^Passed: ([1-9]\d*)\/\1, 0 failed, 0 warnings$/m);
      expect(output).toContain(`::: ${scenario}: ok`);
    });

    it.concurrent.each(FIXTURE)("fixture scenario %s: only the checks needing the suite's fixture fail", async (scenario) => {
      const { code, output } = await run(scenario);
      expect(code, output).toBe(0);
      for (const entry of BASELINE.filter((e) => e.startsWith(`${scenario}:`))) expect(output, output).toContain(`  ~ ${entry}`);
      expect(output, output).not.toContain("Unexpected failures");
      expect(output).toContain(`::: ${scenario}: ok`);
    });

    it("passes the revision's requirement set, failing only the listed fixture checks", async () => {
      const { code, output } = await runScript(["--url", serve.url, "--spec-version", revision, "--requirements"]);
      expect(code, output).toBe(0);
      expect(output, output).toContain("Baseline check passed: all failures are expected.");
      expect(output, output).not.toContain("Unexpected failures");
      expect(output).toContain(`::: requirements ${revision}: ok`);
    });

    it("fails a protocol scenario the server does not pass (the endpoint path answers 404)", async () => {
      const { code, output } = await run("tools-list", serve.url.replace(/\/mcp$/, "/not-mcp"));
      expect(code, output).not.toBe(0);
      expect(output).toContain("::: tools-list: FAILED");
    });
  });
});
