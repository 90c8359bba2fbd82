import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { allStarted, httpClient, removeDir, runToExit, startServe, stdioClient, tempDir, type ServeProcess } from "../support/processes.js";
import { TEST_REDIS_URL } from "../support/redis.js";

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

// Issue 30 item 10: the limits are the tenant's, not each process's. Two `chaos-core serve`
// processes on one database and one Redis hold a tenant to one budget, whichever process a call
// reaches, with the file's limits and with those `chaos-core tenants settings` stores.
describe("rate limits across two serve processes sharing Postgres and Redis", () => {
  const tag = randomBytes(3).toString("hex");
  const quota = `quota-${tag}`;
  const hourly = `hourly-${tag}`;
  const dirs = [tempDir("chaos-core-limits-1-"), tempDir("chaos-core-limits-2-"), tempDir("chaos-core-limits-cli-"), tempDir("chaos-core-limits-stdio-")];
  // The local user's (stdio's, and loopback HTTP's without a key) tenant-wide bucket: on the shared
  // Redis, so emptied before and after; no other test limits tenant "default" in Redis.
  const localBucket = "chaoscore:{default}:rl:t";
  const clients: Client[] = [];
  let db: TestDatabase;
  let redis: Redis;
  let env: Record<string, string>;
  let a: ServeProcess;
  let b: ServeProcess;

  /** Runs the CLI against the shared database and Redis; its stdout, or a failure showing its stderr. */
  async function cli(args: string[]): Promise<string> {
    const r = await runToExit(args, { ...env, CHAOS_CORE_DATA_DIR: dirs[2] });
    expect(r.code, `chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
    return r.stdout;
  }

  async function connect(serve: ServeProcess, key: string): Promise<Client> {
    const client = await httpClient(serve.url, { Authorization: `Bearer ${key}` });
    clients.push(client);
    return client;
  }

  /** Calls a read-only tool through each client in turn: `<name>:ok`, or `<name>:<error code>` with its message. */
  async function alternate(calls: ReadonlyArray<readonly [name: string, client: Client]>): Promise<{ seen: string[]; messages: string[] }> {
    const seen: string[] = [];
    const messages: string[] = [];
    for (const [name, client] of calls) {
      const result = (await client.callTool({ name: "chaoscore_inspect", arguments: { what: "policy" } })) as CallToolResult;
      const error = (result.structuredContent as { error?: { code: string; message: string } } | undefined)?.error;
      seen.push(`${name}:${result.isError ? (error?.code ?? JSON.stringify(result.content)) : "ok"}`);
      messages.push(error?.message ?? "");
    }
    return { seen, messages };
  }

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_limits");
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    const limitsFile = join(dirs[2]!, "limits.json");
    writeFileSync(limitsFile, JSON.stringify({ tenants: { [quota]: { tenant: { requests: 3, per: "day" } }, default: { tenant: { requests: 2, per: "day" } } } }));
    await redis.del(localBucket);
    env = { DATABASE_URL: db.url, REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_RATE_LIMITS_FILE: limitsFile };
    [a, b] = await allStarted([startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[0] }), startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[1] })] as const);
    await cli(["tenants", "create", quota]);
    await cli(["tenants", "create", hourly]);
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await a?.stop();
    await b?.stop();
    if (redis) {
      for (const tenant of [quota, hourly]) {
        const keys = await redis.keys(`chaoscore:{${tenant}}:*`);
        if (keys.length > 0) await redis.del(...keys);
      }
      await redis.del(localBucket);
      redis.disconnect();
    }
    await db?.drop();
    dirs.forEach(removeDir);
  });

  it("two serve processes sharing Redis share one tenant quota", async () => {
    const onA = await connect(a, (await cli(["keys", "create", "--tenant", quota, "--principal", "ann"])).trim());
    const onB = await connect(b, (await cli(["keys", "create", "--tenant", quota, "--principal", "bob"])).trim());
    const { seen, messages } = await alternate([["A", onA], ["B", onB], ["A", onA], ["B", onB]]);
    // Three a day for the whole tenant: the fourth call is refused, on whichever process it reaches.
    expect(seen).toEqual(["A:ok", "B:ok", "A:ok", "B:resource_exhausted"]);
    expect(messages[3]).toMatch(/the tenant's limit \(3 per day\); retry in \d+ s$/);
    expect(await redis.exists(`chaoscore:{${quota}}:rl:t`)).toBe(1);
  });

  it("two serve processes sharing Redis hold a tenant to the per-hour limit `tenants settings` set", async () => {
    const limitsFile = join(dirs[2]!, "hourly.json");
    writeFileSync(limitsFile, JSON.stringify({ tool: { requests: 2, per: "hour" } }));
    await cli(["tenants", "settings", hourly, "--rate-limits", limitsFile]);
    const key = (await cli(["keys", "create", "--tenant", hourly, "--principal", "hal"])).trim();
    const onA = await connect(a, key);
    const onB = await connect(b, key);
    const { seen, messages } = await alternate([["A", onA], ["B", onB], ["A", onA], ["B", onB]]);
    // Two an hour for the principal's calls of the tool, wherever they land.
    expect(seen).toEqual(["A:ok", "B:ok", "A:resource_exhausted", "B:resource_exhausted"]);
    expect(messages[2]).toMatch(/the tool's limit for this principal \(2 per hour\); retry in \d+ s$/);
    expect(await redis.keys(`chaoscore:{${hourly}}:rl:x:*:chaoscore_inspect`)).toHaveLength(1);
  });

  it("a stdio client and a serve process sharing Redis share the local user's tenant quota", async () => {
    // stdio answers before its stores are open: its first call waits for the shared limits.
    const { client: overStdio, stderr } = await stdioClient({ ...env, CHAOS_CORE_DATA_DIR: dirs[3] });
    clients.push(overStdio);
    const overHttp = await httpClient(a.url);
    clients.push(overHttp);
    const { seen, messages } = await alternate([["stdio", overStdio], ["A", overHttp], ["stdio", overStdio]]);
    expect(seen, stderr()).toEqual(["stdio:ok", "A:ok", "stdio:resource_exhausted"]);
    expect(messages[2]).toMatch(/the tenant's limit \(2 per day\); retry in \d+ s$/);
  });
});
