import { fileURLToPath } from "node:url";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createLogger } from "@chaos-core/kit";
import { createRedisClient } from "@chaos-core/kit/redis";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPrivateRedis, TEST_REDIS_URL, uniquePrefix, type PrivateRedis } from "../../../../test/support/redis.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { connectInMemory, uniqueTenant } from "../test-support/in-memory.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { createMemoryRateLimiter, createRedisRateLimiter, FALLBACK_SHARE, RateLimited, RETRY_AFTER_META_KEY, type LimitedCall, type RateLimiter } from "./limiter.js";
import { loadRateLimitsFile, parseRateLimits, type RateLimits } from "./limits-file.js";

const logger = createLogger("limits-test", "silent");

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

describe("the example file", () => {
  it("deploy/examples/rate-limits.json parses", () => {
    const limits = loadRateLimitsFile(fileURLToPath(new URL("../../../../deploy/examples/rate-limits.json", import.meta.url)));
    expect(limits.tenants.acme?.tools?.chaoscore_remember).toEqual({ requests: 10, per: "second" });
  });
});
