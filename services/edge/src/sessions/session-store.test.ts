import { createHash } from "node:crypto";
import calculateSlot from "cluster-key-slot";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_REDIS_URL, uniquePrefix } from "../../../../test/support/redis.js";
import { createMemorySessionStore } from "./memory-store.js";
import { createRedisSessionStore } from "./redis-store.js";
import type { NewSessionRecord, SessionStore } from "./session-store.js";

function record(id: string, tenant = "acme", principal = "alice"): NewSessionRecord {
  return {
    id,
    tenant,
    principal,
    transport: "http",
    protocolVersion: "2025-11-25",
    clientInfo: { name: "client", version: "1.2.3", icons: [] },
    clientCapabilities: { elicitation: {}, roots: { listChanged: true } },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The contract every SessionStore meets; `ttl` is short so expiry can be observed. */
function contract(name: string, make: (ttlSeconds: number) => SessionStore) {
  describe(`${name} session store`, () => {
    it("creates, reads, updates and deletes a record, keeping what initialize said", async () => {
      const store = make(60);
      const created = await store.create(record("s1"));
      expect(created.createdAt).toBe(created.lastSeenAt);
      const read = await store.get("acme", "s1");
      expect(read).toEqual(created);
      expect(read?.clientInfo).toEqual({ name: "client", version: "1.2.3", icons: [] });

      expect((await store.update("acme", "s1", { logLevel: "warning" }))?.logLevel).toBe("warning");
      expect((await store.get("acme", "s1"))?.logLevel).toBe("warning");

      expect(await store.delete("acme", "s1")).toBe(true);
      expect(await store.get("acme", "s1")).toBeUndefined();
      expect(await store.delete("acme", "s1")).toBe(false);
      expect(await store.update("acme", "s1", { logLevel: "debug" })).toBeUndefined();
      expect(await store.touch("acme", "s1")).toBeUndefined();
    });

    it("keeps a session's resource subscriptions, each added and removed on its own, beside its log level", async () => {
      const store = make(60);
      await store.create(record("subs"));
      expect((await store.get("acme", "subs"))?.subscriptions ?? []).toEqual([]);
      await store.update("acme", "subs", { subscribe: "chaoscore://policy" });
      await store.update("acme", "subs", { subscribe: "council://sessions/x" });
      await store.update("acme", "subs", { subscribe: "chaoscore://policy" });
      await store.update("acme", "subs", { logLevel: "error" });
      const read = await store.touch("acme", "subs");
      expect([...(read?.subscriptions ?? [])].sort()).toEqual(["chaoscore://policy", "council://sessions/x"]);
      expect(read?.logLevel).toBe("error");
      const left = await store.update("acme", "subs", { unsubscribe: "chaoscore://policy" });
      expect(left?.subscriptions).toEqual(["council://sessions/x"]);
      await store.update("acme", "subs", { unsubscribe: "never-subscribed" });
      expect((await store.get("acme", "subs"))?.subscriptions).toEqual(["council://sessions/x"]);
      await store.delete("acme", "subs");
      expect(await store.update("acme", "subs", { subscribe: "chaoscore://policy" })).toBeUndefined();
      expect(await store.get("acme", "subs")).toBeUndefined();
    });

    it("keeps the SHA-256 of the API key that opened a session, which ends the session once revoked", async () => {
      const store = make(60);
      const keySha256 = createHash("sha256").update("the key", "utf8").digest("hex");
      await store.create({ ...record("keyed"), keySha256 });
      expect((await store.get("acme", "keyed"))?.keySha256).toBe(keySha256);
      expect((await store.touch("acme", "keyed"))?.keySha256).toBe(keySha256);
    });

    it("scopes every record to its tenant", async () => {
      const store = make(60);
      await store.create(record("shared-id", "acme"));
      expect(await store.get("globex", "shared-id")).toBeUndefined();
      expect(await store.touch("globex", "shared-id")).toBeUndefined();
      expect(await store.delete("globex", "shared-id")).toBe(false);
      expect(await store.get("acme", "shared-id")).toBeDefined();
      expect(await store.listByTenant("globex")).toEqual([]);
    });

    it("lists a tenant's live sessions, oldest first", async () => {
      const store = make(60);
      await store.create(record("first", "listing"));
      await sleep(5);
      await store.create(record("second", "listing"));
      await store.create(record("elsewhere", "other"));
      expect((await store.listByTenant("listing")).map((r) => r.id)).toEqual(["first", "second"]);
      await store.delete("listing", "first");
      expect((await store.listByTenant("listing")).map((r) => r.id)).toEqual(["second"]);
    });

    it("expires an idle record, and a touch keeps it alive", async () => {
      const store = make(1);
      await store.create(record("idle", "ttl"));
      await store.create(record("busy", "ttl"));
      const before = (await store.get("ttl", "busy"))!.lastSeenAt;
      await sleep(600);
      const touched = await store.touch("ttl", "busy");
      expect(touched && touched.lastSeenAt > before).toBe(true);
      await sleep(600);
      expect(await store.get("ttl", "idle")).toBeUndefined();
      expect(await store.get("ttl", "busy")).toBeDefined();
      expect((await store.listByTenant("ttl")).map((r) => r.id)).toEqual(["busy"]);
      // A patch is not activity: it does not bring an expired record back.
      expect(await store.update("ttl", "idle", { logLevel: "info" })).toBeUndefined();
      expect(await store.get("ttl", "idle")).toBeUndefined();
    });

    it("refuses a session beyond its principal's cap, counting only that tenant and principal's live sessions", async () => {
      const store = make(1);
      const cap = { maxPerPrincipal: 2 };
      await store.create(record("p1", "capped", "alice"), cap);
      await store.create(record("p2", "capped", "alice"), cap);
      const refused = await store.create(record("p3", "capped", "alice"), cap).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toMatchObject({ code: "resource_exhausted" });
      expect((refused as Error).message).toContain("principal alice of tenant capped already holds 2 open MCP sessions");
      expect(await store.get("capped", "p3")).toBeUndefined();
      // Another principal, or the same principal in another tenant, has its own count.
      await store.create(record("q1", "capped", "bob"), cap);
      await store.create(record("r1", "elsewhere", "alice"), cap);
      // Ending a session frees its place.
      await store.delete("capped", "p1");
      await store.create(record("p3", "capped", "alice"), cap);
      await expect(store.create(record("p4", "capped", "alice"), cap)).rejects.toMatchObject({ code: "resource_exhausted" });
      // Without a cap (stdio) nothing is refused; expired sessions stop counting.
      await store.create(record("p5", "capped", "alice"));
      await sleep(1100);
      await store.create(record("p6", "capped", "alice"), cap);
      await store.create(record("p7", "capped", "alice"), cap);
    });

    it("refuses a tenant id that could break out of its key prefix", async () => {
      const store = make(60);
      await expect(store.create(record("x", "a:b"))).rejects.toThrow(/tenant/);
    });
  });
}

contract("in-process", (ttlSeconds) => createMemorySessionStore({ ttlSeconds }));

describe("redis", () => {
  const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true });
  beforeAll(() => redis.connect());
  afterAll(() => redis.quit());

  contract("Redis", (ttlSeconds) => createRedisSessionStore(redis, { prefix: uniquePrefix("edge-sessions"), ttlSeconds }));

  it("keeps every key under the prefix and the tenant", async () => {
    const prefix = uniquePrefix("edge-keys");
    const store = createRedisSessionStore(redis, { prefix, ttlSeconds: 60 });
    await store.create(record("k1", "acme"));
    const keys = await redis.keys(`${prefix}*`);
    const principal = createHash("sha256").update("alice").digest("hex");
    expect(keys.sort()).toEqual([
      `${prefix}{acme}:mcp-session:k1`,
      `${prefix}{acme}:mcp-sessions`,
      `${prefix}{acme}:mcp-sessions:principal:${principal}`,
    ]);
    for (const key of keys) expect(await redis.ttl(key)).toBeGreaterThan(0);
    // The tenant is a hash tag: on a Redis Cluster its keys share one slot (the scripts touch several at once).
    expect(new Set(keys.map((k) => calculateSlot(k)))).toEqual(new Set([calculateSlot(`{acme}`)]));
    await store.create(record("k2", "globex"));
    expect(calculateSlot(`${prefix}{globex}:mcp-session:k2`)).toBe(calculateSlot("globex"));
  });

  it("holds a principal's cap across replicas when they open sessions at the same moment", async () => {
    const prefix = uniquePrefix("edge-cap");
    const other = new Redis(TEST_REDIS_URL);
    try {
      const replicas = [createRedisSessionStore(redis, { prefix }), createRedisSessionStore(other, { prefix })];
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) => replicas[i % 2]!.create(record(`c${i}`, "burst"), { maxPerPrincipal: 3 })),
      );
      expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(3);
      expect(await replicas[0]!.listByTenant("burst")).toHaveLength(3);
    } finally {
      other.disconnect();
    }
  });
});
