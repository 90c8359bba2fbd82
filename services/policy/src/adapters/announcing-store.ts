import type { ChangeCounters, Logger } from "@chaos-core/kit";
import type { PolicyStore } from "../domain/policy-store.js";

/**
 * `store` whose `put` bumps the tenant's policy-changes counter before it stores and again after
 * (kit `ChangeCounters`): cognition's policy snapshots read the counter on every decision and
 * re-read the policy when it moved, so a new version — a new DENY included — is used by the next
 * decision on every replica, not only within the snapshots' 1 s bound (docs/cognition.md,
 * "Policy snapshots").
 *
 * When the first bump fails nothing is stored (`unavailable`): a change the replicas could not
 * hear of is not made. When the second fails the version is stored and said so in the log; the
 * replicas use it within the bound.
 */
export function announcePolicyChanges(store: PolicyStore, counters: ChangeCounters, logger: Logger): PolicyStore {
  return {
    get: (tenant) => store.get(tenant),
    async put(tenant, document, expectedVersion) {
      await counters.bump(tenant);
      const version = await store.put(tenant, document, expectedVersion);
      await counters.bump(tenant).catch((err: unknown) => {
        logger.warn({ tenant, version, err: (err as Error).message }, "policy stored, but its change could not be announced; replicas use it within the snapshot bound (1 s)");
      });
      return version;
    },
    watch: (tenant, signal) => store.watch(tenant, signal),
    close: () => store.close(),
  };
}
