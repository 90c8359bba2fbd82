import { fileURLToPath } from "node:url";
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import { McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createLogger } from "@chaos-core/kit";
import { createRedisClient } from "@chaos-core/kit/redis";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPrivateRedis, TEST_REDIS_URL, uniquePrefix, type PrivateRedis } from "../../../../test/support/redis.js";
import { hashApiKey } from "../auth/api-keys.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { RATE_LIMITED_ERROR_CODE } from "../server/request-limits.js";
import { httpClient } from "../test-support/http.js";
import { connectInMemory, uniqueTenant } from "../test-support/in-memory.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { startHttpTransport } from "../transport/http.js";
import { createMemoryRateLimiter, createRedisRateLimiter, FALLBACK_SHARE, RateLimited, RETRY_AFTER_META_KEY, type LimitedCall, type RateLimiter } from "./limiter.js";
import { loadRateLimitsFile, parseRateLimits, type RateLimits } from "./limits-file.js";

const logger = createLogger("limits-test", "silent");
const KEY = "limits-test-key-0123456789abcdef";

const LIMITS: RateLimits = parseRateLimits({
  default: { tenant: { requests: 5, per: "minute" }, tool: { requests: 3, per: "minute", burst: 2 } },
  tenants: { roomy: { tenant: { requests: 1000, per: "second" }, tools: { chaoscore_recall: { requests: 1, per: "hour" } } } },
});

const call = (tenant: string, tool = "chaoscore_recall", principal = "alice", readOnly = true): LimitedCall => ({ tenant, principal, tool, readOnly });

/** The outcome of each admit in turn: "ok" or the refusal's code. */
async function outcomes(limiter: RateLimiter, calls: readonly LimitedCall[]): Promise<string[]> {
  const out: string[] = [];
  for (const c of calls) {
    out.push(
      await limiter.admit(c).then(
        () => "ok",
        (e: unknown) => (e as { code: string }).code,
      ),
    );
  }
  return out;
}

describe("the limits file", () => {
  it("names a bad field at its depth, and a tenant id that is not one", () => {
    expect(() => parseRateLimits({ tenants: { acme: { tools: { x: { requests: 1, per: "week" } } } } })).toThrow(/tenants\.acme\.tools\.x\.per/);
    expect(() => parseRateLimits({ default: { tenant: { requests: 0, per: "second" } } })).toThrow(/default\.tenant\.requests/);
    expect(() => parseRateLimits({ defaults: {} })).toThrow(/defaults/);
    expect(() => parseRateLimits({ tenants: { "Not A Tenant": {} } })).toThrow(/not a valid tenant id/);
  });
});

for (const [name, make] of [
  ["in Redis (shared by replicas, Redis's clock)", (limits: RateLimits) => createRedisRateLimiter(redis, limits, { prefix: uniquePrefix("limits"), logger })],
  ["in this process (the standalone)", (limits: RateLimits) => createMemoryRateLimiter(limits)],
] as const) {
  describe(`GCRA ${name}`, () => {
    it("allows the burst, then refuses with when to retry; another tenant is its own", async () => {
      const limiter = make(LIMITS);
      const t = uniqueTenant("rl");
      expect(await outcomes(limiter, [call(t), call(t), call(t)])).toEqual(["ok", "ok", "resource_exhausted"]);
      const refused = await limiter.admit(call(t)).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(RateLimited);
      // Burst 2 at 3 per minute: the next one is free 20 s after the first.
      expect((refused as RateLimited).retryAfterMs).toBeGreaterThan(15_000);
      expect((refused as RateLimited).retryAfterMs).toBeLessThanOrEqual(20_000);
      expect((refused as RateLimited).message).toMatch(/^rate limit reached: the tool's limit for this principal \(3 per minute \(burst 2\)\); retry in (1[6-9]|20) s$/);
      expect(await outcomes(limiter, [call(uniqueTenant("rl"))])).toEqual(["ok"]);
    });

    it("is all or nothing: a call one limit refuses costs the others nothing", async () => {
      const limiter = make(LIMITS);
      const t = uniqueTenant("rl");
      // Tool limit burst 2 per principal and tool; tenant limit 5 per minute in all.
      const got = await outcomes(limiter, [call(t, "a"), call(t, "a"), call(t, "a"), call(t, "a"), call(t, "b"), call(t, "b"), call(t, "c", "bob"), call(t, "c", "bob")]);
      expect(got).toEqual(["ok", "ok", "resource_exhausted", "resource_exhausted", "ok", "ok", "ok", "resource_exhausted"]);
      const tenantRefusal = await limiter.admit(call(t, "d", "carol")).catch((e: unknown) => e);
      expect((tenantRefusal as Error).message).toMatch(/^rate limit reached: the tenant's limit \(5 per minute\)/);
    });

    it("a limit per day is a quota: its burst, then the next one a day ÷ requests later", async () => {
      const limiter = make(parseRateLimits({ default: { tenant: { requests: 4, per: "day" } } }, "quota"));
      const t = uniqueTenant("rl");
      expect(await outcomes(limiter, [call(t), call(t), call(t), call(t), call(t)])).toEqual(["ok", "ok", "ok", "ok", "resource_exhausted"]);
      const refused = (await limiter.admit(call(t)).catch((e: unknown) => e)) as RateLimited;
      // Four a day: one back every six hours.
      expect(refused.retryAfterMs).toBeGreaterThan(6 * 3_600_000 - 60_000);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(6 * 3_600_000);
      expect(refused.message).toMatch(/the tenant's limit \(4 per day\); retry in 21600 s$/);
    });

    it("a tenant's own limits replace the defaults, field by field", async () => {
      const limiter = make(LIMITS);
      expect(await outcomes(limiter, [call("roomy"), call("roomy")])).toEqual(["ok", "resource_exhausted"]);
      expect(await outcomes(limiter, [call("roomy", "chaoscore_inspect"), call("roomy", "chaoscore_inspect"), call("roomy", "chaoscore_inspect")])).toEqual([
        "ok",
        "ok",
        "resource_exhausted",
      ]);
    });
  });
}

let redis: Redis;
let down: PrivateRedis;
let services: TestServices;
beforeAll(async () => {
  redis = new Redis(TEST_REDIS_URL);
  down = await startPrivateRedis();
  services = await startTestServices("rate_limits");
});
afterAll(async () => {
  await redis?.quit();
  await down?.close();
  await services?.close();
});

describe("Redis away", () => {
  it("refuses a call that changes anything (fail closed) and holds a read-only one to this replica's share", async () => {
    const client = createRedisClient(down.url, { logger, name: "limits-test" });
    try {
      const limits = parseRateLimits({ default: { tool: { requests: 8, per: "minute" } } });
      const limiter = createRedisRateLimiter(client, limits, { prefix: uniquePrefix("limits-down"), logger });
      const t = uniqueTenant("rl");
      await down.kill();
      const write = await limiter.admit(call(t, "chaoscore_remember", "alice", false)).catch((e: unknown) => e);
      expect(write).toMatchObject({ code: "unavailable", message: expect.stringContaining("the rate limits cannot be checked while Redis is unavailable") });
      // A quarter of burst 8: two read-only calls, then the local limit refuses.
      expect(FALLBACK_SHARE).toBe(0.25);
      expect(await outcomes(limiter, [call(t), call(t), call(t)])).toEqual(["ok", "ok", "resource_exhausted"]);
      await down.start();
    } finally {
      client.disconnect();
    }
  });
});

describe("a tool call over its limit", () => {
  it("is answered with resource_exhausted saying when to retry, and the tool does not run", async () => {
    const tenant = uniqueTenant("rl-mcp");
    const limiter = createMemoryRateLimiter(parseRateLimits({ default: { tool: { requests: 1, per: "hour" } } }));
    const c = await connectInMemory({ ...services.deps(createMemorySessionStore()), limiter }, { tenant, principal: "alice" });
    try {
      const first = (await c.call("chaoscore_remember", { key: "k", value: "v" })) as CallToolResult;
      expect(first.isError).toBeFalsy();
      const second = (await c.call("chaoscore_remember", { key: "k", value: "w" })) as CallToolResult;
      expect(second.isError).toBe(true);
      expect(second.structuredContent).toEqual({
        error: { code: "resource_exhausted", message: expect.stringMatching(/^rate limit reached: the tool's limit for this principal \(1 per hour\); retry in \d+ s$/) as string },
      });
      const retryAfter = second._meta?.[RETRY_AFTER_META_KEY] as number;
      expect(retryAfter).toBeGreaterThan(3_500_000);
      expect(retryAfter).toBeLessThanOrEqual(3_600_000);
      // The second write never ran: the first value is still there.
      const recalled = (await c.call("chaoscore_recall", { key: "k" })) as CallToolResult;
      expect(JSON.stringify(recalled.structuredContent)).toContain('"v"');
    } finally {
      await c.close();
    }
  });
});

describe("a read, a prompt or a completion over its limit", () => {
  it("is a JSON-RPC error saying when to retry, takes from the principal's bucket its tool calls take from, and lists stay free", async () => {
    const tenant = uniqueTenant("rl-read");
    const limiter = createMemoryRateLimiter(parseRateLimits({ default: { principal: { requests: 3, per: "hour" }, tool: { requests: 100, per: "hour" } } }));
    const c = await connectInMemory({ ...services.deps(createMemorySessionStore()), limiter }, { tenant, principal: "alice" });
    try {
      const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as McpError);
      expect((await c.client.readResource({ uri: "chaoscore://policy" })).contents).toHaveLength(1);
      expect((await c.call("chaoscore_recall", { key: "k" })).isError).toBeFalsy();
      // Served as before (not found), and counted: it did work.
      expect(await failure(c.client.getPrompt({ name: "council_phase_brief", arguments: { sessionId: "no-such-session" } }))).toMatchObject({ code: -32602 });

      const read = await failure(c.client.readResource({ uri: "chaoscore://policy" }));
      expect(read).toBeInstanceOf(McpError);
      expect(read).toMatchObject({ code: RATE_LIMITED_ERROR_CODE, data: { code: "resource_exhausted" } });
      expect(read!.message).toMatch(/resource_exhausted: rate limit reached: the principal's limit \(3 per hour\); retry in \d+ s$/);
      const retryAfter = (read!.data as { retryAfterMs: number }).retryAfterMs;
      expect(retryAfter).toBeGreaterThan(1_100_000);
      expect(retryAfter).toBeLessThanOrEqual(1_200_000);
      for (const refused of [
        failure(c.client.getPrompt({ name: "council_phase_brief", arguments: { sessionId: "no-such-session" } })),
        failure(c.client.listResources()),
        failure(c.client.complete({ ref: { type: "ref/prompt", name: "council_phase_brief" }, argument: { name: "sessionId", value: "" } })),
      ]) {
        expect(await refused).toMatchObject({ code: RATE_LIMITED_ERROR_CODE, data: { code: "resource_exhausted", retryAfterMs: expect.any(Number) as number } });
      }
      // A tool call draws from the same principal's bucket.
      const call = await c.call("chaoscore_recall", { key: "k" });
      expect(call.structuredContent).toMatchObject({ error: { code: "resource_exhausted", message: expect.stringContaining("the principal's limit") as string } });
      // What is answered from memory is not limited.
      expect((await c.client.listTools()).tools.length).toBeGreaterThan(0);
      expect((await c.client.listPrompts()).prompts.length).toBeGreaterThan(0);
      expect((await c.client.listResourceTemplates()).resourceTemplates.length).toBeGreaterThan(0);
      // Another principal of the tenant has its own bucket.
      const bob = await connectInMemory({ ...services.deps(createMemorySessionStore()), limiter }, { tenant, principal: "bob" });
      try {
        expect((await bob.client.readResource({ uri: "chaoscore://policy" })).contents).toHaveLength(1);
      } finally {
        await bob.close();
      }
    } finally {
      await c.close();
    }
  });

  it("is dispatched at once when no limit applies to it", () => {
    const limiter = createMemoryRateLimiter(parseRateLimits({ default: { tool: { requests: 1, per: "hour" } } }));
    expect(limiter.limits({ tenant: "t", principal: "p", readOnly: true })).toBe(false);
    expect(limiter.limits({ tenant: "t", principal: "p", tool: "chaoscore_recall", readOnly: true })).toBe(true);
  });
});

describe("reads over their limit through real clients over HTTP, the buckets in Redis", () => {
  it("refuses a 2025-11-25 session's and a 2026-07-28 client's resources/read past the principal's limit with the same JSON-RPC error", async () => {
    const tenant = uniqueTenant("rl-http");
    const limiter = createRedisRateLimiter(redis, parseRateLimits({ tenants: { [tenant]: { principal: { requests: 2, per: "minute" } } } }), { prefix: uniquePrefix("limits-http"), logger });
    const edge = await startHttpTransport({ ...services.deps(createMemorySessionStore()), limiter }, { port: 0, apiKeys: [{ tenant, principal: "ann", sha256: hashApiKey(KEY) }] });
    const legacy = await httpClient(edge.url, { headers: { authorization: `Bearer ${KEY}` } });
    const modern = new V2Client({ name: "v2-limited", version: "1" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    try {
      await modern.connect(new V2Http(new URL(edge.url), { requestInit: { headers: { authorization: `Bearer ${KEY}` } } }));
      expect(modern.getProtocolEra()).toBe("modern");
      // One bucket for the principal, whichever era asks.
      expect((await legacy.client.readResource({ uri: "chaoscore://policy" })).contents).toHaveLength(1);
      expect((await modern.readResource({ uri: "chaoscore://policy" })).contents).toHaveLength(1);
      const refusals = [
        await legacy.client.readResource({ uri: "chaoscore://policy" }).then(() => undefined, (e: unknown) => e as { code: number; message: string; data: unknown }),
        // Another URI: the 2026-07-28 client keeps the policy as long as its cache hint says.
        await modern.readResource({ uri: "chaoscore://ledger/checkpoint" }).then(() => undefined, (e: unknown) => e as { code: number; message: string; data: unknown }),
      ];
      for (const refused of refusals) {
        expect(refused).toMatchObject({ code: RATE_LIMITED_ERROR_CODE, data: { code: "resource_exhausted" } });
        expect(refused!.message).toMatch(/rate limit reached: the principal's limit \(2 per minute\); retry in \d+ s/);
        expect((refused!.data as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(20_000);
        expect((refused!.data as { retryAfterMs: number }).retryAfterMs).toBeLessThanOrEqual(30_000);
      }
    } finally {
      await legacy.client.close();
      await modern.close();
      await edge.close();
    }
  });
});

describe("the example file", () => {
  it("deploy/examples/rate-limits.json parses", () => {
    const limits = loadRateLimitsFile(fileURLToPath(new URL("../../../../deploy/examples/rate-limits.json", import.meta.url)));
    expect(limits.tenants.acme?.tools?.chaoscore_remember).toEqual({ requests: 10, per: "second" });
  });
});
