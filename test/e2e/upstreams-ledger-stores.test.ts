import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { removeDir, ROOT, runToExit, tempDir } from "../support/processes.js";

/**
 * `chaos-core upstreams lock` and `approve` with no server running on Postgres (DATABASE_URL, a
 * fresh database): the command records the change in the ledger itself, and a change the ledger
 * cannot record is not made — the lock is left as it was (docs/federation.md §4).
 */

const CHANGING = join(ROOT, "test/support/upstreams/changing-server.mjs");
const tools = (required: string[]) => ({
  tools: [{ name: "echo", description: "Echoes its message back", inputSchema: { type: "object", properties: { message: { type: "string" }, to: { type: "string" } }, required } }],
});

describe("upstreams lock and approve on Postgres, no server running", () => {
  const dir = tempDir("chaos-core-upstreams-pg-");
  const definitions = join(dir, "changing-tools.json");
  const lock = join(dir, "upstreams.lock");
  let db: TestDatabase;
  const env = () => ({ CHAOS_CORE_DATA_DIR: dir, DATABASE_URL: db.url });
  // Nothing listens on port 1: the ledger cannot be written.
  const unreachable = () => ({ CHAOS_CORE_DATA_DIR: dir, DATABASE_URL: "postgres://postgres@127.0.0.1:1/nothing" });

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_upstreams");
    writeFileSync(definitions, JSON.stringify(tools(["message"])));
    writeFileSync(join(dir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "changing", command: process.execPath, args: [CHANGING, definitions] }] }));
  });

  afterAll(async () => {
    await db?.drop();
    removeDir(dir);
  });

  it("refuses to pin when the ledger cannot record it: no lock is written", async () => {
    const refused = await runToExit(["upstreams", "lock"], unreachable(), 60_000);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/the audit ledger could not record the change, so .*upstreams\.lock was not written/);
    expect(existsSync(lock)).toBe(false);
  });

  it("records the pin in the Postgres ledger (tenant default), then writes the lock", async () => {
    const locked = await runToExit(["upstreams", "lock"], env(), 60_000);
    expect(locked.code, locked.stderr).toBe(0);
    expect(locked.stdout).toMatch(/recorded in the audit ledger \(tenant default\): changing as entry 1\n/);
    const digest = (JSON.parse(readFileSync(lock, "utf8")) as { upstreams: { changing: { tools: { echo: { digest: string } } } } }).upstreams.changing.tools.echo.digest;
    const exported = await runToExit(["ledger", "export", "--database-url", db.url, "--tenant", "default"], {}, 30_000);
    expect(exported.code, exported.stderr).toBe(0);
    const entries = exported.stdout.split("\n").filter((l) => l.includes('"type":"entry"')).map((l) => JSON.parse(l) as { principal: string; event: Record<string, unknown> });
    expect(entries).toEqual([
      expect.objectContaining({
        principal: "operator",
        event: { type: "upstream.pinned", upstream: "changing", verdict: "SAFE", by: userInfo().username, tools: [{ tool: "echo", change: "added", digest }] },
      }),
    ]);
  });

  it("refuses an approval the ledger cannot record: the lock keeps the old pin", async () => {
    const before = readFileSync(lock, "utf8");
    writeFileSync(definitions, JSON.stringify(tools(["message", "to"])));
    const refused = await runToExit(["upstreams", "approve", "changing", "echo"], unreachable(), 60_000);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("the audit ledger could not record the change");
    expect(readFileSync(lock, "utf8")).toBe(before);
    const approved = await runToExit(["upstreams", "approve", "changing", "echo"], env(), 60_000);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(/recorded in the audit ledger as entry 2\n/);
    expect(readFileSync(lock, "utf8")).not.toBe(before);
  });
});
