import { announcedChange, APP_ROLE, ChaosError, newIssuedKey, type Db, type Migration, type Queryable, type TenantGenerations } from "@chaos-core/kit";
import {
  checkKeyInput,
  checkSettings,
  checkTenantId,
  keyStatus,
  type ApiKeyRecord,
  type KeyStatus,
  type ResolvedKey,
  type TenantRecord,
  type TenantRegistry,
  type TenantSettings,
  type TenantState,
  type TenantStatus,
} from "../domain/tenants.js";
import { createSqlTenantUpstreams } from "./tenant-upstreams.js";

const TENANTS = "policy.tenants";
const KEYS = "policy.api_keys";

/**
 * The registry's tables. Row-level security binds every row to `app.tenant_id` as everywhere
 * else, with two narrow exceptions a registry needs: the tenant list may be read across tenants
 * (the operator lists them; ids and status only), and a key row may be read by whoever presents
 * its SHA-256 (`app.key_sha256`), which is how the edge learns a key's tenant before it knows it.
 */
export const TENANT_REGISTRY_MIGRATION: Migration = {
  id: "0002_tenant_registry",
  sql: `
    CREATE TABLE ${TENANTS} (
      tenant_id    text        PRIMARY KEY,
      display_name text        NOT NULL DEFAULT '',
      status       text        NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'disabled', 'deleted')),
      settings     jsonb       NOT NULL DEFAULT '{}'::jsonb,
      generation   bigint      NOT NULL DEFAULT 1 CHECK (generation > 0),
      created_at   timestamptz NOT NULL DEFAULT now(),
      updated_at   timestamptz NOT NULL DEFAULT now()
    );
    ALTER TABLE ${TENANTS} ENABLE ROW LEVEL SECURITY;
    ALTER TABLE ${TENANTS} FORCE ROW LEVEL SECURITY;
    CREATE POLICY tenants_listed ON ${TENANTS} FOR SELECT USING (true);
    CREATE POLICY tenants_own_insert ON ${TENANTS} FOR INSERT
      WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
    CREATE POLICY tenants_own_update ON ${TENANTS} FOR UPDATE
      USING (tenant_id = current_setting('app.tenant_id', true))
      WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
    GRANT SELECT, INSERT, UPDATE ON ${TENANTS} TO ${APP_ROLE};

    CREATE TABLE ${KEYS} (
      key_id       text        PRIMARY KEY,
      tenant_id    text        NOT NULL REFERENCES ${TENANTS} (tenant_id),
      principal    text        NOT NULL,
      roles        text[]      NOT NULL DEFAULT '{}',
      sha256       text        NOT NULL UNIQUE CHECK (sha256 ~ '^[0-9a-f]{64}$'),
      created_at   timestamptz NOT NULL DEFAULT now(),
      expires_at   timestamptz,
      revoked_at   timestamptz,
      last_used_at timestamptz
    );
    CREATE INDEX api_keys_tenant ON ${KEYS} (tenant_id, created_at);
    ALTER TABLE ${KEYS} ENABLE ROW LEVEL SECURITY;
    ALTER TABLE ${KEYS} FORCE ROW LEVEL SECURITY;
    CREATE POLICY tenant_isolation ON ${KEYS}
      USING (tenant_id = current_setting('app.tenant_id', true))
      WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
    CREATE POLICY key_holder ON ${KEYS} FOR SELECT
      USING (sha256 = current_setting('app.key_sha256', true));
    CREATE POLICY key_holder_touch ON ${KEYS} FOR UPDATE
      USING (sha256 = current_setting('app.key_sha256', true))
      WITH CHECK (sha256 = current_setting('app.key_sha256', true));
    GRANT SELECT, INSERT, UPDATE ON ${KEYS} TO ${APP_ROLE};
  `,
};

interface TenantRow {
  tenant_id: string;
  display_name: string;
  status: TenantStatus;
  settings: Partial<TenantSettings> | string;
  generation: string | number;
  created_at: Date | string;
  updated_at: Date | string;
}

interface KeyRow {
  key_id: string;
  tenant_id: string;
  principal: string;
  roles: string[] | string;
  created_at: Date | string;
  expires_at: Date | string | null;
  revoked_at: Date | string | null;
  last_used_at: Date | string | null;
}

const TENANT_COLUMNS = "tenant_id, display_name, status, settings, generation, created_at, updated_at";
const KEY_COLUMNS = "key_id, tenant_id, principal, roles, created_at, expires_at, revoked_at, last_used_at";

const date = (v: Date | string) => (v instanceof Date ? v : new Date(v));
const optionalDate = (v: Date | string | null) => (v === null ? undefined : date(v));

function tenantOf(row: TenantRow): TenantRecord {
  const settings = typeof row.settings === "string" ? (JSON.parse(row.settings) as Partial<TenantSettings>) : row.settings;
  return {
    id: row.tenant_id,
    displayName: row.display_name,
    status: row.status,
    settings: checkSettings(settings, `stored settings of tenant "${row.tenant_id}"`),
    generation: Number(row.generation),
    createdAt: date(row.created_at),
    updatedAt: date(row.updated_at),
  };
}

/** PGlite returns a text[] as an array; a bare driver might hand over its text form. */
function rolesOf(v: string[] | string): ApiKeyRecord["roles"] {
  const roles = Array.isArray(v) ? v : v.replace(/^\{|\}$/g, "").split(",").filter(Boolean);
  return roles as ApiKeyRecord["roles"];
}

function keyOf(row: KeyRow): ApiKeyRecord {
  const expiresAt = optionalDate(row.expires_at);
  const revokedAt = optionalDate(row.revoked_at);
  const lastUsedAt = optionalDate(row.last_used_at);
  return {
    keyId: row.key_id,
    tenant: row.tenant_id,
    principal: row.principal,
    roles: rolesOf(row.roles),
    createdAt: date(row.created_at),
    ...(expiresAt ? { expiresAt } : {}),
    ...(revokedAt ? { revokedAt } : {}),
    ...(lastUsedAt ? { lastUsedAt } : {}),
  };
}

const UNIQUE_VIOLATION = "23505";
/** How stale a key's last-used time may be: it is written at most once a minute per key. */
const LAST_USED_GRANULARITY = "1 minute";

/**
 * The {@link TenantRegistry} over the kit `Db` (Postgres or PGlite). Each change runs in one
 * transaction of its tenant that raises the tenant's generation and publishes it to
 * `generations` before committing, so no edge keeps serving from what the change replaced; when
 * it cannot be published (Redis down) the change is not made and the caller is told why. Once
 * committed the change is announced, best effort (kit's `announcedChange`).
 */
export function createSqlTenantRegistry(db: Db, options: { generations?: TenantGenerations } = {}): TenantRegistry {
  const generations = options.generations;

  async function lockedTenant(q: Queryable, id: string): Promise<TenantRecord> {
    const { rows } = await q.query<TenantRow>(`SELECT ${TENANT_COLUMNS} FROM ${TENANTS} WHERE tenant_id = $1 FOR UPDATE`, [id]);
    if (!rows[0]) throw new ChaosError("not_found", `tenant "${id}" is not registered: create it with chaos-core tenants create ${id}`);
    return tenantOf(rows[0]);
  }

  /** One transaction of tenant `id` that changes it: `change` publishes in it; announced once committed. */
  type Publish = (generation: number) => Promise<void>;
  const changeTx = <T>(id: string, fn: (q: Queryable, publish: Publish) => Promise<T>): Promise<T> =>
    announcedChange(generations, id, (publish) => db.tenantTx(id, (q) => fn(q, publish)));

  /** Raises the generation, applies `set` to the row, publishes, and returns the row. */
  async function change(q: Queryable, publish: Publish, id: string, set = "", params: unknown[] = []): Promise<TenantRecord> {
    const { rows } = await q.query<TenantRow>(
      `UPDATE ${TENANTS} SET generation = generation + 1, updated_at = now()${set ? `, ${set}` : ""}
        WHERE tenant_id = $1 RETURNING ${TENANT_COLUMNS}`,
      [id, ...params],
    );
    const tenant = tenantOf(rows[0]!);
    await publish(tenant.generation);
    return tenant;
  }

  function notDeleted(tenant: TenantRecord): void {
    if (tenant.status === "deleted") throw new ChaosError("failed_precondition", `tenant "${tenant.id}" was deleted; it cannot be changed or served again`);
  }

  const registry: TenantRegistry = {
    async createTenant(input) {
      checkTenantId(input.id);
      const settings = checkSettings(input.settings);
      const displayName = input.displayName ?? "";
      if (displayName.length > 200) throw new ChaosError("invalid_argument", "display_name: at most 200 characters");
      try {
        return await changeTx(input.id, async (q, publish) => {
          const { rows } = await q.query<TenantRow>(
            `INSERT INTO ${TENANTS} (tenant_id, display_name, settings) VALUES ($1, $2, $3::jsonb) RETURNING ${TENANT_COLUMNS}`,
            [input.id, displayName, JSON.stringify(settings)],
          );
          const tenant = tenantOf(rows[0]!);
          await publish(tenant.generation);
          return tenant;
        });
      } catch (err) {
        if ((err as { code?: unknown }).code === UNIQUE_VIOLATION) throw new ChaosError("already_exists", `tenant "${input.id}" already exists`);
        throw err;
      }
    },

    async listTenants() {
      const { rows } = await db.adminTx((q) => q.query<TenantRow>(`SELECT ${TENANT_COLUMNS} FROM ${TENANTS} ORDER BY tenant_id`));
      return rows.map(tenantOf);
    },

    async getTenant(id) {
      checkTenantId(id);
      return db.tenantTx(id, async (q) => {
        const { rows } = await q.query<TenantRow>(`SELECT ${TENANT_COLUMNS} FROM ${TENANTS} WHERE tenant_id = $1`, [id]);
        return rows[0] ? tenantOf(rows[0]) : undefined;
      });
    },

    async setStatus(id, status) {
      checkTenantId(id);
      return changeTx(id, async (q, publish) => {
        notDeleted(await lockedTenant(q, id));
        return change(q, publish, id, "status = $2", [status]);
      });
    },

    async updateSettings(id, settings) {
      checkTenantId(id);
      const checked = checkSettings(settings);
      return changeTx(id, async (q, publish) => {
        notDeleted(await lockedTenant(q, id));
        return change(q, publish, id, "settings = $2::jsonb", [JSON.stringify(checked)]);
      });
    },

    async markDeleted(id) {
      checkTenantId(id);
      return changeTx(id, async (q, publish) => {
        await lockedTenant(q, id);
        const revoked = await q.query(`UPDATE ${KEYS} SET revoked_at = now() WHERE tenant_id = $1 AND revoked_at IS NULL`, [id]);
        // Its upstreams (and, by cascade, their pins) and approvals go with it: nothing of it is served again.
        await q.query("DELETE FROM policy.tenant_upstreams WHERE tenant_id = $1", [id]);
        await q.query("DELETE FROM policy.upstream_approvals WHERE tenant_id = $1", [id]);
        const tenant = await change(q, publish, id, "status = 'deleted'");
        return { tenant, revokedKeys: revoked.rowCount };
      });
    },

    async createKey(input) {
      checkTenantId(input.tenant, "tenant");
      const roles = checkKeyInput(input);
      return changeTx(input.tenant, async (q, publish) => {
        const tenant = await lockedTenant(q, input.tenant);
        notDeleted(tenant);
        // A 40-bit id: a clash is rare enough that trying again a few times settles it.
        for (let attempt = 0; ; attempt++) {
          const issued = newIssuedKey();
          await q.query("SAVEPOINT new_key");
          try {
            const { rows } = await q.query<KeyRow>(
              `INSERT INTO ${KEYS} (key_id, tenant_id, principal, roles, sha256, expires_at)
               VALUES ($1, $2, $3, $4::text[], $5, $6) RETURNING ${KEY_COLUMNS}`,
              [issued.keyId, input.tenant, input.principal, roles, issued.sha256, input.expiresAt?.toISOString() ?? null],
            );
            await q.query("RELEASE SAVEPOINT new_key");
            await change(q, publish, input.tenant);
            return { key: keyOf(rows[0]!), secret: issued.secret };
          } catch (err) {
            if ((err as { code?: unknown }).code !== UNIQUE_VIOLATION || attempt >= 4) throw err;
            await q.query("ROLLBACK TO SAVEPOINT new_key");
          }
        }
      });
    },

    async listKeys(tenant) {
      checkTenantId(tenant, "tenant");
      return db.tenantTx(tenant, async (q) => {
        const { rows } = await q.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM ${KEYS} WHERE tenant_id = $1 ORDER BY created_at, key_id`, [tenant]);
        return rows.map(keyOf);
      });
    },

    async revokeKey(tenant, keyId) {
      checkTenantId(tenant, "tenant");
      if (!/^[a-z2-7]{8}$/.test(keyId)) throw new ChaosError("invalid_argument", `key_id: "${keyId}" is not a key id (8 characters a-z, 2-7; the part after cc_)`);
      return changeTx(tenant, async (q, publish) => {
        await lockedTenant(q, tenant);
        const { rows } = await q.query<KeyRow>(
          `UPDATE ${KEYS} SET revoked_at = coalesce(revoked_at, now()) WHERE tenant_id = $1 AND key_id = $2 RETURNING ${KEY_COLUMNS}`,
          [tenant, keyId],
        );
        if (!rows[0]) throw new ChaosError("not_found", `tenant "${tenant}" has no key ${keyId}`);
        await change(q, publish, tenant);
        return keyOf(rows[0]);
      });
    },

    async resolveKey(sha256) {
      if (!/^[0-9a-f]{64}$/.test(sha256)) throw new ChaosError("invalid_argument", "sha256: must be the lowercase hex SHA-256 of the key (64 characters)");
      // Not a tenant's transaction: the digest is what names the tenant. Row-level security
      // still binds (as the application role); the one row readable is the presented key's.
      const resolved = await db.adminTx(async (q) => {
        await q.query("SELECT set_config('app.key_sha256', $1, true), set_config('role', $2, true)", [sha256, APP_ROLE]);
        const { rows } = await q.query<KeyRow>(
          `UPDATE ${KEYS} SET last_used_at = now()
            WHERE sha256 = $1 AND revoked_at IS NULL AND (last_used_at IS NULL OR last_used_at < now() - interval '${LAST_USED_GRANULARITY}')
            RETURNING ${KEY_COLUMNS}`,
          [sha256],
        );
        const row = rows[0] ?? (await q.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM ${KEYS} WHERE sha256 = $1`, [sha256])).rows[0];
        if (!row) return undefined;
        const t = await q.query<TenantRow>(`SELECT ${TENANT_COLUMNS} FROM ${TENANTS} WHERE tenant_id = $1`, [row.tenant_id]);
        return { key: keyOf(row), tenant: tenantOf(t.rows[0]!) };
      });
      if (!resolved) return undefined;
      const status: KeyStatus = keyStatus(resolved.key);
      await generations?.seed(resolved.tenant.id, resolved.tenant.generation);
      return { key: resolved.key, status, tenantStatus: resolved.tenant.status, generation: resolved.tenant.generation } satisfies ResolvedKey;
    },

    async tenantState(tenant) {
      checkTenantId(tenant, "tenant");
      const t = await registry.getTenant(tenant);
      // An unregistered tenant is at generation 0 until it is created (at 1).
      const state: TenantState = t
        ? {
            registered: true,
            status: t.status,
            generation: t.generation,
            toolsets: t.settings.toolsets,
            ...(t.settings.rateLimits ? { rateLimits: t.settings.rateLimits } : {}),
            ...(t.settings.ledgerPolicy ? { ledgerPolicy: t.settings.ledgerPolicy } : {}),
          }
        : { registered: false, status: "enabled", generation: 0, toolsets: [] };
      await generations?.seed(tenant, state.generation);
      return state;
    },
    ...createSqlTenantUpstreams(db, options),
  };
  return registry;
}
