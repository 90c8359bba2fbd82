import { announcedChange, ChaosError, type Db, type Queryable, type TenantGenerations } from "@chaos-core/kit";

const TENANTS = "policy.tenants";

/** Publishes a change's generation inside its transaction (before it commits). */
export type PublishGeneration = (generation: number) => Promise<void>;

/**
 * One transaction of `tenant` that changes what it is served (its upstreams, its approvals): `fn`
 * publishes the generation it raised before the transaction commits — a change the serving
 * replicas could not hear of is not made — and it is announced once committed (kit's
 * `announcedChange`), as every change of the tenant registry is.
 */
export function tenantChange<T>(db: Db, generations: TenantGenerations | undefined, tenant: string, fn: (q: Queryable, publish: PublishGeneration) => Promise<T>): Promise<T> {
  return announcedChange(generations, tenant, (publish) => db.tenantTx(tenant, (q) => fn(q, publish)));
}

/**
 * Locks the tenant's row for the change, refusing a tenant that is not registered (`not_found`)
 * or was deleted (`failed_precondition`), naming the field. `hint` follows the command that
 * registers it.
 */
export async function lockTenant(q: Queryable, tenant: string, hint = ""): Promise<void> {
  const { rows } = await q.query<{ status: string }>(`SELECT status FROM ${TENANTS} WHERE tenant_id = $1 FOR UPDATE`, [tenant]);
  if (!rows[0]) throw new ChaosError("not_found", `tenant: "${tenant}" is not registered: create it with chaos-core tenants create ${tenant}${hint}`);
  if (rows[0].status === "deleted") throw new ChaosError("failed_precondition", `tenant: "${tenant}" was deleted; it cannot be changed or served again`);
}

/** Raises the tenant's generation in the change's transaction and publishes it; answers it. */
export async function raiseGeneration(q: Queryable, publish: PublishGeneration, tenant: string): Promise<number> {
  const { rows } = await q.query<{ generation: string | number }>(
    `UPDATE ${TENANTS} SET generation = generation + 1, updated_at = now() WHERE tenant_id = $1 RETURNING generation`,
    [tenant],
  );
  const generation = Number(rows[0]!.generation);
  await publish(generation);
  return generation;
}
