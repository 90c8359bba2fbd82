import { existsSync } from "node:fs";
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
});
