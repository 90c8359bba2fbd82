import { decodeCursor, encodeCursor } from "../domain/cursor.js";
import { assertTenantId, ChaosError, type Db } from "@chaos-core/kit";
import { EPISODE_KEY_PREFIX, PROCEDURE_KEY_PREFIX } from "../domain/export-format.js";
import type {
  BatchOptions,
  DeletedItems,
  JsonValue,
  MemoryItem,
  MemoryStats,
  MemoryStore,
  RememberInput,
  RetentionResult,
  SearchInput,
  SearchPage,
  StoredItem,
} from "../domain/memory-store.js";
import { escapeLike, validateKey, validateMaxAgeSeconds, validateRemember, validateSearch, type ValidSearch } from "../domain/validation.js";

/** Options of {@link createSqlMemoryStore}. */
export interface SqlMemoryStoreOptions {
  /** The clock every expiry decision uses; tests move it instead of sleeping. */
  now?: () => Date;
  /** At most this many expired rows are purged per `remember` (default 100). */
  purgeBatch?: number;
  /**
   * One page of `exportItems`: at most `rows` items (default 500), and no more items once their
   * values reach `bytes` (default 4 MiB; a page always holds at least one item).
   */
  exportPage?: { rows: number; bytes: number };
  /** Rows `deleteAll` and `applyRetention` delete per transaction (default 1000). */
  deleteBatch?: number;
}

interface ItemRow {
  key: string;
  value_json: string;
  tags: string[];
  created_at: Date | string;
  updated_at: Date | string;
  expires_at: Date | string | null;
}

/** Live means unexpired at `now`; `$2` is always `now` in the statements below. */
const LIVE = "(expires_at IS NULL OR expires_at > $2::timestamptz)";

function toDate(v: Date | string): Date {
  return v instanceof Date ? v : new Date(v);
}

function toItem(row: ItemRow): MemoryItem {
  return {
    key: row.key,
    value: JSON.parse(row.value_json) as JsonValue,
    tags: row.tags,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    expiresAt: row.expires_at === null ? null : toDate(row.expires_at),
  };
}

/** A count or sum as a JS number; drivers return int8 as string (pg) or number/bigint (PGlite). */
function toCount(v: unknown): number {
  return v === null || v === undefined ? 0 : Number(v);
}

/**
 * The search statement, shared with the benchmark so it measures and explains exactly what
 * runs. `memory.search_items` (see migrations.ts) scopes rows to the transaction's tenant and
 * is asked for one row more than the page, so the store knows whether another page exists.
 */
export function searchStatement(search: ValidSearch, afterKey: string | undefined, now: Date): { sql: string; params: unknown[] } {
  return {
    // A function's rows have no guaranteed order, so order again (C collation, as the column).
    sql: `SELECT key, value_json, tags, created_at, updated_at, expires_at
            FROM memory.search_items($1, $2::text[], $3, $4::timestamptz, $5)
           ORDER BY key COLLATE "C"`,
    params: [escapeLike(search.query), search.tags, afterKey ?? null, now.toISOString(), search.limit + 1],
  };
}

/**
 * One export page after `after` (from the first key when undefined): at most `rows` items in key
 * order, cut once the values before an item reach `bytes` (the first item always stays), so a
 * page of 1 MiB values does not pull hundreds of MiB into the process. The byte count is the
 * stored `value_bytes`, so the cut costs no reading of values that are then left out.
 */
function exportPageStatement(tenant: string, after: string | undefined, rows: number, bytes: number): { sql: string; params: unknown[] } {
  return {
    sql: `SELECT key, value::text AS value_json, tags, created_at, updated_at, expires_at
            FROM (SELECT page.*, sum(value_bytes) OVER (ORDER BY key ROWS UNBOUNDED PRECEDING) - value_bytes AS bytes_before
                    FROM (SELECT key, value, tags, created_at, updated_at, expires_at, value_bytes
                            FROM memory.items
                           WHERE tenant_id = $1 ${after === undefined ? "" : "AND key > $4"}
                           ORDER BY key LIMIT $2) page) sized
           WHERE bytes_before < $3
           ORDER BY key`,
    params: after === undefined ? [tenant, rows, bytes] : [tenant, rows, bytes, after],
  };
}

/**
 * Runs `batch` (one transaction each, returning how many rows it deleted) until one deletes
 * nothing; the total. Not until one deletes "fewer than a batch": a row another call deleted
 * meanwhile shortens a batch without the tenant being done, and an empty batch is one index probe.
 */
async function untilNoneLeft(what: string, options: BatchOptions, batch: () => Promise<number>): Promise<number> {
  let total = 0;
  for (;;) {
    if (options.signal?.aborted) throw new ChaosError("cancelled", `${what} was cancelled after ${total} items; call again to finish`);
    const deleted = await batch();
    if (deleted === 0) return total;
    total += deleted;
  }
}

/**
 * The memory store over a kit {@link Db}: the same SQL on Postgres and on embedded PGlite,
 * every statement inside a tenant transaction, so row-level security applies (search goes
 * through `memory.search_items`, which scopes rows to that transaction's tenant itself so its
 * indexes stay usable) — except recall by key and remember, the calls on a governed call's path:
 * each is one autocommit statement of a function that scopes itself to the tenant it is given
 * (`memory.recall_item`, `memory.remember_item`). Run {@link migrateMemory} first.
 */
export function createSqlMemoryStore(db: Db, options: SqlMemoryStoreOptions = {}): MemoryStore {
  const now = options.now ?? (() => new Date());
  const purgeBatch = options.purgeBatch ?? 100;
  const exportPage = options.exportPage ?? { rows: 500, bytes: 4 * 1024 * 1024 };
  const deleteBatch = options.deleteBatch ?? 1000;

  return {
    async remember(tenant: string, input: RememberInput): Promise<MemoryItem> {
      const item = validateRemember(input);
      const at = now();
      const expiresAt = item.ttlSeconds > 0 ? new Date(at.getTime() + item.ttlSeconds * 1000).toISOString() : null;
      // One statement (migration 0003): the upsert and a bounded purge of expired rows. It runs
      // as the connecting role and scopes itself to `tenant`, so the id is checked here, as a
      // tenant transaction checks it.
      assertTenantId(tenant);
      const res = await db.statement<ItemRow>(
        "SELECT * FROM memory.remember_item($1, $2::timestamptz, $3, $4, $5::text[], $6::timestamptz, $7)",
        [tenant, at.toISOString(), item.key, item.valueJson, item.tags, expiresAt, purgeBatch],
        { name: "memory_remember_item" },
      );
      return toItem(res.rows[0] as ItemRow);
    },

    async recall(tenant: string, key: string): Promise<MemoryItem | undefined> {
      const k = validateKey(key);
      assertTenantId(tenant);
      const res = await db.statement<ItemRow>(
        "SELECT * FROM memory.recall_item($1, $2, $3::timestamptz)",
        [tenant, k, now().toISOString()],
        { name: "memory_recall_item" },
      );
      const row = res.rows[0];
      return row ? toItem(row) : undefined;
    },

    async search(tenant: string, input: SearchInput): Promise<SearchPage> {
      const search = validateSearch(input);
      const scope = { query: search.query, tags: search.tags };
      const afterKey = search.cursor === "" ? undefined : decodeCursor(search.cursor, scope);
      const { sql, params } = searchStatement(search, afterKey, now());
      const res = await db.tenantTx(tenant, (q) => q.query<ItemRow>(sql, params));
      const items = res.rows.slice(0, search.limit).map(toItem);
      const last = items[items.length - 1];
      return res.rows.length > search.limit && last ? { items, nextCursor: encodeCursor(last.key, scope) } : { items };
    },

    async forget(tenant: string, key: string): Promise<boolean> {
      const k = validateKey(key);
      const res = await db.tenantTx(tenant, (q) =>
        q.query<{ live: boolean }>(
          `DELETE FROM memory.items WHERE tenant_id = $1 AND key = $3 RETURNING ${LIVE} AS live`,
          [tenant, now().toISOString(), k],
        ),
      );
      // Deleting an expired row tidies up, but the caller could not see it: nothing was forgotten.
      return res.rows.some((r) => r.live);
    },

    async stats(tenant: string): Promise<MemoryStats> {
      // One statement, so every figure comes from the same snapshot.
      const res = await db.tenantTx(tenant, (q) =>
        q.query<{
          items: unknown;
          expired: unknown;
          value_bytes: unknown;
          oldest: Date | string | null;
          newest: Date | string | null;
          top_tags: string;
        }>(
          `WITH mine AS (
             SELECT tags, value_bytes, updated_at, ${LIVE} AS live FROM memory.items WHERE tenant_id = $1
           ), top AS (
             SELECT tag, count(*) AS n FROM mine CROSS JOIN LATERAL unnest(mine.tags) AS tag
              WHERE live GROUP BY tag ORDER BY n DESC, tag COLLATE "C" LIMIT 10
           )
           SELECT count(*) FILTER (WHERE live) AS items,
                  count(*) FILTER (WHERE NOT live) AS expired,
                  coalesce(sum(value_bytes) FILTER (WHERE live), 0) AS value_bytes,
                  min(updated_at) FILTER (WHERE live) AS oldest,
                  max(updated_at) FILTER (WHERE live) AS newest,
                  (SELECT coalesce(json_agg(json_build_object('tag', tag, 'count', n) ORDER BY n DESC, tag COLLATE "C"), '[]'::json)::text
                     FROM top) AS top_tags
             FROM mine`,
          [tenant, now().toISOString()],
        ),
      );
      const row = res.rows[0];
      if (!row) throw new Error("stats query returned no row");
      return {
        items: toCount(row.items),
        expired: toCount(row.expired),
        valueBytes: toCount(row.value_bytes),
        ...(row.oldest !== null ? { oldestUpdate: toDate(row.oldest) } : {}),
        ...(row.newest !== null ? { newestUpdate: toDate(row.newest) } : {}),
        topTags: (JSON.parse(row.top_tags) as Array<{ tag: string; count: number }>).map((t) => ({
          tag: t.tag,
          count: t.count,
        })),
      };
    },

    async *exportItems(tenant: string): AsyncIterable<StoredItem> {
      let after: string | undefined;
      for (;;) {
        // A transaction per page: a long export never holds one open (on PGlite that would
        // hold the only connection), and the key it resumes after is the page's last.
        const { sql, params } = exportPageStatement(tenant, after, exportPage.rows, exportPage.bytes);
        const res = await db.tenantTx(tenant, (q) => q.query<ItemRow>(sql, params));
        if (res.rows.length === 0) return;
        for (const row of res.rows) {
          yield {
            key: row.key,
            valueJson: row.value_json,
            tags: row.tags,
            createdAt: toDate(row.created_at),
            updatedAt: toDate(row.updated_at),
            expiresAt: row.expires_at === null ? null : toDate(row.expires_at),
          };
        }
        after = res.rows[res.rows.length - 1]?.key;
      }
    },

    async deleteAll(tenant: string, batchOptions: BatchOptions = {}): Promise<DeletedItems> {
      let episodes = 0;
      let procedures = 0;
      const items = await untilNoneLeft("the deletion", batchOptions, async () => {
        const res = await db.tenantTx(tenant, (q) =>
          q.query<{ items: unknown; episodes: unknown; procedures: unknown }>(
            `WITH gone AS (
               DELETE FROM memory.items WHERE tenant_id = $1 AND key IN (
                 SELECT key FROM memory.items WHERE tenant_id = $1 ORDER BY key LIMIT $2)
               RETURNING key)
             SELECT count(*) AS items,
                    count(*) FILTER (WHERE starts_with(key, $3)) AS episodes,
                    count(*) FILTER (WHERE starts_with(key, $4)) AS procedures
               FROM gone`,
            [tenant, deleteBatch, EPISODE_KEY_PREFIX, PROCEDURE_KEY_PREFIX],
          ),
        );
        const row = res.rows[0];
        episodes += toCount(row?.episodes);
        procedures += toCount(row?.procedures);
        return toCount(row?.items);
      });
      return { items, episodes, procedures };
    },

    async applyRetention(tenant: string, maxAgeSeconds: number, batchOptions: BatchOptions = {}): Promise<RetentionResult> {
      const maxAge = validateMaxAgeSeconds(maxAgeSeconds);
      const cutoff = new Date(now().getTime() - maxAge * 1000);
      const deleted = await untilNoneLeft("the retention run", batchOptions, async () => {
        const res = await db.tenantTx(tenant, (q) =>
          // The outer updated_at test is checked again on a row written while this waited for
          // its lock (READ COMMITTED re-evaluates it), so an item remembered meanwhile stays.
          q.query<{ deleted: unknown }>(
            `WITH gone AS (
               DELETE FROM memory.items WHERE tenant_id = $1 AND updated_at < $2::timestamptz AND key IN (
                 SELECT key FROM memory.items WHERE tenant_id = $1 AND updated_at < $2::timestamptz
                  ORDER BY updated_at LIMIT $3)
               RETURNING 1)
             SELECT count(*) AS deleted FROM gone`,
            [tenant, cutoff.toISOString(), deleteBatch],
          ),
        );
        return toCount(res.rows[0]?.deleted);
      });
      return { deleted, cutoff };
    },
  };
}
