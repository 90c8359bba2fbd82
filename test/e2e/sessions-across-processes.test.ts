import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { openSession, rpc } from "../support/mcp-http.js";
import { removeDir, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { TEST_REDIS_URL } from "../support/redis.js";

function call(id: number, name: string, args: Record<string, unknown>) {
  return { jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } };
}

describe("one MCP session served by two edge processes sharing Redis", () => {
  let db: TestDatabase;
  const dirs = [tempDir(), tempDir()];
  let a: ServeProcess;
  let b: ServeProcess;

  beforeAll(async () => {
    db = await createTestDatabase();
    const env = { DATABASE_URL: db.url, REDIS_URL: TEST_REDIS_URL };
    a = await startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[0] });
    b = await startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[1] });
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    dirs.forEach(removeDir);
    await db?.drop();
  });

  it("lets the second process serve a session the first one created, and DELETE end it everywhere", async () => {
    const session = await openSession(a.url);

    const wrote = await rpc(b.url, session, call(10, "chaoscore_remember", { key: "shared", value: "from b" }));
    expect(wrote.status).toBe(200);
    expect((wrote.message?.result as { isError?: boolean }).isError).toBeFalsy();

    const read = await rpc(a.url, session, call(11, "chaoscore_recall", { key: "shared" }));
    expect(read.status).toBe(200);
    expect(JSON.stringify(read.message?.result)).toContain("from b");

    const inspected = await rpc(b.url, session, call(12, "chaoscore_inspect", { what: "sessions" }));
    expect(JSON.stringify(inspected.message?.result)).toContain(session);

    const del = await fetch(b.url, { method: "DELETE", headers: { "mcp-session-id": session } });
    expect(del.status).toBe(200);
    expect((await rpc(a.url, session, call(13, "chaoscore_recall", { key: "shared" }))).status).toBe(404);
    expect((await rpc(b.url, session, call(14, "chaoscore_recall", { key: "shared" }))).status).toBe(404);
  });
});
