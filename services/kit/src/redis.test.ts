import { createServer } from "node:net";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPrivateRedis, type PrivateRedis } from "../../../test/support/redis.js";
import { ChaosError } from "./errors.js";
import { createLogger } from "./logger.js";
import { failClosedOnRedisOutage } from "./redis-errors.js";
import { closeRedis, connectRedis } from "./redis.js";

const logger = createLogger("kit-redis-test", "silent");

/** A store of one method over `redis`, wrapped the way every Redis store is. */
function storeOver(redis: Redis) {
  return failClosedOnRedisOutage(
    {
      read: (key: string) => redis.get(key),
      wrongType: async (key: string) => {
        await redis.set(key, "a string");
        return redis.hgetall(key);
      },
    },
    "the test store",
  );
}

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (err: unknown) => err,
  );
}

describe("Redis clients from kit", () => {
  let redis: PrivateRedis;
  let client: Redis;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    client = await connectRedis(redis.url, { logger, name: "kit-test" });
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.close();
  });

  it("fail a command at once as unavailable naming Redis while it is down, and reconnect by themselves", async () => {
    const store = storeOver(client);
    await client.set("greeting", "hello");
    await redis.kill();
    try {
      const err = await rejection(store.read("greeting"));
      expect(err).toBeInstanceOf(ChaosError);
      expect(err).toMatchObject({ code: "unavailable" });
      expect((err as Error).message).toMatch(/^Redis is unavailable: the test store cannot be reached/);
    } finally {
      await redis.start();
    }
    const deadline = Date.now() + 10_000;
    for (;;) {
      const got = await store.read("greeting").catch((err: unknown) => err);
      if (got === "hello") break;
      if (Date.now() > deadline) throw new Error(`no reconnect: ${String(got)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  it("close without rejecting while Redis is down, and stop reconnecting", async () => {
    const closing = await connectRedis(redis.url, { logger, name: "kit-test" });
    await redis.kill();
    try {
      await until(() => closing.status === "reconnecting", "the client to notice");
      await expect(closeRedis(closing)).resolves.toBeUndefined();
    } finally {
      await redis.start();
    }
    await until(() => client.status === "ready", "the other client to reconnect");
    await new Promise((r) => setTimeout(r, 500));
    expect(closing.status).not.toBe("ready");
  });

  it("leave what Redis itself refuses (a wrong type) to the caller, unchanged", async () => {
    const err = await rejection(storeOver(client).wrongType("typed"));
    expect(err).not.toBeInstanceOf(ChaosError);
    expect((err as Error).message).toMatch(/^WRONGTYPE/);
  });

  it("refuse to start on a Redis that is not there, naming REDIS_URL without its password", async () => {
    const s = createServer();
    await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
    const port = (s.address() as { port: number }).port;
    await new Promise<void>((resolve) => s.close(() => resolve()));
    const err = await rejection(connectRedis(`redis://user:s3cret@127.0.0.1:${port}`, { logger, name: "kit-test" }));
    expect((err as Error).message).toMatch(new RegExp(`^REDIS_URL redis://user:\\*\\*\\*@127\\.0\\.0\\.1:${port}: cannot connect to Redis`));
    expect((err as Error).message).not.toContain("s3cret");
  });
});
