import { ChaosError, type Db } from "@chaos-core/kit";
import {
  isSessionId,
  isSessionIdPrefix,
  SESSION_LIST_MAX,
  SESSION_STATE_MAX_BYTES,
  type CouncilSessionStore,
  type SessionListing,
  type SessionState,
  type StoredSession,
} from "../session-store.js";

/** Options of {@link createSqlCouncilStore}. */
export interface SqlCouncilStoreOptions {
  /** The clock created_at and updated_at come from; tests pin it. */
  now?: () => Date;
}

interface SessionRow {
  id: string;
  state_json: string;
  version: number;
  created_at: Date | string;
  updated_at: Date | string;
}

const COLUMNS = "id::text AS id, state::text AS state_json, version, created_at, updated_at";

function toDate(v: Date | string): Date {
  return v instanceof Date ? v : new Date(v);
}

function toStored(row: SessionRow): StoredSession {
  return {
    id: row.id,
    state: JSON.parse(row.state_json) as SessionState,
    version: Number(row.version),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  };
}

function checkId(id: string): void {
  // Checked here too (the handlers check first), so a bad id never reaches the uuid cast as
  // an SQL error, which would surface as "internal".
  if (!isSessionId(id)) throw new ChaosError("invalid_argument", "sessionId must be a session id issued by council_init (a UUID)");
}

function encodeState(state: SessionState): string {
  const json = JSON.stringify(state);
  const bytes = Buffer.byteLength(json, "utf8");
  if (bytes > SESSION_STATE_MAX_BYTES) {
    throw new ChaosError(
      "resource_exhausted",
      `the session would be ${bytes} bytes as JSON; the limit is ${SESSION_STATE_MAX_BYTES} bytes: start a new session`,
    );
  }
  return json;
}

/**
 * The council session store over a kit {@link Db}: the same SQL on Postgres and on embedded
 * PGlite, every statement inside a tenant transaction, so row-level security applies. A modify
 * is one transaction that locks the row (`SELECT … FOR UPDATE`), so modifications of one session
 * serialize instead of conflicting. Run {@link migrateCouncil} first.
 */
export function createSqlCouncilStore(db: Db, options: SqlCouncilStoreOptions = {}): CouncilSessionStore {
  const now = options.now ?? (() => new Date());

  return {
    async get(tenant, id) {
      checkId(id);
      const res = await db.tenantTx(tenant, (q) =>
        q.query<SessionRow>(`SELECT ${COLUMNS} FROM council.sessions WHERE tenant_id = $1 AND id = $2::uuid`, [tenant, id]),
      );
      const row = res.rows[0];
      return row ? toStored(row) : undefined;
    },

    async create(tenant, id, state) {
      checkId(id);
      const json = encodeState(state);
      const at = now().toISOString();
      const res = await db.tenantTx(tenant, (q) =>
        q.query<SessionRow>(
          `INSERT INTO council.sessions (tenant_id, id, state, version, created_at, updated_at)
           VALUES ($1, $2::uuid, $3::json, 1, $4::timestamptz, $4::timestamptz)
           ON CONFLICT (tenant_id, id) DO NOTHING
           RETURNING ${COLUMNS}`,
          [tenant, id, json, at],
        ),
      );
      const row = res.rows[0];
      if (!row) throw new ChaosError("already_exists", `session ${id} already exists`);
      return toStored(row);
    },

    async list(tenant, { prefix, limit }) {
      // Checked here too, so the prefix can go into LIKE as it is (no % or _ can reach it).
      if (!isSessionIdPrefix(prefix)) {
        throw new ChaosError("invalid_argument", "prefix must be the start of a session id: lowercase hex digits and hyphens, at most 36 characters");
      }
      if (!Number.isInteger(limit) || limit < 1 || limit > SESSION_LIST_MAX) {
        throw new ChaosError("invalid_argument", `limit must be an integer from 1 to ${SESSION_LIST_MAX}; got ${limit}`);
      }
      const res = await db.tenantTx(tenant, (q) =>
        q.query<{ id: string; title: string | null; current_phase: string | null; updated_at: Date | string }>(
          `SELECT id::text AS id, state->>'title' AS title, state->>'currentPhase' AS current_phase, updated_at
             FROM council.sessions
            WHERE tenant_id = $1 AND id::text LIKE $2
            ORDER BY updated_at DESC, id
            LIMIT $3`,
          [tenant, `${prefix}%`, limit],
        ),
      );
      return res.rows.map(
        (row): SessionListing => ({
          id: row.id,
          title: row.title ?? "",
          currentPhase: row.current_phase,
          updatedAt: toDate(row.updated_at),
        }),
      );
    },

    async modify(tenant, id, fn) {
      checkId(id);
      return db.tenantTx(tenant, async (q) => {
        // FOR UPDATE: a concurrent modify of this session waits here until this transaction
        // ends, then reads the state it stored. Plain reads (get) are not blocked.
        const res = await q.query<{ state_json: string; version: number }>(
          "SELECT state::text AS state_json, version FROM council.sessions WHERE tenant_id = $1 AND id = $2::uuid FOR UPDATE",
          [tenant, id],
        );
        const row = res.rows[0];
        // Row-level security makes another tenant's session look absent, as it must.
        if (!row) throw new ChaosError("not_found", `session ${id} was not found`);
        const { state, result } = fn(JSON.parse(row.state_json) as SessionState, Number(row.version));
        const json = encodeState(state);
        const updated = await q.query(
          `UPDATE council.sessions SET state = $3::json, version = version + 1, updated_at = $4::timestamptz
            WHERE tenant_id = $1 AND id = $2::uuid`,
          [tenant, id, json, now().toISOString()],
        );
        // The row is locked and the app role cannot delete: anything else is a broken invariant.
        if (updated.rowCount !== 1) throw new Error(`council: locked session ${id} updated ${updated.rowCount} rows`);
        return result;
      });
    },
  };
}
