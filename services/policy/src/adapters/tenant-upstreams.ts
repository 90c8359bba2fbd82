import { APP_ROLE, ChaosError, type Db, type Migration, type Queryable, type SecretRef, type TenantGenerations } from "@chaos-core/kit";
import { checkTenantId } from "../domain/tenants.js";
import { lockTenant, raiseGeneration, tenantChange, type PublishGeneration } from "./tenant-change.js";
import {
  checkUpstreamName,
  pinDigest,
  type TenantUpstreamDeclaration,
  type TenantUpstreamRecord,
  type TenantUpstreamRegistry,
  type TenantUpstreamStatus,
} from "../domain/tenant-upstreams.js";

const TENANTS = "policy.tenants";
const UPSTREAMS = "policy.tenant_upstreams";
const PINS = "policy.upstream_pins";

/**
 * A tenant's own upstreams and their pins (docs/federation.md §3, §4). Row-level security binds
 * every row to `app.tenant_id`, as the tenant's keys are bound: no exception, so one tenant's
 * upstreams can be neither read nor changed in another's transaction. `headers` holds secret
 * references only (kit's schema refuses a literal before a row is written); a pin is the
 * upstream's `upstreams.lock` entry, kept as the text `@chaos-core/contracts` wrote.
 */
export const TENANT_UPSTREAMS_MIGRATION: Migration = {
  id: "0003_tenant_upstreams",
  sql: `
    CREATE TABLE ${UPSTREAMS} (
      tenant_id         text        NOT NULL REFERENCES ${TENANTS} (tenant_id),
      name              text        NOT NULL CHECK (name ~ '^[a-z][a-z0-9_]{0,31}$'),
      url               text        NOT NULL CHECK (url ~ '^https?://'),
      headers           jsonb       NOT NULL DEFAULT '{}'::jsonb,
      timeout_ms        integer     NOT NULL CHECK (timeout_ms BETWEEN 100 AND 600000),
      risk              jsonb,
      trust_annotations boolean     NOT NULL DEFAULT true,
      status            text        NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'disabled')),
      created_at        timestamptz NOT NULL DEFAULT now(),
      updated_at        timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, name)
    );
    ALTER TABLE ${UPSTREAMS} ENABLE ROW LEVEL SECURITY;
    ALTER TABLE ${UPSTREAMS} FORCE ROW LEVEL SECURITY;
    CREATE POLICY tenant_isolation ON ${UPSTREAMS}
      USING (tenant_id = current_setting('app.tenant_id', true))
      WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
    GRANT SELECT, INSERT, UPDATE, DELETE ON ${UPSTREAMS} TO ${APP_ROLE};

    CREATE TABLE ${PINS} (
      tenant_id  text        NOT NULL,
      upstream   text        NOT NULL,
      pin        text        NOT NULL,
      tools      integer     NOT NULL CHECK (tools >= 0),
      pinned_at  timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, upstream),
      FOREIGN KEY (tenant_id, upstream) REFERENCES ${UPSTREAMS} (tenant_id, name) ON DELETE CASCADE
    );
    ALTER TABLE ${PINS} ENABLE ROW LEVEL SECURITY;
    ALTER TABLE ${PINS} FORCE ROW LEVEL SECURITY;
    CREATE POLICY tenant_isolation ON ${PINS}
      USING (tenant_id = current_setting('app.tenant_id', true))
      WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
    GRANT SELECT, INSERT, UPDATE, DELETE ON ${PINS} TO ${APP_ROLE};
  `,
};

interface UpstreamRow {
  tenant_id: string;
  name: string;
  url: string;
  headers: Record<string, SecretRef> | string;
  timeout_ms: number;
  risk: TenantUpstreamDeclaration["risk"] | string | null;
  trust_annotations: boolean;
  status: TenantUpstreamStatus;
  created_at: Date | string;
  updated_at: Date | string;
  pin: string;
  tools: number;
  pinned_at: Date | string;
}

const COLUMNS = `u.tenant_id, u.name, u.url, u.headers, u.timeout_ms, u.risk, u.trust_annotations, u.status, u.created_at, u.updated_at, p.pin, p.tools, p.pinned_at`;
const SELECT = `SELECT ${COLUMNS} FROM ${UPSTREAMS} u JOIN ${PINS} p ON p.tenant_id = u.tenant_id AND p.upstream = u.name`;

const date = (v: Date | string) => (v instanceof Date ? v : new Date(v));
const json = <T>(v: T | string): T => (typeof v === "string" ? (JSON.parse(v) as T) : v);

function recordOf(row: UpstreamRow): TenantUpstreamRecord {
  const risk = row.risk === null ? undefined : json(row.risk);
  return {
    tenant: row.tenant_id,
    declaration: {
      name: row.name,
      transport: "http",
      url: row.url,
      headers: json(row.headers),
      timeoutMs: row.timeout_ms,
      ...(risk ? { risk } : {}),
      trustAnnotations: row.trust_annotations,
    },
    status: row.status,
    pin: row.pin,
    pinnedTools: row.tools,
    createdAt: date(row.created_at),
    updatedAt: date(row.updated_at),
    pinnedAt: date(row.pinned_at),
  };
}

const UNIQUE_VIOLATION = "23505";

/**
 * The {@link TenantUpstreamRegistry} over the kit `Db` (Postgres or PGlite): each change in one
 * transaction of its tenant that locks the tenant's row, refuses a deleted tenant, raises the
 * tenant's generation and publishes it before committing, and announces it once committed (as
 * the tenant registry's changes do).
 */
export function createSqlTenantUpstreams(db: Db, options: { generations?: TenantGenerations } = {}): TenantUpstreamRegistry {
  const generations = options.generations;

  const changeTx = <T>(tenant: string, fn: (q: Queryable, publish: PublishGeneration) => Promise<T>): Promise<T> => tenantChange(db, generations, tenant, fn);

  async function one(q: Queryable, tenant: string, name: string): Promise<TenantUpstreamRecord | undefined> {
    const { rows } = await q.query<UpstreamRow>(`${SELECT} WHERE u.tenant_id = $1 AND u.name = $2`, [tenant, name]);
    return rows[0] ? recordOf(rows[0]) : undefined;
  }

  const missing = (tenant: string, name: string) => new ChaosError("not_found", `tenant "${tenant}" has no upstream "${name}" (chaos-core upstreams list --tenant ${tenant})`);

  return {
    async addUpstream(tenant, d, pin) {
      checkTenantId(tenant, "tenant");
      checkUpstreamName(d.name, "declaration.name");
      try {
        return await changeTx(tenant, async (q, publish) => {
          await lockTenant(q, tenant);
          await q.query(
            `INSERT INTO ${UPSTREAMS} (tenant_id, name, url, headers, timeout_ms, risk, trust_annotations)
             VALUES ($1, $2, $3, $4::jsonb, $5, $6::jsonb, $7)`,
            [tenant, d.name, d.url, JSON.stringify(d.headers), d.timeoutMs, d.risk ? JSON.stringify(d.risk) : null, d.trustAnnotations],
          );
          await q.query(`INSERT INTO ${PINS} (tenant_id, upstream, pin, tools) VALUES ($1, $2, $3, $4)`, [tenant, d.name, pin.text, pin.tools]);
          await raiseGeneration(q, publish, tenant);
          return (await one(q, tenant, d.name))!;
        });
      } catch (err) {
        if ((err as { code?: unknown }).code === UNIQUE_VIOLATION) {
          throw new ChaosError("already_exists", `declaration.name: tenant "${tenant}" already has an upstream "${d.name}" (remove it first: chaos-core upstreams remove ${d.name} --tenant ${tenant})`);
        }
        throw err;
      }
    },

    async listUpstreams(tenant) {
      checkTenantId(tenant, "tenant");
      return db.tenantTx(tenant, async (q) => {
        const { rows } = await q.query<UpstreamRow>(`${SELECT} WHERE u.tenant_id = $1 ORDER BY u.name`, [tenant]);
        return rows.map(recordOf);
      });
    },

    async getUpstream(tenant, name) {
      checkTenantId(tenant, "tenant");
      checkUpstreamName(name);
      return db.tenantTx(tenant, (q) => one(q, tenant, name));
    },

    async removeUpstream(tenant, name) {
      checkTenantId(tenant, "tenant");
      checkUpstreamName(name);
      return changeTx(tenant, async (q, publish) => {
        await lockTenant(q, tenant);
        const found = await one(q, tenant, name);
        if (!found) throw missing(tenant, name);
        await q.query(`DELETE FROM ${UPSTREAMS} WHERE tenant_id = $1 AND name = $2`, [tenant, name]);
        await raiseGeneration(q, publish, tenant);
        return found;
      });
    },

    async setUpstreamStatus(tenant, name, status) {
      checkTenantId(tenant, "tenant");
      checkUpstreamName(name);
      if (status !== "enabled" && status !== "disabled") throw new ChaosError("invalid_argument", "status: must be enabled or disabled");
      return changeTx(tenant, async (q, publish) => {
        await lockTenant(q, tenant);
        const { rowCount } = await q.query(`UPDATE ${UPSTREAMS} SET status = $3, updated_at = now() WHERE tenant_id = $1 AND name = $2`, [tenant, name, status]);
        if (rowCount === 0) throw missing(tenant, name);
        await raiseGeneration(q, publish, tenant);
        return (await one(q, tenant, name))!;
      });
    },

    async repinUpstream(tenant, name, pin, replaces) {
      checkTenantId(tenant, "tenant");
      checkUpstreamName(name);
      if (!/^sha256:[0-9a-f]{64}$/.test(replaces)) throw new ChaosError("invalid_argument", "replaces: required; pass the integrityDigest of the pin this one replaces (sha256:<64 hex digits>, as GetUpstream's pin states it)");
      return changeTx(tenant, async (q, publish) => {
        await lockTenant(q, tenant);
        // The pin's row locked too: a concurrent approval waits, then finds the pin it replaces gone.
        const { rows } = await q.query<{ pin: string }>(`SELECT pin FROM ${PINS} WHERE tenant_id = $1 AND upstream = $2 FOR UPDATE`, [tenant, name]);
        if (!rows[0]) throw missing(tenant, name);
        if (rows[0].pin === pin.text) return { upstream: (await one(q, tenant, name))!, changed: false };
        const stored = pinDigest(rows[0].pin);
        if (stored !== replaces) {
          throw new ChaosError("failed_precondition", `replaces: the pin of upstream "${name}" of tenant "${tenant}" is ${stored} now, not ${replaces}: it changed since it was read; diff and approve again (chaos-core upstreams diff ${name} --tenant ${tenant})`);
        }
        await q.query(`UPDATE ${PINS} SET pin = $3, tools = $4, pinned_at = now() WHERE tenant_id = $1 AND upstream = $2`, [tenant, name, pin.text, pin.tools]);
        await q.query(`UPDATE ${UPSTREAMS} SET updated_at = now() WHERE tenant_id = $1 AND name = $2`, [tenant, name]);
        await raiseGeneration(q, publish, tenant);
        return { upstream: (await one(q, tenant, name))!, changed: true };
      });
    },
  };
}
