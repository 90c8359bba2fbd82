import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, startServe, stdioClient, tempDir } from "../support/processes.js";

interface RecallResult {
  items: Array<{ key: string; value: unknown; tags: string[] }>;
  next_cursor?: string;
}

async function remember(client: Client, key: string, value: unknown, tags: string[] = []) {
  const res = await client.callTool({ name: "chaoscore_remember", arguments: { key, value, tags } });
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
}

async function recall(client: Client, key: string): Promise<RecallResult> {
  const res = await client.callTool({ name: "chaoscore_recall", arguments: { key } });
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as unknown as RecallResult;
}

describe("memory on Postgres, shared by two processes", () => {
  let db: TestDatabase;
  const dirs = [tempDir(), tempDir()];

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    dirs.forEach(removeDir);
    await db?.drop();
  });

  it("is written over stdio, recalled over HTTP, and survives a restart", async () => {
    const value = { decision: "use Postgres", at: 42, nested: ["a", { b: true }] };
    const stdio = await stdioClient({ CHAOS_CORE_DATA_DIR: dirs[0], DATABASE_URL: db.url });
    await remember(stdio.client, "project:db", value, ["architecture"]);
    await stdio.client.close();

    let serve = await startServe({ CHAOS_CORE_DATA_DIR: dirs[1], DATABASE_URL: db.url });
    let http = await httpClient(serve.url);
    expect((await recall(http, "project:db")).items).toEqual([
      expect.objectContaining({ key: "project:db", value, tags: ["architecture"] }),
    ]);
    await http.close();
    await serve.stop();

    serve = await startServe({ CHAOS_CORE_DATA_DIR: dirs[1], DATABASE_URL: db.url });
    http = await httpClient(serve.url);
    expect((await recall(http, "project:db")).items[0]?.value).toEqual(value);
    await http.close();
    await serve.stop();
  });
});

describe("memory on the embedded default", () => {
  const dir = tempDir();
  afterAll(() => removeDir(dir));

  it("is written over stdio and recalled over HTTP after a restart on the same data directory", async () => {
    // The database as a first run left it (schemas only): this is about what the stores keep.
    await seedDataDir(dir);
    const stdio = await stdioClient({ CHAOS_CORE_DATA_DIR: dir });
    await remember(stdio.client, "note", "embedded works");
    await stdio.client.close();

    const serve = await startServe({ CHAOS_CORE_DATA_DIR: dir });
    const http = await httpClient(serve.url);
    expect((await recall(http, "note")).items[0]?.value).toBe("embedded works");
    await http.close();
    await serve.stop();
  });
});
