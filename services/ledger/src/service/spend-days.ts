import type { Queryable } from "@chaos-core/kit";

// The day's committed totals of a tenant's spend policies (`ledger.spend_days`, a running total
// recomputable from the entries): read and moved only inside the flush transaction that records
// the decision, under the tenant's ledger lock, so two concurrent spends cannot both pass a
// daily cap.

/** The UTC calendar day of `now` (CHP's daily window), as `YYYY-MM-DD`. */
export function utcDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}

/** The day's committed total of one policy, read under the tenant's ledger lock. */
export async function committedToday(tx: Queryable, tenant: string, policy: string, day: string): Promise<number> {
  const res = await tx.query<{ committed: number | string }>(
    "SELECT committed FROM ledger.spend_days WHERE tenant_id = $1 AND policy_name = $2 AND day = $3",
    [tenant, policy, day],
  );
  return res.rows[0] ? Number(res.rows[0].committed) : 0;
}

/** Adds `amount` to the day's committed total of one policy; nothing for a spend that commits nothing. */
export async function commitSpend(tx: Queryable, tenant: string, policy: string, day: string, amount: number): Promise<void> {
  if (amount <= 0) return;
  await tx.query(
    `INSERT INTO ledger.spend_days (tenant_id, policy_name, day, committed) VALUES ($1, $2, $3, $4)
     ON CONFLICT (tenant_id, policy_name, day) DO UPDATE SET committed = ledger.spend_days.committed + EXCLUDED.committed`,
    [tenant, policy, day, amount],
  );
}
