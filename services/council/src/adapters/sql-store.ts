import { ChaosError, type Db } from "@chaos-core/kit";
import {
  isSessionId,
  isSessionIdPrefix,
  SESSION_LIST_MAX,
  SESSION_MAX_AGE_SECONDS_MAX,
  SESSION_STATE_MAX_BYTES,
  type CouncilSessionStore,
  type ExportedSession,
  type SessionBatchOptions,
  type SessionListing,
  type SessionState,
  type StoredSession,
} from "../session-store.js";

/** Options of {@link createSqlCouncilStore}. */
export interface SqlCouncilStoreOptions {
  /** The clock created_at and updated_at come from; tests pin it. */
  now?: () => Date;
  /**
   * One page of `exportSessions`: at most `rows` sessions (default 100), and no more sessions once
   * their states reach `bytes` (default 8 MiB; a page always holds at least one session).
   */
  exportPage?: { rows: number; bytes: number };
  /** Sessions `deleteAll` and `applyRetention` delete per transaction (default 500). */
  deleteBatch?: number;
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

function checkMaxAge(maxAge: unknown): number {
  if (typeof maxAge !== "number" || !Number.isInteger(maxAge) || maxAge < 1 || maxAge > SESSION_MAX_AGE_SECONDS_MAX) {
    throw new ChaosError(
      "invalid_argument",
      `max_age_seconds must be a whole number of seconds from 1 to ${SESSION_MAX_AGE_SECONDS_MAX} (sessions last updated longer ago are deleted); got ${String(maxAge)}`,
    );
  }
  return maxAge;
}

/**
 * One export page after session `after` (from the first id when undefined): at most `rows`
 * sessions in id order, cut once the states before a session reach `bytes` (the first session
 * always stays), so a page of multi-MiB states does not pull hundreds of MiB into the process.
 */
function exportPageStatement(tenant: string, after: string | undefined, rows: number, bytes: number): { sql: string; params: unknown[] } {
  return {
    sql: `SELECT id::text AS id, state::text AS state_json, version, created_at, updated_at
            FROM (SELECT page.*, sum(octet_length(state::text)) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING)
                                 - octet_length(state::text) AS bytes_before
                    FROM (SELECT id, state, version, created_at, updated_at
                            FROM council.sessions
                           WHERE tenant_id = $1 ${after === undefined ? "" : "AND id > $4::uuid"}
                           ORDER BY id LIMIT $2) page) sized
           WHERE bytes_before < $3
           ORDER BY id`,
    params: after === undefined ? [tenant, rows, bytes] : [tenant, rows, bytes, after],
  };
}

/**
 * Runs `batch` (one transaction each, returning how many sessions it deleted) until one deletes
 * nothing; the total. Not until one deletes "fewer than a batch": a session deleted meanwhile by
 * another call shortens a batch without the tenant being done, and an empty batch is one probe.
 */
async function untilNoneLeft(what: string, options: SessionBatchOptions, batch: () => Promise<number>): Promise<number> {
  let total = 0;
  for (;;) {
    if (options.signal?.aborted) throw new ChaosError("cancelled", `${what} was cancelled after ${total} sessions; call again to finish`);
    const deleted = await batch();
    if (deleted === 0) return total;
    total += deleted;
  }
}

/**
 * The council session store over a kit {@link Db}: the same SQL on Postgres and on embedded
 * PGlite, every statement inside a tenant transaction, so row-level security applies. A modify
 * is one transaction that locks the row (`SELECT … FOR UPDATE`), so modifications of one session
 * serialize instead of conflicting. Run {@link migrateCouncil} first.
 */
export function createSqlCouncilStore(db: Db, options: SqlCouncilStoreOptions = {}): CouncilSessionStore {
  const now = options.now ?? (() => new Date());
  const exportPage = options.exportPage ?? { rows: 100, bytes: 8 * 1024 * 1024 };
  const deleteBatch = options.deleteBatch ?? 500;

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
        // The row is locked (a delete of it waits for this transaction): anything else is a broken invariant.
        if (updated.rowCount !== 1) throw new Error(`council: locked session ${id} updated ${updated.rowCount} rows`);
        return result;
      });
    },

    async *exportSessions(tenant): AsyncIterable<ExportedSession> {
      let after: string | undefined;
      for (;;) {
        // A transaction per page: a long export never holds one open (on PGlite that would
        // hold the only connection), and the id it resumes after is the page's last.
        const { sql, params } = exportPageStatement(tenant, after, exportPage.rows, exportPage.bytes);
        const res = await db.tenantTx(tenant, (q) => q.query<SessionRow>(sql, params));
        if (res.rows.length === 0) return;
        for (const row of res.rows) {
          yield {
            id: row.id,
            stateJson: row.state_json,
            version: Number(row.version),
            createdAt: toDate(row.created_at),
            updatedAt: toDate(row.updated_at),
          };
        }
        after = res.rows[res.rows.length - 1]?.id;
      }
    },

    async deleteAll(tenant, batchOptions = {}) {
      return untilNoneLeft("the deletion", batchOptions, async () => {
        const res = await db.tenantTx(tenant, (q) =>
          q.query(
            `DELETE FROM council.sessions WHERE tenant_id = $1 AND id IN (
               SELECT id FROM council.sessions WHERE tenant_id = $1 ORDER BY id LIMIT $2)`,
            [tenant, deleteBatch],
          ),
        );
        return res.rowCount;
      });
    },

    async applyRetention(tenant, maxAgeSeconds, batchOptions = {}) {
      const maxAge = checkMaxAge(maxAgeSeconds);
      const cutoff = new Date(now().getTime() - maxAge * 1000);
      const deleted = await untilNoneLeft("the retention run", batchOptions, async () => {
        const res = await db.tenantTx(tenant, (q) =>
          // The outer updated_at test is checked again on a row saved while this waited for its
          // lock (READ COMMITTED re-evaluates it), so a session saved meanwhile stays.
          q.query(
            `DELETE FROM council.sessions WHERE tenant_id = $1 AND updated_at < $2::timestamptz AND id IN (
               SELECT id FROM council.sessions WHERE tenant_id = $1 AND updated_at < $2::timestamptz
                ORDER BY updated_at LIMIT $3)`,
            [tenant, cutoff.toISOString(), deleteBatch],
          ),
        );
        return res.rowCount;
      });
      return { deleted, cutoff };
    },
  };
}
