import type { Redis } from "ioredis";
import { ChaosError, isRedisOutage, tenantKeyPrefix, type Logger } from "@chaos-core/kit";
import { bucketsFor, describeLimit, NO_RATE_LIMITS, type Bucket, type RateLimits, type TenantLimits } from "./limits-file.js";

/** A tenant's limits in the tenant registry (docs/tenants.md), when it holds some: they win over the file's entry. */
export type RegistryLimits = (tenant: string) => TenantLimits | undefined;

/** What a call is, as far as its limits are concerned. */
export interface LimitedCall {
  readonly tenant: string;
  readonly principal: string;
  /** The tool of a `tools/call`; absent for another request that does work (the tenant's and principal's limits only). */
  readonly tool?: string;
  /** A read-only call keeps working on a per-process limit while Redis is away; any other fails closed. */
  readonly readOnly: boolean;
}

/**
 * The quota gate in front of every tool call and every other request that does work
 * (server/request-limits.ts; issue 13 item 7, docs/operations.md "Rate limits").
 * Resolves when the call may run; rejects with `resource_exhausted` ("retry in N s", `retryAfterMs`
 * in the error's details) when a limit is reached, or `unavailable` when the shared limits cannot
 * be read and the call is not read-only.
 */
export interface RateLimiter {
  admit(call: LimitedCall): Promise<void>;
  /** Whether any limit applies to `call` at all: when none does, {@link admit} would let it run, and need not be asked. */
  limits(call: LimitedCall): boolean;
}

/** The `_meta` key of a refused call's result that says, in milliseconds, when to retry. */
export const RETRY_AFTER_META_KEY = "dev.chaoscore/retry-after-ms";

/** A refusal: which limit, and when to try again. */
export class RateLimited extends ChaosError {
  constructor(
    readonly retryAfterMs: number,
    bucket: Bucket,
  ) {
    super(
      "resource_exhausted",
      `rate limit reached: the ${bucket.scope === "tool" ? "tool's limit for this principal" : bucket.scope === "principal" ? "principal's limit" : "tenant's limit"} (${describeLimit(bucket.limit)}); retry in ${Math.max(1, Math.ceil(retryAfterMs / 1000))} s`,
    );
  }
}

/**
 * GCRA over several buckets at once, all or nothing, on Redis's clock: a bucket's state is its
 * theoretical arrival time (TAT). A call at `now` would move it to `max(TAT, now) + interval`; it
 * is allowed when that is at most `burst × interval` ahead of now. Every bucket is checked before
 * any is moved, so a call refused by one limit costs no other. Returns `{0, -1}` when allowed,
 * else `{retryAfterMs, index}` of the bucket that refuses soonest-last (the longest wait).
 * KEYS: the buckets (one tenant's, so one cluster slot); ARGV: interval and burst of each, in ms.
 */
const GCRA_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local wait, at = 0, -1
local tats = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local new = tat + interval
  local allowAt = new - burst * interval
  if allowAt > now and allowAt - now > wait then wait, at = allowAt - now, i - 1 end
  tats[i] = new
end
if at >= 0 then return { math.ceil(wait), at } end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, string.format('%.3f', tats[i]), 'PX', math.ceil(tats[i] - now) + 1000)
end
return { 0, -1 }
`;

const GCRA_COMMAND = "chaoscoreGcra";

/** The same algorithm on this process's clock, for the standalone and for the fallback. */
export class MemoryBuckets {
  private readonly tats = new Map<string, number>();

  /** `undefined` when allowed (and the buckets moved), else the wait and the refusing bucket. */
  take(keys: readonly string[], buckets: readonly Bucket[], now = Date.now()): { retryAfterMs: number; bucket: Bucket } | undefined {
    let refusal: { retryAfterMs: number; bucket: Bucket } | undefined;
    const next = buckets.map((b, i) => {
      const tat = Math.max(this.tats.get(keys[i]!) ?? 0, now) + b.intervalMs;
      const allowAt = tat - b.burst * b.intervalMs;
      if (allowAt > now && allowAt - now > (refusal?.retryAfterMs ?? 0)) refusal = { retryAfterMs: Math.ceil(allowAt - now), bucket: b };
      return tat;
    });
    if (refusal) return refusal;
    buckets.forEach((_, i) => this.tats.set(keys[i]!, next[i]!));
    // Forget buckets that are back to full, so idle principals cost nothing.
    if (this.tats.size > 10_000) for (const [k, tat] of this.tats) if (tat <= now) this.tats.delete(k);
    return undefined;
  }
}

/** How much of each limit a replica allows on its own while Redis is away: a quarter, at least one request. */
export const FALLBACK_SHARE = 0.25;

const share = (b: Bucket): Bucket => ({ ...b, intervalMs: b.intervalMs / FALLBACK_SHARE, burst: Math.max(1, Math.floor(b.burst * FALLBACK_SHARE)) });

/** Limits in this process only: exact for the standalone, which is one process. */
export function createMemoryRateLimiter(limits: RateLimits, registry?: RegistryLimits): RateLimiter {
  const memory = new MemoryBuckets();
  return {
    limits: (call) => bucketsFor(limits, call.tenant, call.principal, call.tool, registry?.(call.tenant)).length > 0,
    admit(call) {
      const buckets = bucketsFor(limits, call.tenant, call.principal, call.tool, registry?.(call.tenant));
      if (buckets.length === 0) return Promise.resolve();
      const refused = memory.take(buckets.map((b) => `${call.tenant}:${b.key}`), buckets);
      return refused ? Promise.reject(new RateLimited(refused.retryAfterMs, refused.bucket)) : Promise.resolve();
    },
  };
}

/**
 * Limits shared by every edge replica, in Redis (one script, Redis's clock, under the tenant's
 * hash tag). Redis unavailable: a read-only call is held to {@link FALLBACK_SHARE} of each limit in
 * this process and runs; any other call fails closed with `unavailable`.
 */
export function createRedisRateLimiter(redis: Redis, limits: RateLimits, options: { prefix: string; logger: Logger; registry?: RegistryLimits }): RateLimiter {
  const fallback = new MemoryBuckets();
  // Sent by its SHA after the first call (EVALSHA, ioredis falls back to EVAL once after a SCRIPT FLUSH).
  if (!(GCRA_COMMAND in redis)) redis.defineCommand(GCRA_COMMAND, { lua: GCRA_SCRIPT });
  const gcra = (redis as unknown as Record<string, (...args: Array<string | number>) => Promise<[number, number]>>)[GCRA_COMMAND]!.bind(redis);
  return {
    limits: (call) => bucketsFor(limits, call.tenant, call.principal, call.tool, options.registry?.(call.tenant)).length > 0,
    async admit(call) {
      const buckets = bucketsFor(limits, call.tenant, call.principal, call.tool, options.registry?.(call.tenant));
      if (buckets.length === 0) return;
      const keys = buckets.map((b) => `${tenantKeyPrefix(options.prefix, call.tenant)}${b.key}`);
      let answer: [number, number];
      try {
        answer = await gcra(keys.length, ...keys, ...buckets.flatMap((b) => [b.intervalMs, b.burst]));
      } catch (err) {
        if (!isRedisOutage(err)) throw err;
        if (!call.readOnly) {
          throw new ChaosError("unavailable", "the rate limits cannot be checked while Redis is unavailable, so calls that change anything are refused; read-only tools still work; retry shortly", { cause: err });
        }
        options.logger.warn({ tenant: call.tenant, ...(call.tool ? { tool: call.tool } : {}) }, "Redis is unavailable: a read-only call is held to this replica's share of its limits");
        const refused = fallback.take(keys, buckets.map(share));
        if (refused) throw new RateLimited(refused.retryAfterMs, refused.bucket);
        return;
      }
      const [retryAfterMs, index] = answer;
      if (index >= 0) throw new RateLimited(retryAfterMs, buckets[index]!);
    },
  };
}

/** The limiter of a composition: none configured means no limits. */
export function createRateLimiter(
  limits: RateLimits | undefined,
  redis: Redis | undefined,
  options: { prefix: string; logger: Logger; registry?: RegistryLimits },
): RateLimiter {
  const l = limits ?? NO_RATE_LIMITS;
  return redis ? createRedisRateLimiter(redis, l, options) : createMemoryRateLimiter(l, options.registry);
}
