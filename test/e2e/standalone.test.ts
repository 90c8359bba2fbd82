import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { removeDir, runToExit, startServe, tempDir } from "../support/processes.js";

describe("chaos-core serve on a data directory", () => {
  const dir = tempDir();
  afterAll(() => removeDir(dir));

  it("creates a safe default policy on first run and prints the endpoint on 127.0.0.1", async () => {
    const serve = await startServe({ CHAOS_CORE_DATA_DIR: dir });
    try {
      expect(serve.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      const policy = JSON.parse(readFileSync(join(dir, "policy.json"), "utf8")) as Record<string, unknown>;
      expect(policy.requireConfirmationFor).toEqual(["http.request"]);
      expect(policy.deniedCapabilities).toEqual([]);

      // A second process on the same directory fails at once and touches nothing.
      const before = snapshot(dir);
      const second = await runToExit(["serve"], { CHAOS_CORE_DATA_DIR: dir, PORT: "0" }, 30_000);
      expect(second.code).not.toBe(0);
      expect(second.stderr).toMatch(/in use by another chaos-core process/);
      expect(second.stdout).toBe("");
      expect(snapshot(dir)).toEqual(before);
    } finally {
      await serve.stop();
    }
  });

  it("refuses to start on a malformed policy file and names the field", async () => {
    const bad = tempDir();
    try {
      writeFileSync(join(bad, "policy.json"), JSON.stringify({ deniedCapabilities: ["ok.one", 7] }));
      const run = await runToExit(["serve"], { CHAOS_CORE_DATA_DIR: bad, PORT: "0" }, 60_000);
      expect(run.code).not.toBe(0);
      expect(run.stderr).toMatch(/deniedCapabilities\[1\]/);
    } finally {
      removeDir(bad);
    }
  });

  it("explains a bad setting by naming the variable", async () => {
    const run = await runToExit(["serve"], { CHAOS_CORE_DATA_DIR: dir, PORT: "not-a-port" }, 30_000);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/PORT/);
  });
});

/**
 * What a second process could have touched: the set of files (the embedded database may
 * rewrite its own files on its own schedule, so only names count there) and the policy
 * files' modification times.
 */
function snapshot(dir: string): { files: string[]; policy: number[] } {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else files.push(p);
    }
  };
  walk(dir);
  const policy = files.filter((f) => /policy[^/]*\.json$/.test(f)).map((f) => statSync(f).mtimeMs);
  return { files: files.sort(), policy };
}
