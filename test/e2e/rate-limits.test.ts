import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { removeDir, runToExit, stdioClient, tempDir } from "../support/processes.js";

// CHAOS_CORE_RATE_LIMITS_FILE as chaos-core reads it (docs/operations.md "Rate limits"): a bad
// file stops the start naming the field; a good one holds a real client's calls to it.
describe("chaos-core with a rate limits file", () => {
  const dir = tempDir();
  const dataDirs: string[] = [];
  // Not a first run: a copy of the run's pre-built embedded database (test/support/data-dir-template.ts).
  const dataDir = async () => {
    const d = tempDir();
    dataDirs.push(d);
    await seedDataDir(d);
    return d;
  };
  afterAll(() => {
    for (const d of [dir, ...dataDirs]) removeDir(d);
  });

  it("refuses to start with a bad file, naming the field", async () => {
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify({ default: { tool: { requests: 10, per: "fortnight" } } }));
    const run = await runToExit(["stdio"], { CHAOS_CORE_DATA_DIR: await dataDir(), CHAOS_CORE_RATE_LIMITS_FILE: bad });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toMatch(/CHAOS_CORE_RATE_LIMITS_FILE .*bad\.json: default\.tool\.per/);
  });

  it("holds a client's calls to the tool's limit, and says when to retry", async () => {
    const file = join(dir, "limits.json");
    writeFileSync(file, JSON.stringify({ default: { tool: { requests: 2, per: "hour" } } }));
    const { client } = await stdioClient({ CHAOS_CORE_DATA_DIR: await dataDir(), CHAOS_CORE_RATE_LIMITS_FILE: file });
    try {
      const inspect = () => client.callTool({ name: "chaoscore_inspect", arguments: { what: "policy" } }) as Promise<CallToolResult>;
      expect((await inspect()).isError).toBeFalsy();
      expect((await inspect()).isError).toBeFalsy();
      const third = await inspect();
      expect(third.isError).toBe(true);
      expect(third.structuredContent).toMatchObject({ error: { code: "resource_exhausted", message: expect.stringMatching(/retry in \d+ s$/) as string } });
      // Another tool has its own bucket.
      expect(((await client.callTool({ name: "chaoscore_recall", arguments: { key: "none" } })) as CallToolResult).isError).toBeFalsy();
    } finally {
      await client.close();
    }
  });
});
