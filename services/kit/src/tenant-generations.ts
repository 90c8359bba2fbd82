import type { Redis } from "ioredis";
import { tenantKeyPrefix } from "./redis-keys.js";
import { readRedisCount } from "./change-counters.js";
import type { Logger } from "./logger.js";
import { redisUnavailable } from "./redis-errors.js";

/**
 * Every change to a tenant or its API keys raises the tenant's generation (a counter stored with
 * the tenant, docs/tenants.md). The policy service publishes it here before the change commits;
 * an edge caches what it resolved together with the generation it was read at, and reads the
 * published generation on each request: a difference means "resolve again", so a revoked key or
 * a disabled tenant is refused on the very next request on every replica.
 */
export interface TenantGenerations {
  /** Where generations live, for the start-up line ("redis", "in-process"). */
  readonly kind: string;
  /**
   * The published generation, or undefined when none is (nothing may be cached then). Rejects
   * with `unavailable` when the store cannot be read: the caller resolves without its cache.
   */
  get(tenant: string): Promise<number | undefined>;
  /** Publishes a change's generation. Rejects with `unavailable` (the change must not commit). */
  publish(tenant: string, generation: number): Promise<void>;
  /** Publishes a generation read from the store unless one is published already. Best effort. */
  seed(tenant: string, generation: number): Promise<void>;
}

/**
 * The published generation of `tenant` for a cache to compare with, or undefined when there is
 * no store or it cannot be read — then the caller resolves without its cache (and fails closed
 * if the source cannot answer either). Said at debug level, not thrown.
 */
export async function publishedGeneration(generations: TenantGenerations | undefined, tenant: string, logger: Logger): Promise<number | undefined> {
  if (!generations) return undefined;
  try {
    return await generations.get(tenant);
  } catch (err) {
    logger.debug({ err: (err as Error).message, tenant }, "tenant generation unreadable; resolving without the cache");
    return undefined;
  }
}

/** Generations in this process: the standalone, where the registry and the edge share it. */
export function createMemoryTenantGenerations(): TenantGenerations {
  const generations = new Map<string, number>();
  return {
    kind: "in-process",
    get: async (tenant) => generations.get(tenant),
    publish: async (tenant, generation) => void generations.set(tenant, generation),
    seed: async (tenant, generation) => {
      if (!generations.has(tenant)) generations.set(tenant, generation);
    },
  };
}

/**
 * Generations in Redis (`<prefix>{<tenant>}:gen`), shared by every edge and policy replica. A
 * key that is missing (never published, or Redis lost it) is no generation: edges then resolve
 * every request until the policy service seeds it again on its next answer.
 */
export function createRedisTenantGenerations(redis: Redis, options: { prefix: string }): TenantGenerations {
  const key = (tenant: string) => `${tenantKeyPrefix(options.prefix, tenant)}gen`;
  return {
    kind: "redis",
    get: (tenant) => readRedisCount(redis, key(tenant), "the tenant generation store"),
    async publish(tenant, generation) {
      try {
        await redis.set(key(tenant), String(generation));
      } catch (err) {
        // Announced before the change commits: a change the edges could not hear of is not made.
        throw redisUnavailable("the tenant generation store", err);
      }
    },
    async seed(tenant, generation) {
      await redis.set(key(tenant), String(generation), "NX").catch(() => undefined);
    },
  };
}
