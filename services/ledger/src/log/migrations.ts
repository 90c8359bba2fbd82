import { APP_ROLE, migrate, pendingMigrations, type Db, type Migration } from "@chaos-core/kit";

/** The schema the ledger service owns. Nothing else reads or writes it. */
export const LEDGER_SCHEMA = "ledger";

/** The tables no one may change after insert; see the migration comment. */
export const APPEND_ONLY_TABLES = ["entries", "nodes", "checkpoints", "nonces", "spend_requests"] as const;

/** The append-only tables of the first migration (its SQL must not change once applied). */
const FIRST_APPEND_ONLY_TABLES = ["entries", "nodes", "checkpoints", "nonces"] as const;

const TENANT_POLICY = (table: string): string => `
      ALTER TABLE ledger.${table} ENABLE ROW LEVEL SECURITY;
      ALTER TABLE ledger.${table} FORCE ROW LEVEL SECURITY;
      CREATE POLICY ${table}_tenant_isolation ON ledger.${table}
        USING (tenant_id = current_setting('app.tenant_id', true))
        WITH CHECK (tenant_id = current_setting('app.tenant_id', true));`;

const APPEND_ONLY = (table: string): string => `
      CREATE TRIGGER ${table}_append_only BEFORE UPDATE OR DELETE ON ledger.${table}
        FOR EACH ROW EXECUTE FUNCTION ledger.refuse_change();
      CREATE TRIGGER ${table}_no_truncate BEFORE TRUNCATE ON ledger.${table}
        FOR EACH STATEMENT EXECUTE FUNCTION ledger.refuse_change();
      GRANT SELECT, INSERT ON ledger.${table} TO ${APP_ROLE};`;

/**
 * The ledger's migrations, forward-only; the same SQL runs on Postgres and PGlite.
 *
 * - `entries.event` is `json`, not `jsonb`: it keeps the exact canonical JSON text that was
 *   hashed into `content_hash` (jsonb would reorder keys and respell numbers, e.g. `1.0e2`),
 *   so a verifier re-reads the very bytes the chain covers. `ts` is `text` for the same
 *   reason: the RFC 3339 string is what the chain signs, not an instant.
 * - `nodes` holds every perfect Merkle subtree above the leaves (level ≥ 1; a leaf hash is
 *   SHA-256(0x00 || sig) of its entry, so storing it again would add a row per append): a
 *   proof is a handful of reads, never a rebuild. `heads.frontier` is the tree's right border
 *   (one hash per set bit of `size`, hex, largest first), so an append never reads old nodes.
 * - One checkpoint per commit, signed, keyed by tree size.
 * - Append-only twice: ${APP_ROLE} gets only SELECT, INSERT on entries, nodes, checkpoints and
 *   nonces, and a trigger refuses UPDATE, DELETE and TRUNCATE for everyone, owner and superuser
 *   included (short of ALTER TABLE … DISABLE TRIGGER, which only the owner can run and which
 *   `verify` then catches through the chain and the signed roots).
 * - `heads` and `spend_days` are mutable by design (a counter and a running total) and are
 *   outside the append-only guarantee; what they summarise is itself in the append-only
 *   entries, so `verify` never trusts them.
 * - Row-level security is forced on every table: a query that forgets `tenant_id` still sees
 *   one tenant.
 * - `spend_requests` (0002) holds the full arguments of each HITL_REQUIRED spend or finance
 *   request beside its entry, which records only their hash (so exports stay as they were):
 *   what a person approves is shown whole, and re-hashed against the entry before anyone may
 *   answer. Append-only too; a request's answer and collection are marker rows in `nonces`
 *   (`request-<seq>`, `collect-<seq>`) committed with the entries that record them.
 * - `webhook_outbox` (0003) is delivery state, not audit: one row per entry that notifies a
 *   person's approval (docs/approvals.md §6), written in the flush transaction of that entry,
 *   then updated as attempts are made (${APP_ROLE}: SELECT, INSERT, UPDATE; no trigger; never
 *   deleted); since 0006 a row is an entry's (`kind` entry, keyed by its seq) or a signed
 *   checkpoint's (`kind` checkpoint, keyed by its size, written by the integrator in the
 *   transaction that signs it). `webhook_tenants` lists the tenants that ever had a row, ids only, so a dispatcher
 *   finds them without reading any tenant's rows: every tenant may read it, each inserts only
 *   itself.
 * - `trees` (0004) is the integrated Merkle tree per tenant: its size and right border. Appends
 *   now only sequence (entry + chain link + `heads`); an integrator adds the nodes and a signed
 *   checkpoint in batches and moves `trees` (docs/ledger.md §2). A log written before 0004 has
 *   no row: the integrator makes one from the newest checkpoint and its stored nodes, which the
 *   old per-commit write always kept in step, so nothing is rewritten on upgrade. From 0004 on
 *   `heads.frontier` holds the marker `sequenced`, which a replica of the old code refuses as a
 *   frontier (it fails closed instead of signing a wrong root): stop old replicas before the new
 *   ones append. `sequence_batch(…)` is the append's fast path in one round trip: one
 *   autocommit statement that scopes itself to the tenant it is given (row-level security stays
 *   forced) and writes the entries only if the head is where the batch was chained; EXECUTE is
 *   revoked from PUBLIC, so ${APP_ROLE} cannot call it for another tenant. `log_tenants` lists tenant ids (ids only, every tenant may read it, each
 *   inserts only itself) so an integrator finds logs left behind by a replica that died.
 * - `sequence_rows(…)` (0005) is the same fast path with the batch as one JSON parameter (an
 *   array of row objects, each event's canonical text spliced in, kept byte for byte by `json`)
 *   instead of eight arrays, and it refuses a batch whose seqs do not run on from the head one by
 *   one. `sequence_batch` stays for replicas that have not been upgraded; both write the same rows.
 */
export const LEDGER_MIGRATIONS: Migration[] = [
  {
    id: "0001_audit_log",
    sql: `
      CREATE FUNCTION ledger.refuse_change() RETURNS trigger
      LANGUAGE plpgsql AS $fn$
      BEGIN
        RAISE EXCEPTION 'ledger.% is append-only: % refused', TG_TABLE_NAME, TG_OP
          USING ERRCODE = 'insufficient_privilege';
      END
      $fn$;

      CREATE TABLE ledger.entries (
        tenant_id    text NOT NULL,
        seq          bigint NOT NULL CHECK (seq >= 1),
        ts           text NOT NULL,
        session      text NOT NULL,
        principal    text NOT NULL,
        event        json NOT NULL,
        content_hash text NOT NULL,
        prev_sig     text NOT NULL,
        sig          text NOT NULL,
        PRIMARY KEY (tenant_id, seq)
      );

      CREATE TABLE ledger.nodes (
        tenant_id text NOT NULL,
        level     smallint NOT NULL CHECK (level >= 1 AND level < 64),
        idx       bigint NOT NULL CHECK (idx >= 0),
        hash      bytea NOT NULL CHECK (octet_length(hash) = 32),
        PRIMARY KEY (tenant_id, level, idx)
      );

      CREATE TABLE ledger.checkpoints (
        tenant_id  text NOT NULL,
        size       bigint NOT NULL CHECK (size >= 0),
        root       bytea NOT NULL CHECK (octet_length(root) = 32),
        note       text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, size)
      );

      CREATE TABLE ledger.heads (
        tenant_id  text PRIMARY KEY,
        size       bigint NOT NULL CHECK (size >= 0),
        last_sig   text NOT NULL,
        frontier   text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );

      CREATE TABLE ledger.nonces (
        tenant_id   text NOT NULL,
        nonce       text NOT NULL,
        consumed_at timestamptz NOT NULL DEFAULT now(),
        entry_seq   bigint,
        PRIMARY KEY (tenant_id, nonce)
      );

      CREATE TABLE ledger.spend_days (
        tenant_id   text NOT NULL,
        policy_name text NOT NULL,
        day         date NOT NULL,
        committed   double precision NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant_id, policy_name, day)
      );

      ${["entries", "nodes", "checkpoints", "heads", "nonces", "spend_days"].map(TENANT_POLICY).join("\n")}
      ${FIRST_APPEND_ONLY_TABLES.map(APPEND_ONLY).join("\n")}
      GRANT SELECT, INSERT, UPDATE ON ledger.heads TO ${APP_ROLE};
      GRANT SELECT, INSERT, UPDATE ON ledger.spend_days TO ${APP_ROLE};
    `,
  },
  {
    id: "0002_spend_requests",
    sql: `
      CREATE TABLE ledger.spend_requests (
        tenant_id   text NOT NULL,
        request_seq bigint NOT NULL CHECK (request_seq >= 1),
        kind        text NOT NULL CHECK (kind IN ('spend', 'finance')),
        policy_name text NOT NULL,
        tool        text,
        args_hash   text NOT NULL,
        arguments   json NOT NULL,
        principal   text NOT NULL,
        session     text NOT NULL,
        created_at  timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, request_seq)
      );
      -- The finance tools look up an approved request by its call.
      CREATE INDEX spend_requests_by_call ON ledger.spend_requests (tenant_id, principal, tool, args_hash);
      ${TENANT_POLICY("spend_requests")}
      ${APPEND_ONLY("spend_requests")}
    `,
  },
  {
    id: "0003_webhooks",
    sql: `
      CREATE TABLE ledger.webhook_outbox (
        tenant_id       text NOT NULL,
        entry_seq       bigint NOT NULL CHECK (entry_seq >= 1),
        payload         json NOT NULL,
        attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at timestamptz NOT NULL DEFAULT now(),
        lease_until     timestamptz,
        delivered_at    timestamptz,
        failed_at       timestamptz,
        last_error      text,
        PRIMARY KEY (tenant_id, entry_seq)
      );
      -- What a dispatcher looks for: rows of one tenant still to send, soonest first.
      CREATE INDEX webhook_outbox_due ON ledger.webhook_outbox (tenant_id, next_attempt_at)
        WHERE delivered_at IS NULL AND failed_at IS NULL;
      ${TENANT_POLICY("webhook_outbox")}
      GRANT SELECT, INSERT, UPDATE ON ledger.webhook_outbox TO ${APP_ROLE};

      CREATE TABLE ledger.webhook_tenants (
        tenant_id  text PRIMARY KEY,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      ALTER TABLE ledger.webhook_tenants ENABLE ROW LEVEL SECURITY;
      ALTER TABLE ledger.webhook_tenants FORCE ROW LEVEL SECURITY;
      CREATE POLICY webhook_tenants_listed ON ledger.webhook_tenants FOR SELECT USING (true);
      CREATE POLICY webhook_tenants_own_insert ON ledger.webhook_tenants FOR INSERT
        WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
      GRANT SELECT, INSERT ON ledger.webhook_tenants TO ${APP_ROLE};
    `,
  },
  {
    id: "0004_sequence_then_integrate",
    sql: `
      CREATE TABLE ledger.trees (
        tenant_id  text PRIMARY KEY,
        size       bigint NOT NULL CHECK (size >= 0),
        frontier   text NOT NULL,
        last_sig   text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      ${TENANT_POLICY("trees")}
      GRANT SELECT, INSERT, UPDATE ON ledger.trees TO ${APP_ROLE};

      CREATE TABLE ledger.log_tenants (
        tenant_id  text PRIMARY KEY,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      ALTER TABLE ledger.log_tenants ENABLE ROW LEVEL SECURITY;
      ALTER TABLE ledger.log_tenants FORCE ROW LEVEL SECURITY;
      CREATE POLICY log_tenants_listed ON ledger.log_tenants FOR SELECT USING (true);
      CREATE POLICY log_tenants_own_insert ON ledger.log_tenants FOR INSERT
        WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
      GRANT SELECT, INSERT ON ledger.log_tenants TO ${APP_ROLE};

      CREATE FUNCTION ledger.sequence_batch(
        p_tenant text, p_seq bigint[], p_ts text[], p_session text[], p_principal text[], p_event text[],
        p_content_hash text[], p_prev_sig text[], p_sig text[], p_from_size bigint, p_from_sig text)
      RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
      DECLARE
        n bigint := coalesce(cardinality(p_seq), 0);
      BEGIN
        IF n = 0 OR p_seq[1] <> p_from_size + 1 OR p_seq[n] <> p_from_size + n THEN
          RAISE EXCEPTION 'ledger.sequence_batch: seqs must follow the head' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- Row-level security stays on (forced for the owner too): the batch sees one tenant.
        PERFORM set_config('app.tenant_id', p_tenant, true);
        UPDATE ledger.heads SET size = p_from_size + n, last_sig = p_sig[n], frontier = 'sequenced', updated_at = now()
         WHERE tenant_id = p_tenant AND size = p_from_size AND last_sig = p_from_sig;
        IF NOT FOUND THEN
          RETURN 0;
        END IF;
        INSERT INTO ledger.entries (tenant_id, seq, ts, session, principal, event, content_hash, prev_sig, sig)
        SELECT p_tenant, e.seq, e.ts, e.session, e.principal, e.event::json, e.content_hash, e.prev_sig, e.sig
          FROM unnest(p_seq, p_ts, p_session, p_principal, p_event, p_content_hash, p_prev_sig, p_sig)
               AS e(seq, ts, session, principal, event, content_hash, prev_sig, sig);
        RETURN n;
      END
      $fn$;
      REVOKE ALL ON FUNCTION ledger.sequence_batch(text, bigint[], text[], text[], text[], text[], text[], text[], text[], bigint, text) FROM PUBLIC;
    `,
  },
  {
    id: "0005_sequence_rows",
    sql: `
      CREATE FUNCTION ledger.sequence_rows(p_tenant text, p_entries text, p_from_size bigint, p_from_sig text)
      RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
      DECLARE
        entries json := p_entries::json;
        n bigint := json_array_length(entries);
        written bigint;
      BEGIN
        IF n = 0 THEN
          RAISE EXCEPTION 'ledger.sequence_rows: no entries' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- Row-level security stays on (forced for the owner too): the batch sees one tenant.
        PERFORM set_config('app.tenant_id', p_tenant, true);
        UPDATE ledger.heads SET size = p_from_size + n, last_sig = entries->(n::int - 1)->>'sig', frontier = 'sequenced', updated_at = now()
         WHERE tenant_id = p_tenant AND size = p_from_size AND last_sig = p_from_sig;
        IF NOT FOUND THEN
          RETURN 0;
        END IF;
        INSERT INTO ledger.entries (tenant_id, seq, ts, session, principal, event, content_hash, prev_sig, sig)
        SELECT p_tenant, e.seq, e.ts, e.session, e.principal, e.event, e.content_hash, e.prev_sig, e.sig
          FROM ROWS FROM (json_to_recordset(entries)
                 AS (seq bigint, ts text, session text, principal text, event json, content_hash text, prev_sig text, sig text))
               WITH ORDINALITY AS e(seq, ts, session, principal, event, content_hash, prev_sig, sig, i)
         WHERE e.seq = p_from_size + e.i;
        GET DIAGNOSTICS written = ROW_COUNT;
        IF written <> n THEN
          RAISE EXCEPTION 'ledger.sequence_rows: seqs must follow the head' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN n;
      END
      $fn$;
      REVOKE ALL ON FUNCTION ledger.sequence_rows(text, text, bigint, text) FROM PUBLIC;
    `,
  },
  {
    // A row is an entry's event or a checkpoint's (ledger.checkpoint, keyed by its size).
    id: "0006_webhook_checkpoints",
    sql: `
      ALTER TABLE ledger.webhook_outbox ADD COLUMN kind text NOT NULL DEFAULT 'entry' CHECK (kind IN ('entry', 'checkpoint'));
      ALTER TABLE ledger.webhook_outbox DROP CONSTRAINT webhook_outbox_pkey;
      ALTER TABLE ledger.webhook_outbox ADD PRIMARY KEY (tenant_id, kind, entry_seq);
    `,
  },
];

/** Applies the ledger migrations (idempotent, safe for concurrent replicas); returns the ids applied now. */
export function migrateLedger(db: Db): Promise<string[]> {
  return migrate(db, LEDGER_SCHEMA, LEDGER_MIGRATIONS);
}

/** The ledger migrations not yet applied (applies nothing): what `CHAOS_CORE_MIGRATE=verify` waits on. */
export function pendingLedgerMigrations(db: Db): Promise<string[]> {
  return pendingMigrations(db, LEDGER_SCHEMA, LEDGER_MIGRATIONS);
}
