import { APP_ROLE, ChaosError, migrate, pendingMigrations, type Db, type Logger, type Migration, type Queryable } from "@chaos-core/kit";
import { defaultPolicyDocument, validatePolicyDocument } from "../domain/policy-document.js";
import type { PolicySnapshot, PolicyStore } from "../domain/policy-store.js";
import { abortableSleep } from "./abortable-sleep.js";
import { warnOfOptIns } from "./opt-in-log.js";
import { TENANT_REGISTRY_MIGRATION } from "./tenant-registry.js";
import { TENANT_UPSTREAMS_MIGRATION } from "./tenant-upstreams.js";
import { UPSTREAM_APPROVALS_MIGRATION } from "./upstream-approvals.js";

const SCHEMA = "policy";
const TABLE = `${SCHEMA}.document_versions`;

/**
 * Every version is a row; a change appends one. The application role may only SELECT and
 * INSERT, so the history of a tenant's policy (which receipts refer to by version) cannot be
 * rewritten through the service. Row-level security keys every row to `app.tenant_id`, forced
 * so it binds even a role that owns the table.
 */
const MIGRATIONS: Migration[] = [
  {
    id: "0001_document_versions",
    sql: `
      CREATE TABLE ${TABLE} (
        tenant_id  text        NOT NULL,
        version    bigint      NOT NULL CHECK (version > 0),
        document   jsonb       NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, version)
      );
      ALTER TABLE ${TABLE} ENABLE ROW LEVEL SECURITY;
      ALTER TABLE ${TABLE} FORCE ROW LEVEL SECURITY;
      CREATE POLICY tenant_isolation ON ${TABLE}
        USING (tenant_id = current_setting('app.tenant_id', true))
        WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
      GRANT SELECT, INSERT ON ${TABLE} TO ${APP_ROLE};
    `,
  },
  TENANT_REGISTRY_MIGRATION,
  TENANT_UPSTREAMS_MIGRATION,
  UPSTREAM_APPROVALS_MIGRATION,
];

/** Applies the policy schema's migrations (idempotent, advisory-locked). Returns the ids applied now. */
export function migratePolicy(db: Db): Promise<string[]> {
  return migrate(db, SCHEMA, MIGRATIONS);
}

/** The policy migrations not yet applied (applies nothing): what `CHAOS_CORE_MIGRATE=verify` waits on. */
export function pendingPolicyMigrations(db: Db): Promise<string[]> {
  return pendingMigrations(db, SCHEMA, MIGRATIONS);
}

interface VersionRow {
  version: string | number | bigint;
  document: unknown;
  created_at: Date | string;
}

/** The latest stored version of the transaction's tenant, 0 when there is none. */
async function maxVersion(q: Queryable): Promise<number> {
  const { rows } = await q.query<{ version: string | number | bigint | null }>(
    `SELECT max(version) AS version FROM ${TABLE} WHERE tenant_id = current_setting('app.tenant_id')`,
  );
  return Number(rows[0]?.version ?? 0);
}

/** Postgres reports a unique violation with this SQLSTATE. */
const UNIQUE_VIOLATION = "23505";

/**
 * A {@link PolicyStore} over the kit `Db` (Postgres or PGlite, the same SQL). Run
 * {@link migratePolicy} first.
 *
 * - A tenant that never stored a policy gets the safe default at version 0, and nothing is
 *   written: reads stay read-only, and the first `put` creates version 1.
 * - `put` serialises per tenant on a transaction-scoped advisory lock, so versions increase by
 *   exactly one with no gaps, and `expectedVersion` is checked against the latest committed row.
 * - `watch` polls the tenant's latest version every `pollMs` (one indexed query). The kit `Db`
 *   offers no LISTEN/NOTIFY, and a policy changes rarely, so a cheap poll is the simple choice.
 * - Stored documents are validated again when read, so a row edited by hand into an invalid
 *   document fails closed (`failed_precondition`) instead of being half-applied.
 * - With a `logger`, a stored version that lets `client_elicitation` approve what the default
 *   keeps for a person is logged as a warning once, by the replica that stored it.
 */
export function createSqlPolicyStore(db: Db, options: { pollMs?: number; logger?: Logger } = {}): PolicyStore {
  const pollMs = options.pollMs ?? 1_000;
  const source = db.kind;
  const closing = new AbortController();

  async function latest(q: Queryable, tenant: string): Promise<PolicySnapshot> {
    const { rows } = await q.query<VersionRow>(
      `SELECT version, document, created_at FROM ${TABLE}
        WHERE tenant_id = current_setting('app.tenant_id') ORDER BY version DESC LIMIT 1`,
    );
    const row = rows[0];
    if (!row) return { document: defaultPolicyDocument(), version: 0, updatedAt: new Date(0), source };
    const version = Number(row.version);
    let document;
    try {
      document = validatePolicyDocument(row.document, `${source} policy of tenant "${tenant}" version ${version}`);
    } catch (err) {
      throw new ChaosError("failed_precondition", (err as Error).message, { cause: err });
    }
    return { document, version, updatedAt: new Date(row.created_at), source };
  }

  return {
    get(tenant) {
      return db.tenantTx(tenant, (q) => latest(q, tenant));
    },

    async put(tenant, document, expectedVersion) {
      try {
        const version = await db.tenantTx(tenant, async (q) => {
          await q.query("SELECT pg_advisory_xact_lock(hashtext('chaoscore.policy:' || current_setting('app.tenant_id')))");
          const current = await latest(q, tenant).catch((err: unknown) => {
            // A broken stored version must not block the operator from storing a good one.
            if (err instanceof ChaosError && err.code === "failed_precondition") return undefined;
            throw err;
          });
          const currentVersion = current?.version ?? (await maxVersion(q));
          if (expectedVersion !== undefined && expectedVersion !== currentVersion) {
            throw new ChaosError(
              "conflict",
              `the policy is at version ${currentVersion}, not ${expectedVersion}: read it again and reapply the change`,
            );
          }
          const next = currentVersion + 1;
          await q.query(
            `INSERT INTO ${TABLE} (tenant_id, version, document) VALUES (current_setting('app.tenant_id'), $1, $2::jsonb)`,
            [next, JSON.stringify(document)],
          );
          return next;
        });
        if (options.logger) warnOfOptIns(options.logger, document, { tenant, version });
        return version;
      } catch (err) {
        if ((err as { code?: unknown }).code === UNIQUE_VIOLATION) {
          // Only reachable if a writer bypassed the advisory lock; still a lost race, not a crash.
          throw new ChaosError("conflict", "another change to the policy landed first: read it again and reapply the change", {
            cause: err,
          });
        }
        throw err;
      }
    },

    async *watch(tenant, signal) {
      const stop = AbortSignal.any([signal, closing.signal]);
      let seen = -1;
      while (!stop.aborted) {
        if ((await db.tenantTx(tenant, maxVersion)) > seen) {
          const snapshot = await db.tenantTx(tenant, (q) => latest(q, tenant));
          if (snapshot.version > seen) {
            seen = snapshot.version;
            yield snapshot;
            continue;
          }
        }
        await abortableSleep(pollMs, stop);
      }
    },

    async close() {
      closing.abort();
    },
  };
}
