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

  it("never uses a half-created database: a creation that did not finish is started again from nothing", async () => {
    const dir = join(dataDir, "created");
    // What a process SIGKILLed mid-creation leaves: the marker, and a pg/ with some of a database.
    mkdirSync(join(dir, "pg"), { recursive: true });
    writeFileSync(join(dir, "pg", "PG_VERSION"), "17\n");
    writeFileSync(join(dir, "pg.creating"), "999999\n");
    const db = await openEmbeddedDb(dir, { create: true });
    try {
      await db.adminTx((q) => q.exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"));
    } finally {
      await db.close();
    }
    expect(readdirSync(dir)).toEqual(["pg"]);
    // Complete now: opened again as it is, with what was written to it.
    const again = await openEmbeddedDb(dir, { create: true });
    try {
      expect((await again.adminTx((q) => q.query<{ v: number }>("SELECT v FROM kept"))).rows).toEqual([{ v: 42 }]);
    } finally {
      await again.close();
    }
    expect(readdirSync(dir)).toEqual(["pg"]);
  }, 120_000);

  it("counts an empty pg/ (what a kill left before the marker existed) as no database", async () => {
    const dir = join(dataDir, "empty");
    mkdirSync(join(dir, "pg"), { recursive: true });
    const db = await openEmbeddedDb(dir, { create: true });
    await db.close();
    expect(existsSync(join(dir, "pg", "PG_VERSION"))).toBe(true);
    expect(readdirSync(dir)).toEqual(["pg"]);
  }, 120_000);
});
