import { ChaosError } from "@chaos-core/kit";
import { type StoredPlan } from "./plan.js";
import { assertPlanOwner, isPlanId, type PlanStore, type PlanStoreOptions, preparePlan } from "./plan-store.js";

/**
 * Bounds of the in-process store. `maxPlans` and `maxBytes` bound each tenant; `maxTotalBytes`
 * bounds the process, as a memory safety net.
 */
export interface MemoryPlanStoreOptions extends PlanStoreOptions {
  /** Most plans one tenant keeps at once (default 1000). */
  maxPlans?: number;
  /** Most bytes of plan JSON one tenant keeps at once (default 64 MiB). */
  maxBytes?: number;
  /** Most bytes of plan JSON the process keeps over every tenant (default 256 MiB). */
  maxTotalBytes?: number;
}

export const DEFAULT_MEMORY_MAX_PLANS = 1000;
export const DEFAULT_MEMORY_MAX_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MEMORY_MAX_TOTAL_BYTES = 256 * 1024 * 1024;

interface Entry {
  readonly plan: StoredPlan;
  readonly bytes: number;
  readonly expiresAtMs: number;
}

/** One tenant's plans, keyed by scope and plan id. */
interface TenantPlans {
  readonly entries: Map<string, Entry>;
  bytes: number;
}

/**
 * A {@link PlanStore} in this process, for standalone mode, where one process plans and
 * executes. Expiry is checked on read against the injected clock, so no timer keeps the
 * process alive.
 *
 * Room is counted per tenant. When a new plan would exceed its tenant's `maxPlans` or
 * `maxBytes`, that tenant's expired plans are dropped first; if that is not enough, its plans
 * nearest their expiry go next (with one TTL for all plans, the oldest). So a burst of plans
 * costs only the plans of the tenant that made them, and those least likely to still be
 * executed: one tenant never evicts another's. Over every tenant the process keeps at most
 * `maxTotalBytes`; a plan that would pass it (once every expired plan is dropped) is refused
 * with `resource_exhausted`, never making room from another tenant.
 */
export function createMemoryPlanStore(options: MemoryPlanStoreOptions = {}): PlanStore {
  const now = options.now ?? Date.now;
  const maxPlans = options.maxPlans ?? DEFAULT_MEMORY_MAX_PLANS;
  const maxBytes = options.maxBytes ?? DEFAULT_MEMORY_MAX_BYTES;
  const maxTotalBytes = options.maxTotalBytes ?? DEFAULT_MEMORY_MAX_TOTAL_BYTES;
  const tenants = new Map<string, TenantPlans>();
  let totalBytes = 0;

  // A tuple encoding keeps the key injective whatever characters a scope holds.
  const keyOf = (scope: string, planId: string) => JSON.stringify([scope, planId]);

  const remove = (tenant: string, own: TenantPlans, key: string, entry: Entry) => {
    own.entries.delete(key);
    own.bytes -= entry.bytes;
    totalBytes -= entry.bytes;
    if (own.entries.size === 0) tenants.delete(tenant);
  };
  const dropExpired = (tenant: string, own: TenantPlans) => {
    const nowMs = now();
    for (const [key, entry] of own.entries) if (entry.expiresAtMs <= nowMs) remove(tenant, own, key, entry);
  };

  function makeRoom(tenant: string, incomingBytes: number): void {
    const own = tenants.get(tenant);
    const full = () => own !== undefined && (own.entries.size + 1 > maxPlans || own.bytes + incomingBytes > maxBytes);
    if (own && full()) dropExpired(tenant, own);
    while (own && own.entries.size > 0 && full()) {
      let soonest: [string, Entry] | undefined;
      for (const pair of own.entries) if (!soonest || pair[1].expiresAtMs < soonest[1].expiresAtMs) soonest = pair;
      remove(tenant, own, ...soonest!);
    }
    if (totalBytes + incomingBytes <= maxTotalBytes) return;
    for (const [t, plans] of [...tenants]) dropExpired(t, plans);
    if (totalBytes + incomingBytes > maxTotalBytes) {
      throw new ChaosError(
        "resource_exhausted",
        `this process holds ${maxTotalBytes} bytes of plans already (every tenant's together); try again when some expire or have run`,
      );
    }
  }

  function live(tenant: string, scope: string, planId: string): [TenantPlans, string, Entry] | undefined {
    assertPlanOwner(tenant, scope);
    if (!isPlanId(planId)) return undefined;
    const own = tenants.get(tenant);
    const key = keyOf(scope, planId);
    const entry = own?.entries.get(key);
    if (!own || !entry) return undefined;
    if (entry.expiresAtMs <= now()) {
      remove(tenant, own, key, entry);
      return undefined;
    }
    return [own, key, entry];
  }

  return {
    async put(input, ttlSeconds) {
      const { plan, json } = preparePlan(input, ttlSeconds, { ...options, now });
      const bytes = Buffer.byteLength(json, "utf8");
      makeRoom(plan.tenant, bytes);
      let own = tenants.get(plan.tenant);
      if (!own) tenants.set(plan.tenant, (own = { entries: new Map(), bytes: 0 }));
      own.entries.set(keyOf(plan.scope, plan.id), { plan, bytes, expiresAtMs: Date.parse(plan.expiresAt) });
      own.bytes += bytes;
      totalBytes += bytes;
      return structuredClone(plan);
    },

    async get(tenant, scope, planId) {
      const found = live(tenant, scope, planId);
      // A copy, so a caller editing what it got cannot change the stored plan.
      return found ? structuredClone(found[2].plan) : undefined;
    },

    async delete(tenant, scope, planId) {
      const found = live(tenant, scope, planId);
      if (!found) return false;
      remove(tenant, ...found);
      return true;
    },
  };
}
