/**
 * The start of every Redis key that belongs to a tenant: `<prefix>{<tenant>}:`. The braces are a
 * Redis Cluster hash tag, so all of a tenant's keys hash to one slot and a script or transaction
 * over several of them (a session and its indexes, an approval and the pending set) is allowed on
 * a cluster too. Tenant ids (`assertTenantId`: lowercase letters, digits, `-`, `_`) hold no brace,
 * so the tag is exactly the tenant.
 */
export function tenantKeyPrefix(prefix: string, tenant: string): string {
  return `${prefix}{${tenant}}:`;
}
