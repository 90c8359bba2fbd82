import type { Redis } from "ioredis";
import { assertTenantId } from "./context.js";
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
 *
 * Once the change committed it is also announced ({@link announce}), so a process that keeps
 * something of the tenant without being asked (an edge's list of the tenant's own upstream tools,
 * and the sessions it told) can read it again at once instead of on the tenant's next request.
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
  /**
   * Tells every watcher, in every process on this store, that a change of `tenant` committed at
   * `generation`. Made after the commit ({@link announcedChange}); never rejects: a failure is
   * logged, and the watchers learn of the change as they did without it (see there).
   */
  announce(tenant: string, generation: number): Promise<void>;
  /**
   * Calls `listener` with each change announced from now on. Resolves once listening, to a
   * function that stops. Announcements made while the store could not be heard are lost: the
   * listener's `missed` is called once it is heard again.
   */
  watch(listener: TenantChangeListener): Promise<() => Promise<void>>;
}

/** What a {@link TenantGenerations.watch} is told. */
export interface TenantChangeListener {
  /** A change of `tenant` committed at `generation`. */
  changed(tenant: string, generation: number): void;
  /** Announcements may have been lost (the subscription was down and is back): any tenant may have changed. */
  missed?(): void;
}

/**
 * Runs one change of `tenant`: `run` is its transaction and calls `publish` with the generation
 * it raised the tenant to, before committing; once `run` resolved (committed) that generation is
 * announced.
 *
 * Why the two steps are apart (decided, issue 32): the publish (a Redis SET) comes before the
 * commit and a failure refuses the change, because it is what makes the change correct — every
 * edge's next request sees the generation moved. The announcement (a Redis PUBLISH) only makes it
 * prompt, and comes after the commit: a watcher reads the tenant again when told, and one told
 * before the commit could read the old rows, find nothing changed and hear nothing more. A failed
 * announcement does not fail the change — committed by then, and correct already —, nor does a
 * crash between the commit and it: watchers then learn of it as without announcements (the
 * tenant's next request, or their periodic re-read).
 */
export async function announcedChange<T>(
  generations: TenantGenerations | undefined,
  tenant: string,
  run: (publish: (generation: number) => Promise<void>) => Promise<T>,
): Promise<T> {
  let raised: number | undefined;
  const result = await run(async (generation) => {
    await generations?.publish(tenant, generation);
    raised = generation;
  });
  if (generations && raised !== undefined) await generations.announce(tenant, raised);
  return result;
}

/** Tells `listener` of one change; a listener that throws is logged, never breaks the watch. */
function tellChange(listener: TenantChangeListener, tenant: string, generation: number, logger: Logger | undefined): void {
  try {
    listener.changed(tenant, generation);
  } catch (err) {
    logger?.warn({ err: (err as Error).message, tenant }, "a listener of tenant changes failed");
  }
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
export function createMemoryTenantGenerations(options: { logger?: Logger } = {}): TenantGenerations {
  const generations = new Map<string, number>();
  const listeners = new Set<TenantChangeListener>();
  return {
    kind: "in-process",
    get: async (tenant) => generations.get(tenant),
    publish: async (tenant, generation) => void generations.set(tenant, generation),
    seed: async (tenant, generation) => {
      if (!generations.has(tenant)) generations.set(tenant, generation);
    },
    async announce(tenant, generation) {
      for (const listener of [...listeners]) tellChange(listener, tenant, generation, options.logger);
    },
    async watch(listener) {
      listeners.add(listener);
      return async () => void listeners.delete(listener);
    },
  };
}

/**
 * Generations in Redis (`<prefix>{<tenant>}:gen`), shared by every edge and policy replica. A
 * key that is missing (never published, or Redis lost it) is no generation: edges then resolve
 * every request until the policy service seeds it again on its next answer.
 *
 * Announcements go on one channel, `<prefix>tenant-changes` (`{"v":1,"tenant":…,"generation":…}`);
 * each watch subscribes on a connection of its own (a duplicate of `redis`), again after every
 * reconnect, and is told `missed` then. `logger` says a failed announcement or a malformed message.
 */
export function createRedisTenantGenerations(redis: Redis, options: { prefix: string; logger?: Logger }): TenantGenerations {
  const { logger } = options;
  const key = (tenant: string) => `${tenantKeyPrefix(options.prefix, tenant)}gen`;
  const channel = `${options.prefix}tenant-changes`;
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
    async announce(tenant, generation) {
      try {
        await redis.publish(channel, JSON.stringify({ v: 1, tenant, generation }));
      } catch (err) {
        logger?.warn(
          { err: (err as Error).message, tenant, generation },
          "a tenant change could not be announced (it is made): edges learn of it on the tenant's next request or their next re-read",
        );
      }
    },
    async watch(listener) {
      const name = `${redis.options.connectionName || "chaos-core"}-tenant-changes`;
      const subscriber = redis.duplicate({ connectionName: name, lazyConnect: true });
      // Outages are the command connection's to say (kit's Redis client logs them once).
      subscriber.on("error", () => {});
      let heardBefore = false;
      let first: ((err?: Error) => void) | undefined;
      const subscribed = new Promise<void>((resolve, reject) => (first = (err) => (err ? reject(err) : resolve())));
      subscriber.on("ready", () => {
        subscriber.subscribe(channel).then(
          () => {
            // Ready again after a drop: what was announced meanwhile was not heard.
            if (heardBefore) listener.missed?.();
            heardBefore = true;
            first?.();
          },
          (err: Error) => {
            logger?.warn({ err: err.message }, "subscribing to tenant changes failed; retrying on reconnect");
            first?.(err);
          },
        );
      });
      subscriber.on("message", (ch: string, payload: string) => {
        if (ch !== channel) return;
        const change = changeOf(payload);
        if (!change) return logger?.warn({ channel }, "dropped a tenant change announcement that is none");
        tellChange(listener, change.tenant, change.generation, logger);
      });
      try {
        await subscriber.connect();
        await subscribed;
      } catch (err) {
        subscriber.disconnect();
        throw redisUnavailable("the tenant change announcements", err);
      } finally {
        first = undefined;
      }
      return async () => {
        subscriber.removeAllListeners("message");
        if (subscriber.status === "ready") await subscriber.quit().catch(() => undefined);
        subscriber.disconnect();
      };
    },
  };
}

/** An announcement's tenant and generation, or undefined when `payload` is not one. */
function changeOf(payload: string): { tenant: string; generation: number } | undefined {
  try {
    const m = JSON.parse(payload) as { v?: unknown; tenant?: unknown; generation?: unknown };
    if (m.v !== 1 || typeof m.tenant !== "string" || typeof m.generation !== "number" || !Number.isSafeInteger(m.generation)) return undefined;
    assertTenantId(m.tenant);
    return { tenant: m.tenant, generation: m.generation };
  } catch {
    return undefined;
  }
}
