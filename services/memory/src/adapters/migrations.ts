import { APP_ROLE, migrate, pendingMigrations, type Db, type Migration } from "@chaos-core/kit";

/** The schema the memory service owns. Nothing else reads or writes it. */
export const MEMORY_SCHEMA = "memory";

/** Postgres extensions the memory migrations need; PGlite must be created with them loaded. */
export const MEMORY_PG_EXTENSIONS: readonly string[] = ["pg_trgm"];

/**
 * The memory service's migrations, forward-only. The same SQL runs on Postgres and PGlite.
 *
 * - `key` is `COLLATE "C"`: keyset pagination then orders by code point on both engines,
 *   whatever the database locale, and the primary key serves `key > $cursor ORDER BY key`.
 * - `value` is `json`, not `jsonb`: it keeps the exact compact text the service wrote, so
 *   search matches what a caller would see and `value_bytes` is that text's size.
 * - `search` is the lower-cased key and value text; a trigram GIN index over it keeps
 *   `LIKE '%…%'` fast at any table size (a b-tree cannot serve a leading wildcard).
 * - Row-level security is forced, so even a query that forgets `tenant_id` sees one tenant.
 * - Search goes through `memory.search_items`; the comment above it in the SQL says why, and
 *   0004's why the index gets the query's words rather than the whole pattern.
 * - `items_updated` serves retention (items whose last write is older than an age).
 * - Recall by key and remember are one statement each (`memory.recall_item`,
 *   `memory.remember_item`, 0003): the comment above them says how they stay in one tenant.
 */
export const MEMORY_MIGRATIONS: Migration[] = [
  {
    id: "0001_items",
    sql: `
      CREATE EXTENSION IF NOT EXISTS pg_trgm;

      CREATE TABLE memory.items (
        tenant_id   text NOT NULL,
        key         text COLLATE "C" NOT NULL,
        value       json NOT NULL,
        tags        text[] NOT NULL DEFAULT '{}',
        created_at  timestamptz NOT NULL,
        updated_at  timestamptz NOT NULL,
        expires_at  timestamptz,
        search      text GENERATED ALWAYS AS (lower(key || E'\\n' || (value::text))) STORED,
        value_bytes integer GENERATED ALWAYS AS (octet_length(value::text)) STORED,
        PRIMARY KEY (tenant_id, key)
      );

      CREATE INDEX items_search_trgm ON memory.items USING gin (search gin_trgm_ops);
      CREATE INDEX items_tags ON memory.items USING gin (tags);
      -- Serves the bounded purge and the expired count; most items never expire.
      CREATE INDEX items_expiry ON memory.items (tenant_id, expires_at) WHERE expires_at IS NOT NULL;

      ALTER TABLE memory.items ENABLE ROW LEVEL SECURITY;
      ALTER TABLE memory.items FORCE ROW LEVEL SECURITY;
      CREATE POLICY items_tenant_isolation ON memory.items
        USING (tenant_id = current_setting('app.tenant_id', true))
        WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

      GRANT SELECT, INSERT, UPDATE, DELETE ON memory.items TO ${APP_ROLE};

      -- Search runs in a SECURITY DEFINER function. Under row-level security Postgres uses an
      -- index only for leakproof operators, and neither LIKE (textlike) nor @> (arraycontains)
      -- is leakproof: queried as ${APP_ROLE}, the trigram and tag indexes are never used and
      -- every search scans the whole table (seen at 100k rows: a sequential scan, ~55 ms).
      -- The function runs as the role that ran this migration (which bypasses RLS when it is a
      -- superuser or has BYPASSRLS) and scopes rows itself with exactly the policy's predicate,
      -- reading the tenant from the same transaction setting, never from an argument. With an
      -- owner that cannot bypass RLS it stays correct (FORCE applies to the owner), only slower.
      CREATE FUNCTION memory.search_items(
        p_like text, p_tags text[], p_after text, p_now timestamptz, p_limit integer)
      RETURNS TABLE (key text, value_json text, tags text[], created_at timestamptz,
                     updated_at timestamptz, expires_at timestamptz)
      LANGUAGE plpgsql STABLE SECURITY DEFINER
      SET search_path = pg_catalog, pg_temp
      AS $fn$
      DECLARE
        v_tenant text := current_setting('app.tenant_id', true);
        v_sql text := 'SELECT i.key::text, i.value::text, i.tags, i.created_at, i.updated_at, i.expires_at
                         FROM memory.items i
                        WHERE i.tenant_id = $1 AND (i.expires_at IS NULL OR i.expires_at > $2)';
      BEGIN
        IF v_tenant IS NULL OR v_tenant = '' THEN
          RAISE EXCEPTION 'memory.search_items runs only in a tenant transaction (app.tenant_id is not set)'
            USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF p_like <> '' THEN
          v_sql := v_sql || ' AND i.search LIKE ''%'' || lower($3) || ''%''';
        END IF;
        IF cardinality(p_tags) > 0 THEN
          v_sql := v_sql || ' AND i.tags @> $4';
        END IF;
        IF p_after IS NOT NULL THEN
          v_sql := v_sql || ' AND i.key > $5';
        END IF;
        -- EXECUTE plans every call with the actual values: a rare substring gets the trigram
        -- index, an empty or common one walks the primary key in key order.
        RETURN QUERY EXECUTE v_sql || ' ORDER BY i.key LIMIT $6'
          USING v_tenant, p_now, p_like, p_tags, p_after, p_limit;
      END
      $fn$;
      REVOKE ALL ON FUNCTION memory.search_items(text, text[], text, timestamptz, integer) FROM PUBLIC;
      GRANT EXECUTE ON FUNCTION memory.search_items(text, text[], text, timestamptz, integer) TO ${APP_ROLE};
    `,
  },
  {
    // ApplyRetention deletes a tenant's items by their last write, oldest first, a batch at a
    // time; without this each batch would read every row of the tenant. (timestamptz's < is
    // leakproof, so the index serves queries under row-level security.)
    id: "0002_items_updated",
    sql: `CREATE INDEX items_updated ON memory.items (tenant_id, updated_at);`,
  },
  {
    // The two calls on a governed call's path, recall by key and remember, each as one statement:
    // one round trip on Postgres (was BEGIN + tenant prelude, the statement(s), COMMIT), one
    // statement instead of four or five on PGlite, which runs every statement of the process one
    // at a time. Each function is
    // called on its own, as autocommit (kit's `Db.statement`), by the connecting role: it scopes
    // itself to the tenant it is given — the setting row-level security reads, and the tenant in
    // every predicate — as ledger.sequence_batch does. EXECUTE is revoked from PUBLIC, so the
    // application role (a tenant transaction's role) cannot call them and name another tenant.
    id: "0003_one_statement_calls",
    sql: `
      CREATE FUNCTION memory.recall_item(p_tenant text, p_key text, p_now timestamptz)
      RETURNS TABLE (key text, value_json text, tags text[], created_at timestamptz,
                     updated_at timestamptz, expires_at timestamptz)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
      BEGIN
        PERFORM set_config('app.tenant_id', p_tenant, true);
        RETURN QUERY
          SELECT i.key::text, i.value::text, i.tags, i.created_at, i.updated_at, i.expires_at
            FROM memory.items i
           WHERE i.tenant_id = p_tenant AND i.key = p_key
             AND (i.expires_at IS NULL OR i.expires_at > p_now);
      END
      $fn$;
      REVOKE ALL ON FUNCTION memory.recall_item(text, text, timestamptz) FROM PUBLIC;

      -- An item that had expired is gone as far as callers know: remembering its key again
      -- starts a new item, so created_at restarts too. Then at most p_purge expired rows of the
      -- tenant are purged (SKIP LOCKED: concurrent writers purge disjoint rows instead of
      -- queueing on, or deadlocking over, the same ones) — purging rides on writes, never reads.
      CREATE FUNCTION memory.remember_item(
        p_tenant text, p_now timestamptz, p_key text, p_value text, p_tags text[],
        p_expires_at timestamptz, p_purge integer)
      RETURNS TABLE (key text, value_json text, tags text[], created_at timestamptz,
                     updated_at timestamptz, expires_at timestamptz)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
      #variable_conflict use_column
      BEGIN
        PERFORM set_config('app.tenant_id', p_tenant, true);
        RETURN QUERY
          WITH written AS (
            INSERT INTO memory.items AS i (tenant_id, key, value, tags, created_at, updated_at, expires_at)
            VALUES (p_tenant, p_key, p_value::json, p_tags, p_now, p_now, p_expires_at)
            ON CONFLICT (tenant_id, key) DO UPDATE SET
              value = excluded.value,
              tags = excluded.tags,
              updated_at = excluded.updated_at,
              expires_at = excluded.expires_at,
              created_at = CASE WHEN i.expires_at IS NOT NULL AND i.expires_at <= excluded.updated_at
                                THEN excluded.created_at ELSE i.created_at END
            RETURNING i.key::text, i.value::text, i.tags, i.created_at, i.updated_at, i.expires_at)
          SELECT * FROM written;
        DELETE FROM memory.items d WHERE (d.tenant_id, d.key) IN (
          SELECT x.tenant_id, x.key FROM memory.items x
           WHERE x.tenant_id = p_tenant AND x.expires_at <= p_now
           ORDER BY x.expires_at LIMIT p_purge FOR UPDATE SKIP LOCKED);
      END
      $fn$;
      REVOKE ALL ON FUNCTION memory.remember_item(text, timestamptz, text, text, text[], timestamptz, integer) FROM PUBLIC;
    `,
  },  {
    // Search over a million items (issue 14): a rare substring took 12–26 ms, nearly all of it in
    // the trigram index. pg_trgm pads each word of a LIKE pattern that starts or ends at a
    // separator ("zq-needle-007" → "  0", " 00", " ne", "  n", …), and those padded trigrams are
    // in nearly every row (every key's "/0000123", every "note"): the GIN scan read their posting
    // lists in full (1,299 buffers for 60 candidates). Now the index is given only the query's
    // words — runs of 3+ letters or digits, each as `LIKE '%word%'`, which has no padding — and
    // the exact pattern is applied to the rows it yields as a filter the index cannot take
    // (`(search || '') LIKE …`); each word is a substring of the pattern, so no match is lost.
    // A query that is one word, or has none of 3+ characters, is served as before. No parallel
    // workers: a page of 20 never needs them, and a filter's default estimate could start them
    // for a walk of the primary key (8 ms of start-up seen).
    id: "0004_search_words",
    sql: `
      CREATE OR REPLACE FUNCTION memory.search_items(
        p_like text, p_tags text[], p_after text, p_now timestamptz, p_limit integer)
      RETURNS TABLE (key text, value_json text, tags text[], created_at timestamptz,
                     updated_at timestamptz, expires_at timestamptz)
      LANGUAGE plpgsql STABLE SECURITY DEFINER
      SET search_path = pg_catalog, pg_temp
      SET max_parallel_workers_per_gather = 0
      AS $fn$
      DECLARE
        v_tenant text := current_setting('app.tenant_id', true);
        v_like text := lower(p_like);
        v_words text[];
        v_sql text := 'SELECT i.key::text, i.value::text, i.tags, i.created_at, i.updated_at, i.expires_at
                         FROM memory.items i
                        WHERE i.tenant_id = $1 AND (i.expires_at IS NULL OR i.expires_at > $2)';
      BEGIN
        IF v_tenant IS NULL OR v_tenant = '' THEN
          RAISE EXCEPTION 'memory.search_items runs only in a tenant transaction (app.tenant_id is not set)'
            USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF v_like <> '' THEN
          SELECT coalesce(array_agg(w ORDER BY length(w) DESC, w), '{}') INTO v_words
            FROM (SELECT DISTINCT m[1] AS w FROM regexp_matches(v_like, '([[:alnum:]]{3,})', 'g') AS m) words;
          v_words := v_words[1:8];
          IF cardinality(v_words) = 0 OR v_words = ARRAY[v_like] THEN
            v_sql := v_sql || ' AND i.search LIKE ''%'' || $3 || ''%''';
          ELSE
            FOR k IN 1 .. cardinality(v_words) LOOP
              v_sql := v_sql || ' AND i.search LIKE ''%'' || $7[' || k || '] || ''%''';
            END LOOP;
            v_sql := v_sql || ' AND (i.search || '''') LIKE ''%'' || $3 || ''%''';
          END IF;
        END IF;
        IF cardinality(p_tags) > 0 THEN
          v_sql := v_sql || ' AND i.tags @> $4';
        END IF;
        IF p_after IS NOT NULL THEN
          v_sql := v_sql || ' AND i.key > $5';
        END IF;
        RETURN QUERY EXECUTE v_sql || ' ORDER BY i.key LIMIT $6'
          USING v_tenant, p_now, v_like, p_tags, p_after, p_limit, v_words;
      END
      $fn$;
    `,
  },
];

/** Applies the memory migrations (idempotent, safe for concurrent replicas); returns the ids applied now. */
export function migrateMemory(db: Db): Promise<string[]> {
  return migrate(db, MEMORY_SCHEMA, MEMORY_MIGRATIONS);
}

/** The memory migrations not yet applied (applies nothing): what `CHAOS_CORE_MIGRATE=verify` waits on. */
export function pendingMemoryMigrations(db: Db): Promise<string[]> {
  return pendingMigrations(db, MEMORY_SCHEMA, MEMORY_MIGRATIONS);
}
