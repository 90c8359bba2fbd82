import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { useRedisReplicas } from "../../../../test/support/redis.js";
import { createRedisConsoleSessionStore } from "./redis-sessions.js";
import {
  CONSOLE_IDLE_SECONDS,
  CONSOLE_MAX_AGE_SECONDS,
  createMemoryConsoleSessionStore,
  newSessionId,
  OAUTH_SIGN_IN,
  SIGN_IN_FAILURE_WINDOW_SECONDS,
  tenantOfSessionId,
  type ConsoleSessionStore,
  type NewConsoleSession,
} from "./sessions.js";

const redis = useRedisReplicas("console-sessions");

/** A clock the test moves: expiry is observed without waiting. */
function clock() {
  let t = Date.now();
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

const alice = (tenant = "acme"): NewConsoleSession => ({
  tenant,
  principal: "alice",
  keySha256: createHash("sha256").update("alice-key").digest("hex"),
  csrf: "csrf-token-of-this-session",
});

const MINUTE = 60_000;

/** Two stores over the same data (two replicas; the in-process store is its own "replica"). */
type Make = (now: () => number) => { a: ConsoleSessionStore; b: ConsoleSessionStore };

function contract(name: string, make: Make) {
  describe(`${name} console session store`, () => {
    it("creates, reads, touches and deletes a session, keeping what sign-in stored", async () => {
      const c = clock();
      const { a, b } = make(c.now);
      const id = newSessionId("acme");
      const created = await a.create(id, alice());
      expect(created).toEqual({ ...alice(), createdAt: c.now(), lastSeenAt: c.now() });
      c.advance(MINUTE);
      const read = await b.get(id);
      expect(read).toEqual({ ...created, lastSeenAt: created.createdAt + MINUTE });
      await b.delete(id);
      expect(await a.get(id)).toBeUndefined();
      await a.delete(id);
    });

    it("ends a session idle for 30 minutes, and every session 8 hours after sign-in", async () => {
      const c = clock();
      const { a, b } = make(c.now);
      const idle = newSessionId("acme");
      await a.create(idle, alice());
      c.advance(CONSOLE_IDLE_SECONDS * 1000 - 1);
      expect(await b.get(idle)).toBeDefined();
      c.advance(CONSOLE_IDLE_SECONDS * 1000);
      expect(await b.get(idle)).toBeUndefined();
      expect(await a.get(idle)).toBeUndefined();

      const busy = newSessionId("acme");
      await a.create(busy, alice());
      // A request every 20 minutes keeps it from going idle, not past its absolute limit.
      for (let t = 0; t + 20 * MINUTE < CONSOLE_MAX_AGE_SECONDS * 1000; t += 20 * MINUTE) {
        c.advance(20 * MINUTE);
        expect(await b.get(busy)).toBeDefined();
      }
      c.advance(20 * MINUTE);
      expect(await b.get(busy)).toBeUndefined();
    });

    it("ends a session at its expiresAt (an OAuth sign-in's token exp), however busy and however young", async () => {
      const c = clock();
      const { a, b } = make(c.now);
      const id = newSessionId("acme");
      const expiresAt = c.now() + 5 * MINUTE;
      const created = await a.create(id, { ...alice(), keySha256: OAUTH_SIGN_IN, expiresAt });
      expect(created.expiresAt).toBe(expiresAt);
      c.advance(5 * MINUTE - 1);
      expect((await b.get(id))?.expiresAt).toBe(expiresAt);
      c.advance(1);
      expect(await b.get(id)).toBeUndefined();
      expect(await a.get(id)).toBeUndefined();
    });

    it("knows no session for a value it did not issue, or for another tenant's name", async () => {
      const c = clock();
      const { a } = make(c.now);
      const id = newSessionId("acme");
      await a.create(id, alice());
      expect(await a.get(id.replace(/^acme\./, "globex."))).toBeUndefined();
      expect(await a.get(`${id}x`)).toBeUndefined();
      expect(await a.get("")).toBeUndefined();
      expect(await a.get("acme")).toBeUndefined();
      // A session is stored under its own tenant only.
      await expect(a.create(newSessionId("globex"), alice("acme"))).rejects.toThrow(/newSessionId/);
    });

    it("counts failed sign-ins per address over a 5-minute window", async () => {
      const c = clock();
      const { a, b } = make(c.now);
      const address = `127.0.0.${Math.floor(Math.random() * 250) + 2}-${Math.random()}`;
      expect(await a.failedSignIns(address)).toBe(0);
      for (let i = 1; i <= 10; i++) expect(await (i % 2 ? a : b).recordFailedSignIn(address)).toBe(i);
      expect(await b.failedSignIns(address)).toBe(10);
      expect(await a.failedSignIns(`${address}-other`)).toBe(0);
      // The window runs from the first failure: later failures do not extend it.
      c.advance(SIGN_IN_FAILURE_WINDOW_SECONDS * 1000 - 1);
      expect(await a.recordFailedSignIn(address)).toBe(11);
      c.advance(1);
      expect(await a.failedSignIns(address)).toBe(0);
      expect(await b.recordFailedSignIn(address)).toBe(1);
    });
  });
}

describe("newSessionId", () => {
  it("is the tenant and 256 random bits", () => {
    const id = newSessionId("acme");
    expect(id).toMatch(/^acme\.[A-Za-z0-9_-]{43}$/);
    expect(newSessionId("acme")).not.toBe(id);
    expect(tenantOfSessionId(id)).toBe("acme");
    expect(tenantOfSessionId("Acme.x")).toBeUndefined();
  });
});

contract("in-process", (now) => {
  const store = createMemoryConsoleSessionStore({ now });
  return { a: store, b: store };
});

contract("Redis", (now) => ({
  a: createRedisConsoleSessionStore(redis.a, { prefix: redis.prefix, now }),
  b: createRedisConsoleSessionStore(redis.b, { prefix: redis.prefix, now }),
}));

describe("Redis console session store", () => {
  it("keeps the cookie's SHA-256 under the tenant's keys, never the cookie itself", async () => {
    const store = createRedisConsoleSessionStore(redis.a, { prefix: redis.prefix });
    const id = newSessionId("acme");
    await store.create(id, alice());
    const keys = await redis.a.keys(`${redis.prefix}*console:*`);
    const digest = createHash("sha256").update(id).digest("hex");
    expect(keys).toContain(`${redis.prefix}{acme}:console:${digest}`);
    const stored = await redis.a.get(`${redis.prefix}{acme}:console:${digest}`);
    expect(stored).not.toContain(id.split(".")[1]);
    const ttl = await redis.a.pttl(`${redis.prefix}{acme}:console:${digest}`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(CONSOLE_IDLE_SECONDS * 1000);
  });

  it("expires the key no later than the session's expiresAt", async () => {
    const store = createRedisConsoleSessionStore(redis.a, { prefix: redis.prefix });
    const id = newSessionId("acme");
    await store.create(id, { ...alice(), keySha256: OAUTH_SIGN_IN, expiresAt: Date.now() + 90_000 });
    const ttl = await redis.a.pttl(`${redis.prefix}{acme}:console:${createHash("sha256").update(id).digest("hex")}`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(90_000);
  });
});
