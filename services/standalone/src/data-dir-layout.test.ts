import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { embeddedDbPath, openEmbeddedDb, policyFilePath } from "./data-dir-layout.js";

let dataDir: string;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "chaoscore-layout-"));
});

afterAll(async () => {
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe("the data directory's layout", () => {
  it("keeps the embedded database in pg/ and the capability policy in policy.json", () => {
    expect(embeddedDbPath(dataDir)).toBe(join(dataDir, "pg"));
    expect(policyFilePath(dataDir)).toBe(join(dataDir, "policy.json"));
  });

  it("tells a command on a Postgres-backed server's directory to use --database-url, and creates no database there", async () => {
    await expect(openEmbeddedDb(dataDir)).rejects.toThrow(
      `${dataDir} holds no embedded database: its server keeps its stores in Postgres (DATABASE_URL); use --database-url`,
    );
    expect(existsSync(embeddedDbPath(dataDir))).toBe(false);
  });

  it("creates a database whole or not at all: built aside and renamed to pg/, a killed creation's leftovers removed", async () => {
    const dir = join(dataDir, "created");
    // What a process SIGKILLed mid-creation leaves: its scratch directory, or (before) an empty pg/.
    mkdirSync(join(dir, "pg.creating-999999"), { recursive: true });
    writeFileSync(join(dir, "pg.creating-999999", "PG_VERSION"), "17\n");
    mkdirSync(join(dir, "pg"));
    const db = await openEmbeddedDb(dir, { create: true });
    try {
      await db.adminTx((q) => q.exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"));
    } finally {
      await db.close();
    }
    expect(readdirSync(dir)).toEqual(["pg"]);
    expect(existsSync(join(dir, "pg", "PG_VERSION"))).toBe(true);
    // The renamed database opens where it now is, with what was written to it.
    const again = await openEmbeddedDb(dir, { create: true });
    try {
      expect((await again.adminTx((q) => q.query<{ v: number }>("SELECT v FROM kept"))).rows).toEqual([{ v: 42 }]);
    } finally {
      await again.close();
    }
    expect(readdirSync(dir)).toEqual(["pg"]);
  }, 120_000);
});
