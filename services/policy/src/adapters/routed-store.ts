import type { PolicyStore } from "../domain/policy-store.js";

/**
 * The standalone's policies on its embedded stores: tenant `default` keeps the `policy.json` an
 * operator edits, every other tenant (one an operator-issued key or an API keys file names) a
 * versioned document in the embedded database, as on Postgres.
 */
export function createRoutedPolicyStore(options: { defaultTenant: string; forDefault: PolicyStore; forOthers: PolicyStore }): PolicyStore {
  const storeOf = (tenant: string) => (tenant === options.defaultTenant ? options.forDefault : options.forOthers);
  return {
    get: (tenant) => storeOf(tenant).get(tenant),
    put: (tenant, document, expectedVersion) => storeOf(tenant).put(tenant, document, expectedVersion),
    watch: (tenant, signal) => storeOf(tenant).watch(tenant, signal),
    async close() {
      await Promise.all([options.forDefault.close(), options.forOthers.close()]);
    },
  };
}
