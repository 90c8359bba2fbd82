import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { childEnv, CLI, removeDir, ROOT, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * The MCP Inspector's command-line mode (`@modelcontextprotocol/inspector@0.15.0 --cli`, the
 * newest that runs on Node 20; issue 11 "must be shown") against chaos-core, over Streamable HTTP
 * (`chaos-core serve`) and over stdio (the Inspector starts `chaos-core stdio` itself): it lists
 * the resources and resource templates and reads one. The Inspector is no project dependency:
 * `bash scripts/ci/inspector.sh --prepare` installs it into .cache/inspector, and .ci/run always does.
 */
const INSPECTOR = join(ROOT, ".cache/inspector/node_modules/@modelcontextprotocol/inspector/cli/build/cli.js");
const prepared = existsSync(INSPECTOR);
if (!prepared) {
  console.warn(`inspector.test.ts skipped: the MCP Inspector is not in ${INSPECTOR}; run 'bash scripts/ci/inspector.sh --prepare' (.ci/run always does)`);
}

/** Runs `mcp-inspector --cli ARGS` to its end; its stdout is the method's result as JSON. */
function inspector(args: string[], env: Record<string, string | undefined> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // The Inspector starts its CLI with `node` from PATH: this Node.
  const path = `${dirname(process.execPath)}:${process.env.PATH ?? ""}`;
  const proc = spawn(process.execPath, [INSPECTOR, "--cli", ...args], { cwd: ROOT, env: childEnv({ PATH: path, ...env }), stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => proc.once("exit", (code) => resolve({ code, stdout, stderr })));
}

/** The JSON result an Inspector run printed, or a failure that shows what it said. */
function result(run: { code: number | null; stdout: string; stderr: string }): Record<string, unknown> {
  expect(run.code, `the Inspector exited ${run.code}:\n${run.stderr}\n${run.stdout}`).toBe(0);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

type Listed = { resources: Array<{ uri: string; name: string; mimeType?: string }> };
type Templates = { resourceTemplates: Array<{ uriTemplate: string }> };
type Read = { contents: Array<{ uri: string; mimeType?: string; text?: string }> };

describe.skipIf(!prepared)("the MCP Inspector's CLI against chaos-core", () => {
  const dir = tempDir("chaos-core-inspector-");
  let serve: ServeProcess | undefined;
  let httpListing: Listed;

  beforeAll(async () => {
    await seedDataDir(dir);
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dir });
  }, 120_000);
  afterAll(async () => {
    await serve?.stop();
    removeDir(dir);
  });

  it("over Streamable HTTP (chaos-core serve): lists resources and templates, reads the policy", async () => {
    httpListing = result(await inspector([serve!.url, "--method", "resources/list"])) as unknown as Listed;
    expect(httpListing.resources.map((r) => r.uri)).toEqual(expect.arrayContaining(["chaoscore://policy", "chaoscore://capabilities"]));
    const templates = result(await inspector([serve!.url, "--method", "resources/templates/list"])) as unknown as Templates;
    expect(templates.resourceTemplates.map((t) => t.uriTemplate)).toContain("council://sessions/{id}");
    const read = result(await inspector([serve!.url, "--method", "resources/read", "--uri", "chaoscore://policy"])) as unknown as Read;
    expect(read.contents[0]).toMatchObject({ uri: "chaoscore://policy", mimeType: "application/json" });
    expect(JSON.parse(read.contents[0]!.text!)).toMatchObject({ version: expect.any(Number) });
    // A resource that is not there: the Inspector reports the server's error and exits non-zero.
    const missing = await inspector([serve!.url, "--method", "resources/read", "--uri", "council://sessions/not-a-session"]);
    expect(missing.code).not.toBe(0);
    expect(missing.stdout + missing.stderr).toMatch(/-32602|not found/i);
  }, 180_000);

  it("over stdio (the Inspector starts chaos-core stdio): the same resources, and reads the capability registry", async () => {
    // The data directory belongs to one process: the HTTP server gives it back first.
    await serve!.stop();
    serve = undefined;
    const target = ["-e", `CHAOS_CORE_DATA_DIR=${dir}`, "-e", "LOG_LEVEL=warn", "--", process.execPath, CLI, "stdio"];
    const listing = result(await inspector([...target, "--method", "resources/list"])) as unknown as Listed;
    expect(listing.resources).toEqual(httpListing.resources);
    const read = result(await inspector([...target, "--method", "resources/read", "--uri", "chaoscore://capabilities"])) as unknown as Read;
    expect(read.contents[0]).toMatchObject({ uri: "chaoscore://capabilities", mimeType: "application/json" });
    expect(read.contents[0]!.text).toContain("memory.remember");
  }, 180_000);
});
