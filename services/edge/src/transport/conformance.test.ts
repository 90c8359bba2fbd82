import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "./http.js";

// The official MCP conformance suite (pinned 0.1.13, the last that runs on Node 20) against
// startHttpTransport, for the scenarios this issue requires.

const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));
const SCENARIOS = [
  "server-initialize",
  "ping",
  "logging-set-level",
  "tools-list",
  "server-sse-multiple-streams",
  "dns-rebinding-protection",
];

function runScenario(url: string, scenario: string): Promise<{ code: number | null; output: string }> {
  const bin = `${ROOT}node_modules/.bin/conformance`;
  const proc = spawn(bin, ["server", "--url", url, "--scenario", scenario], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  proc.stdout.on("data", (d: Buffer) => (output += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (output += d.toString()));
  return new Promise((resolve) => proc.once("exit", (code) => resolve({ code, output })));
}

let services: TestServices;
let edge: RunningHttpTransport;

beforeAll(async () => {
  services = await startTestServices("conformance");
  edge = await startHttpTransport(services.deps(), { port: 0 });
});

afterAll(async () => {
  await edge?.close();
  await services?.close();
});

describe("MCP conformance suite against the HTTP transport", () => {
  it.each(SCENARIOS)("passes %s", async (scenario) => {
    const { code, output } = await runScenario(edge.url, scenario);
    expect(code, output).toBe(0);
    expect(output).toMatch(/Passed: (\d+)\/\1, 0 failed, 0 warnings/);
  });
});
