import { APP_ROLE, type Db, type Migration, type TenantGenerations } from "@chaos-core/kit";
import { checkTenantId } from "../domain/tenants.js";
import type { UpstreamApprovalRecord, UpstreamApprovals } from "../domain/upstream-approvals.js";
import { lockTenant, raiseGeneration, tenantChange } from "./tenant-change.js";

const TENANTS = "policy.tenants";
const APPROVALS = "policy.upstream_approvals";

/**
 * The operator's approvals of drifted upstream tools where the lock is read-only
 * (docs/federation.md §4), per tenant and tool. Row-level security binds every row to
 * `app.tenant_id` with no exception, as a tenant's upstreams are bound. `entry` is the approved
 * tool's `upstreams.lock` entry as the lock writes it; `replaces_digest` the lock's digest it
 * overrides (empty for a tool the lock does not pin).
 */
export const UPSTREAM_APPROVALS_MIGRATION: Migration = {
  id: "0004_upstream_approvals",
  sql: `
    CREATE TABLE ${APPROVALS} (
      tenant_id       text        NOT NULL REFERENCES ${TENANTS} (tenant_id),
      upstream        text        NOT NULL CHECK (upstream ~ '^[a-z][a-z0-9_]{0,31}$'),
      tool            text        NOT NULL CHECK (length(tool) BETWEEN 1 AND 128),
      entry           text        NOT NULL,
      replaces_digest text        NOT NULL CHECK (replaces_digest = '' OR replaces_digest ~ '^sha256:[0-9a-f]{64}$'),
      digest          text        NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$' AND digest <> replaces_digest),
      approved_by     text        NOT NULL CHECK (length(approved_by) BETWEEN 1 AND 200),
      approved_at     timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, upstream, tool)
    );
    ALTER TABLE ${APPROVALS} ENABLE ROW LEVEL SECURITY;
    ALTER TABLE ${APPROVALS} FORCE ROW LEVEL SECURITY;
    CREATE POLICY tenant_isolation ON ${APPROVALS}
      USING (tenant_id = current_setting('app.tenant_id', true))
      WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
    GRANT SELECT, INSERT, UPDATE, DELETE ON ${APPROVALS} TO ${APP_ROLE};
  `,
};

interface ApprovalRow {
  tenant_id: string;
  upstream: string;
  tool: string;
  entry: string;
  replaces_digest: string;
  digest: string;
  approved_by: string;
  approved_at: Date | string;
}

const COLUMNS = "tenant_id, upstream, tool, entry, replaces_digest, digest, approved_by, approved_at";

function recordOf(row: ApprovalRow): UpstreamApprovalRecord {
  return {
    tenant: row.tenant_id,
    upstream: row.upstream,
    tool: row.tool,
    entry: row.entry,
    replacesDigest: row.replaces_digest,
    digest: row.digest,
    approvedBy: row.approved_by,
    approvedAt: row.approved_at instanceof Date ? row.approved_at : new Date(row.approved_at),
  };
}

/**
 * The {@link UpstreamApprovals} over the kit `Db` (Postgres or PGlite). A change runs in one
 * transaction of its tenant that locks the tenant's row, refuses a tenant that is not registered
 * or was deleted, raises the tenant's generation and publishes it before committing — as every
 * other registry change does — so a serving replica watching the generation reads them again.
 */
export function createSqlUpstreamApprovals(db: Db, options: { generations?: TenantGenerations } = {}): UpstreamApprovals {
  const generations = options.generations;

  return {
    async recordApproval(a) {
      checkTenantId(a.tenant, "tenant");
      return tenantChange(db, generations, a.tenant, async (q, publish) => {
        await lockTenant(q, a.tenant, ' (the standalone registers "default" when it starts)');
        const { rows } = await q.query<ApprovalRow>(
          `INSERT INTO ${APPROVALS} (tenant_id, upstream, tool, entry, replaces_digest, digest, approved_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT (tenant_id, upstream, tool) DO UPDATE SET
             entry = EXCLUDED.entry, replaces_digest = EXCLUDED.replaces_digest, digest = EXCLUDED.digest,
             approved_by = EXCLUDED.approved_by, approved_at = now()
           RETURNING ${COLUMNS}`,
          [a.tenant, a.upstream, a.tool, a.entry, a.replacesDigest, a.digest, a.approvedBy],
        );
        // Published before the commit: an approval the serving replicas could not hear of is not made.
        const generation = await raiseGeneration(q, publish, a.tenant);
        return { approval: recordOf(rows[0]!), generation };
      });
    },

    async listApprovals(tenant) {
      checkTenantId(tenant, "tenant");
      const read = await db.tenantTx(tenant, async (q) => {
        // The generation first: a change after it is read makes the reader read again, never keep a stale answer.
        const gen = await q.query<{ generation: string | number }>(`SELECT generation FROM ${TENANTS} WHERE tenant_id = $1`, [tenant]);
        const { rows } = await q.query<ApprovalRow>(`SELECT ${COLUMNS} FROM ${APPROVALS} WHERE tenant_id = $1 ORDER BY upstream, tool`, [tenant]);
        return { approvals: rows.map(recordOf), generation: gen.rows[0] ? Number(gen.rows[0].generation) : 0 };
      });
      if (read.generation > 0) await generations?.seed(tenant, read.generation);
      return read;
    },
  };
}
