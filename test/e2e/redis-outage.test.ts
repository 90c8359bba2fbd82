import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createPostgresDb } from "@chaos-core/kit";
import { createSqlPolicyStore, migratePolicy, validatePolicyDocument } from "@chaos-core/policy";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initializeBody, MCP_HEADERS, readJsonRpc } from "../support/mcp-http.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { httpClient, removeDir, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { startPrivateRedis, type PrivateRedis } from "../support/redis.js";

type ToolResult = Awaited<ReturnType<Client["callTool"]>>;
type Structured = Record<string, unknown>;

function ok(res: ToolResult): Structured {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as Structured;
}

/** A governed write that the test's policy gates behind a human approval, which lives in Redis. */
const GATED_STEP = { id: "note", capability: "memory.remember", input: { key: "deploy-window", value: "friday 18:00" } };

/** Retries `attempt` until it stops throwing: Redis is back when the client has reconnected. */
async function eventually<T>(attempt: () => Promise<T>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what} did not succeed in time: ${(err as Error).message}`, { cause: err });
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Stores the tenant's policy in the test database, as an operator would before start-up. */
async function gateRemember(url: string): Promise<void> {
  const db = createPostgresDb({ connectionString: url });
  try {
    await migratePolicy(db);
    const store = createSqlPolicyStore(db);
    await store.put("default", validatePolicyDocument({ requireConfirmationFor: ["memory.remember"] }, "test"));
    await store.close();
  } finally {
    await db.close();
  }
}

/**
 * `chaos-core serve` on Postgres and a private `redis-server` that the test kills and starts
 * again (never the shared one): what needs no Redis keeps serving on a session the process
 * already knows, what needs Redis fails closed with `unavailable` naming Redis, and everything
 * works again once Redis is back, without restarting the server.
 */
describe("chaos-core serve through a Redis outage", () => {
  const dir = tempDir("chaos-core-redis-outage-");
  let redis: PrivateRedis;
  let db: TestDatabase;
  let serve: ServeProcess;
  let client: Client;
  let councilSession: string;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    db = await createTestDatabase();
    await gateRemember(db.url);
    serve = await startServe({ DATABASE_URL: db.url, REDIS_URL: redis.url, CHAOS_CORE_DATA_DIR: dir });
    client = await httpClient(serve.url);
    ({ sessionId: councilSession } = ok(
      await client.callTool({ name: "council_init", arguments: { task: "Move the billing database to Postgres 16" } }),
    ) as { sessionId: string });
    await redis.kill();
  });

  afterAll(async () => {
    await client?.close().catch(() => undefined);
    await serve?.stop();
    await redis?.close();
    await db?.drop();
    removeDir(dir);
  });

  it("still answers chp_version, council_recall and chaoscore_recall on an open session while Redis is down", async () => {
    expect(ok(await client.callTool({ name: "chp_version", arguments: {} }))).toMatchObject({ info: { chp: { version: "1.0" } } });
    expect(ok(await client.callTool({ name: "council_recall", arguments: { sessionId: councilSession } }))).toMatchObject({
      sessionId: councilSession,
    });
    // Recall logs its policy decision to the client, at the level kept in the session store.
    expect(ok(await client.callTool({ name: "chaoscore_recall", arguments: { key: "deploy-window" } }))).toMatchObject({ items: [] });
  });

  it("fails a gated step closed with unavailable naming Redis, and runs nothing", async () => {
    const executed = ok(await client.callTool({ name: "chaoscore_execute", arguments: { steps: [GATED_STEP] } }));
    const [step] = executed.results as Structured[];
    expect(step).toMatchObject({ status: "failed", error: { code: "unavailable" } });
    expect((step!.error as { message: string }).message).toMatch(/Redis is unavailable/);
    expect(step!.ran).toBe(false);
    // Nothing was written: the gated remember never reached memory.
    expect(ok(await client.callTool({ name: "chaoscore_recall", arguments: { key: "deploy-window" } }))).toMatchObject({ items: [] });
  });

  it("refuses a plan, which has to be stored, with unavailable naming Redis", async () => {
    const planned = await client.callTool({ name: "chaoscore_plan", arguments: { objective: "fetch https://example.com/" } });
    expect(planned.isError).toBe(true);
    expect(planned.structuredContent).toMatchObject({ error: { code: "unavailable", message: expect.stringMatching(/Redis is unavailable/) } });
  });

  it("refuses a new session it cannot store with 503 naming Redis", async () => {
    const res = await fetch(serve.url, { method: "POST", headers: MCP_HEADERS, body: JSON.stringify(initializeBody()) });
    expect(res.status).toBe(503);
    expect(res.headers.get("mcp-session-id")).toBeNull();
    const body = await readJsonRpc(res);
    expect((body?.error as { message: string }).message).toMatch(/Redis is unavailable/);
  });

  it("stays ready on /readyz, degraded, so a load balancer keeps sending it the calls it can serve", async () => {
    const res = await fetch(serve.url.replace(/\/mcp$/, "/readyz"));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "degraded", checks: { sessions: { ok: false, error: "unavailable" } } });
  });

  it("serves every call again once Redis is back, without a restart", async () => {
    await redis.start();
    const planned = await eventually(async () => {
      const res = await client.callTool({ name: "chaoscore_plan", arguments: { objective: "fetch https://example.com/" } });
      if (res.isError) throw new Error(JSON.stringify(res.structuredContent));
      return res.structuredContent as Structured;
    }, "chaoscore_plan after Redis returned");
    expect(planned.plan_id).toEqual(expect.any(String));

    const executed = ok(await client.callTool({ name: "chaoscore_execute", arguments: { steps: [GATED_STEP] } }));
    expect((executed.results as Structured[])[0]).toMatchObject({ status: "pending_approval" });

    const fresh = await httpClient(serve.url);
    expect(ok(await fresh.callTool({ name: "chp_version", arguments: {} }))).toMatchObject({ info: { chp: { version: "1.0" } } });
    await fresh.close();
    expect(serve.proc.exitCode).toBeNull();
  });
});

/**
 * `chaos-core serve` with rate limits, whose buckets are in Redis: while a private `redis-server`
 * is down, a read-only tool keeps working on this process's quarter of each limit, and a tool
 * that changes anything is refused with `unavailable`, since its limits cannot be checked
 * (DESIGN "Redis outage"; docs/operations.md "Rate limits").
 */
describe("chaos-core serve's rate limits through a Redis outage", () => {
  const dir = tempDir("chaos-core-redis-outage-limits-");
  let redis: PrivateRedis;
  let db: TestDatabase;
  let serve: ServeProcess;
  let client: Client;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    db = await createTestDatabase();
    const limitsFile = join(dir, "limits.json");
    writeFileSync(limitsFile, JSON.stringify({ default: { tool: { requests: 8, per: "minute" } } }));
    serve = await startServe({ DATABASE_URL: db.url, REDIS_URL: redis.url, CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_RATE_LIMITS_FILE: limitsFile });
    // The session is stored before Redis goes: one this process already knows.
    client = await httpClient(serve.url);
    ok(await client.callTool({ name: "chaoscore_inspect", arguments: { what: "policy" } }));
    await redis.kill();
  });

  afterAll(async () => {
    await client?.close().catch(() => undefined);
    await serve?.stop();
    await redis?.close();
    await db?.drop();
    removeDir(dir);
  });

  it("keeps a read-only tool working on this process's share of its limit, and refuses a write it cannot count", async () => {
    // 8 a minute shared; alone, a quarter of it: 2 at once.
    const inspect = () => client.callTool({ name: "chaoscore_inspect", arguments: { what: "policy" } });
    ok(await inspect());
    ok(await inspect());
    const third = await inspect();
    expect(third.isError).toBe(true);
    expect(third.structuredContent).toMatchObject({ error: { code: "resource_exhausted", message: expect.stringMatching(/the tool's limit for this principal \(8 per minute\); retry in \d+ s$/) as string } });

    const write = await client.callTool({ name: "chaoscore_remember", arguments: { key: "during-outage", value: "not counted" } });
    expect(write.isError).toBe(true);
    expect(write.structuredContent).toMatchObject({
      error: { code: "unavailable", message: expect.stringContaining("the rate limits cannot be checked while Redis is unavailable") as string },
    });
  });
});
