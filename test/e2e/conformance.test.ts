import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeDir, ROOT, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/** The scenarios the foundation issue requires, run by the official suite (pinned 0.1.13). */
const SCENARIOS = [
  "server-initialize",
  "ping",
  "logging-set-level",
  "tools-list",
  "server-sse-multiple-streams",
  "dns-rebinding-protection",
];

function runScenario(url: string, scenario: string): Promise<{ code: number | null; output: string }> {
  const bin = join(ROOT, "node_modules/.bin/conformance");
  const proc = spawn(bin, ["server", "--url", url, "--scenario", scenario], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  proc.stdout.on("data", (d: Buffer) => (output += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (output += d.toString()));
  return new Promise((resolve) => proc.once("exit", (code) => resolve({ code, output })));
}

describe("MCP conformance suite against chaos-core serve", () => {
  const dir = tempDir();
  let serve: ServeProcess;

  beforeAll(async () => {
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dir });
  });

  afterAll(async () => {
    await serve?.stop();
    removeDir(dir);
  });

  it.each(SCENARIOS)("passes %s", async (scenario) => {
    const { code, output } = await runScenario(serve.url, scenario);
    expect(code, output).toBe(0);
    expect(output).toMatch(/Passed: (\d+)\/\1, 0 failed/);
  });
});
