import type { Redis } from "ioredis";
import { tenantKeyPrefix } from "./redis-keys.js";
import { redisUnavailable } from "./redis-errors.js";

/**
 * A per-tenant counter a writer bumps around a change, so readers that cache what they read can
 * tell, with one cheap read, that it may have moved. The policy service bumps a tenant's
 * `policy-changes` counter before and after it stores a new policy version, and cognition's
 * policy snapshots re-read the policy when the counter differs from the one they read it under
 * (docs/cognition.md, "Policy snapshots"): a change reaches every replica's next decision.
 *
 * Bumping twice is what makes a cache keyed on the counter safe without a transaction across
 * the store and the counter: a reader that read the counter after the first bump but the store
 * before the commit sees the second bump and reads again.
 */
export interface ChangeCounters {
  /** Where the counters live, for the start-up line ("redis", "in-process"). */
  readonly kind: string;
  /** The counter, undefined when none was ever bumped. Rejects with `unavailable` when it cannot be read. */
  read(tenant: string): Promise<number | undefined>;
  /** Raises the counter. Rejects with `unavailable` when it cannot. */
  bump(tenant: string): Promise<void>;
}

/** Counters in this process: the standalone, where the policy store and cognition share it. */
export function createMemoryChangeCounters(): ChangeCounters {
  const counters = new Map<string, number>();
  return {
    kind: "in-process",
    read: async (tenant) => counters.get(tenant),
    bump: async (tenant) => void counters.set(tenant, (counters.get(tenant) ?? 0) + 1),
  };
}

/**
 * A whole number kept in Redis at `key`: undefined when there is none (or it is not one), and
 * `unavailable` naming `what` when Redis cannot be read. Tenant generations are read the same way.
 */
export async function readRedisCount(redis: Redis, key: string, what: string): Promise<number | undefined> {
  let value: string | null;
  try {
    value = await redis.get(key);
  } catch (err) {
    throw redisUnavailable(what, err);
  }
  if (value === null) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** Counters in Redis (`<prefix>{<tenant>}:<name>`), shared by every replica. */
export function createRedisChangeCounters(redis: Redis, options: { prefix: string; name: string }): ChangeCounters {
  const key = (tenant: string) => `${tenantKeyPrefix(options.prefix, tenant)}${options.name}`;
  const what = `the ${options.name} counter`;
  return {
    kind: "redis",
    read: (tenant) => readRedisCount(redis, key(tenant), what),
    async bump(tenant) {
      try {
        await redis.incr(key(tenant));
      } catch (err) {
        throw redisUnavailable(what, err);
      }
    },
  };
}
