import type { Redis } from "ioredis";
import { failClosedOnRedisOutage, tenantKeyPrefix } from "@chaos-core/kit";
import {
  assertPlanOwner,
  isPlanId,
  parseStoredPlan,
  type PlanStore,
  type PlanStoreOptions,
  preparePlan,
} from "./plan-store.js";

/** Key layout of the Redis plan store. */
export interface RedisPlanStoreOptions extends PlanStoreOptions {
  /** Prepended to every key, e.g. `chaoscore:`; keys then read `<prefix><tenant>:plan:<scope>:<planId>`. */
  prefix?: string;
}

/**
 * A {@link PlanStore} on Redis, shared by every cognition replica: a plan made on one replica
 * can be executed on another. The key names tenant and scope (the session, or
 * `principal:<hex SHA-256>` for a call without one), so a plan is reachable only by the pair it
 * was made for; Redis expires it (`SET … EX`). While Redis cannot be reached,
 * every method rejects at once with `unavailable` naming Redis.
 */
export function createRedisPlanStore(redis: Redis, options: RedisPlanStoreOptions = {}): PlanStore {
  const prefix = options.prefix ?? "chaoscore:";

  // Plan ids never contain `:`, and callers' ids are checked before they reach a key, so the last
  // segment is always the plan id and the key cannot be steered into another scope's space. A
  // plan written before scopes existed sits under its session id, which is its scope: same key.
  const keyOf = (tenant: string, scope: string, planId: string) => `${tenantKeyPrefix(prefix, tenant)}plan:${scope}:${planId}`;

  return failClosedOnRedisOutage<PlanStore>({
    async put(input, ttlSeconds) {
      const prepared = preparePlan(input, ttlSeconds, options);
      const { plan } = prepared;
      await redis.set(keyOf(plan.tenant, plan.scope, plan.id), prepared.json, "EX", prepared.ttlSeconds);
      return plan;
    },

    async get(tenant, scope, planId) {
      assertPlanOwner(tenant, scope);
      if (!isPlanId(planId)) return undefined;
      const json = await redis.get(keyOf(tenant, scope, planId));
      return json === null ? undefined : parseStoredPlan(json, tenant, scope, planId);
    },

    async delete(tenant, scope, planId) {
      assertPlanOwner(tenant, scope);
      if (!isPlanId(planId)) return false;
      return (await redis.del(keyOf(tenant, scope, planId))) > 0;
    },
  }, "the plan store");
}
