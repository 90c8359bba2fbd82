import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";

/** The Redis tests use; each test picks its own key prefix, so runs never collide. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export function uniquePrefix(name: string): string {
  return `test:${name}:${randomBytes(4).toString("hex")}:`;
}

/** Two connections to one Redis, standing for two replicas of a service. */
export interface RedisReplicas {
  readonly a: Redis;
  readonly b: Redis;
  /** A key prefix unique to this test file. */
  readonly prefix: string;
}

/**
 * Opens two connections before the file's tests and closes them after, deleting every key under
 * the file's prefix. Call it at the top level of a test file.
 */
export function useRedisReplicas(name: string): RedisReplicas {
  const prefix = uniquePrefix(name);
  let a: Redis | undefined;
  let b: Redis | undefined;
  beforeAll(() => {
    a = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    b = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    if (a) {
      const keys = await a.keys(`${prefix}*`);
      if (keys.length > 0) await a.del(...keys);
    }
    a?.disconnect();
    b?.disconnect();
  });
  const opened = (r: Redis | undefined): Redis => {
    if (!r) throw new Error("useRedisReplicas: the connections open in beforeAll; use them inside tests");
    return r;
  };
  return {
    prefix,
    get a() {
      return opened(a);
    },
    get b() {
      return opened(b);
    },
  };
}
