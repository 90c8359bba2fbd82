import { type StoredPlan } from "./plan.js";
import { assertPlanOwner, isPlanId, type PlanStore, type PlanStoreOptions, preparePlan } from "./plan-store.js";

/** Bounds of the in-process store; with the defaults it holds at most 64 MiB of plans. */
export interface MemoryPlanStoreOptions extends PlanStoreOptions {
  /** Most plans kept at once (default 1000). */
  maxPlans?: number;
  /** Most bytes of plan JSON kept at once (default 64 MiB). */
  maxBytes?: number;
}

export const DEFAULT_MEMORY_MAX_PLANS = 1000;
export const DEFAULT_MEMORY_MAX_BYTES = 64 * 1024 * 1024;

interface Entry {
  readonly plan: StoredPlan;
  readonly bytes: number;
  readonly expiresAtMs: number;
}

/**
 * A {@link PlanStore} in this process, for standalone mode, where one process plans and
 * executes. Expiry is checked on read against the injected clock, so no timer keeps the
 * process alive.
 *
 * When a new plan would exceed `maxPlans` or `maxBytes`, every expired plan is dropped first;
 * if that is not enough, the plans nearest their expiry go next (with one TTL for all plans,
 * the oldest). A put therefore never fails for lack of room, and a burst of plans costs the
 * plans least likely to still be executed. Eviction does not look at tenants: standalone
 * serves one.
 */
export function createMemoryPlanStore(options: MemoryPlanStoreOptions = {}): PlanStore {
  const now = options.now ?? Date.now;
  const maxPlans = options.maxPlans ?? DEFAULT_MEMORY_MAX_PLANS;
  const maxBytes = options.maxBytes ?? DEFAULT_MEMORY_MAX_BYTES;
  const entries = new Map<string, Entry>();
  let totalBytes = 0;

  // A tuple encoding keeps the key injective whatever characters a session id holds.
  const keyOf = (tenant: string, sessionId: string, planId: string) => JSON.stringify([tenant, sessionId, planId]);

  const remove = (key: string, entry: Entry) => {
    entries.delete(key);
    totalBytes -= entry.bytes;
  };

  const full = (incomingBytes: number) => entries.size + 1 > maxPlans || totalBytes + incomingBytes > maxBytes;

  function makeRoom(incomingBytes: number): void {
    if (!full(incomingBytes)) return;
    const nowMs = now();
    for (const [key, entry] of entries) if (entry.expiresAtMs <= nowMs) remove(key, entry);
    while (entries.size > 0 && full(incomingBytes)) {
      let soonest: [string, Entry] | undefined;
      for (const pair of entries) if (!soonest || pair[1].expiresAtMs < soonest[1].expiresAtMs) soonest = pair;
      remove(...soonest!);
    }
  }

  function live(tenant: string, sessionId: string, planId: string): [string, Entry] | undefined {
    assertPlanOwner(tenant, sessionId);
    if (!isPlanId(planId)) return undefined;
    const key = keyOf(tenant, sessionId, planId);
    const entry = entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAtMs <= now()) {
      remove(key, entry);
      return undefined;
    }
    return [key, entry];
  }

  return {
    async put(input, ttlSeconds) {
      const { plan, json } = preparePlan(input, ttlSeconds, { ...options, now });
      const bytes = Buffer.byteLength(json, "utf8");
      makeRoom(bytes);
      entries.set(keyOf(plan.tenant, plan.sessionId, plan.id), {
        plan,
        bytes,
        expiresAtMs: Date.parse(plan.expiresAt),
      });
      totalBytes += bytes;
      return structuredClone(plan);
    },

    async get(tenant, sessionId, planId) {
      const found = live(tenant, sessionId, planId);
      // A copy, so a caller editing what it got cannot change the stored plan.
      return found ? structuredClone(found[1].plan) : undefined;
    },

    async delete(tenant, sessionId, planId) {
      const found = live(tenant, sessionId, planId);
      if (!found) return false;
      remove(...found);
      return true;
    },
  };
}
