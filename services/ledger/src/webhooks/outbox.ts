import { ChaosError, type Db, type Queryable } from "@chaos-core/kit";
import { parseEvent, type LedgerEntry } from "../log/entry.js";
import type { SignedCheckpoint } from "../log/integrator.js";
import { checkpointEventOf } from "./checkpoint-events.js";
import { notifies, spendRequestSeqOf, webhookEventOf, type SpendRequestFacts } from "./events.js";

/** Which row: an entry's event (by its seq) or a signed checkpoint's (`ledger.checkpoint`, by its size). */
export interface WebhookKey {
  readonly kind: "entry" | "checkpoint";
  readonly entrySeq: number;
}

/** A row leased for delivery: the body is the stored JSON text, sent and signed byte for byte. */
export interface LeasedWebhook extends WebhookKey {
  readonly body: string;
  /** Attempts made before this one. */
  readonly attempts: number;
}

/** A row as stored, for an operator or a test. */
export interface StoredWebhook extends WebhookKey {
  readonly body: string;
  readonly attempts: number;
  readonly nextAttemptAt: Date;
  readonly leaseUntil: Date | null;
  readonly deliveredAt: Date | null;
  readonly failedAt: Date | null;
  readonly lastError: string | null;
}

/**
 * The durable outbox of webhook events (`ledger.webhook_outbox`, docs/approvals.md §6). Rows are
 * written with the entries they notify, in their flush transaction, so none is lost on a
 * crash; a dispatcher leases due rows, so two replicas do not send the same row at once.
 */
export interface WebhookOutbox {
  /** In the flush transaction: one row per entry that makes an event. */
  enqueue(q: Queryable, tenant: string, entries: readonly LedgerEntry[]): Promise<void>;
  /** In the transaction that signs it: the checkpoint's `ledger.checkpoint` row. */
  enqueueCheckpoint(q: Queryable, tenant: string, checkpoint: SignedCheckpoint): Promise<void>;
  /** The tenants that ever had a row (ids only). */
  tenants(): Promise<string[]>;
  /** Leases up to `limit` due rows of `tenant` for `leaseSeconds`, oldest entry first (an entry before the checkpoint of its size). */
  lease(tenant: string, limit: number, leaseSeconds: number): Promise<LeasedWebhook[]>;
  /** The attempt got a 2xx: never sent again. */
  delivered(tenant: string, key: WebhookKey): Promise<void>;
  /** The attempt failed; the next one is due in `afterSeconds`. */
  retry(tenant: string, key: WebhookKey, afterSeconds: number, error: string): Promise<void>;
  /** The last attempt failed: never sent again. */
  failed(tenant: string, key: WebhookKey, error: string): Promise<void>;
  /** Gives leased rows back unattempted (a dispatcher stopping), so another sends them now. */
  release(tenant: string, keys: readonly WebhookKey[]): Promise<void>;
  /** Every row of a tenant, oldest entry first. */
  list(tenant: string): Promise<StoredWebhook[]>;
}

/** pg returns int8 as text, PGlite as number or bigint. */
function toInt(v: unknown): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new ChaosError("internal", `not a safe integer: ${String(v)}`);
  return n;
}

function toDate(v: unknown): Date | null {
  if (v === null || v === undefined) return null;
  return v instanceof Date ? v : new Date(String(v));
}

interface RequestRow {
  request_seq: string | number;
  policy_name: string;
  tool: string | null;
  args_hash: string;
  principal: string;
  created_at: Date | string;
  event_text: string;
}

/** The spend requests `seqs` name, with the channels their request entries recorded. */
async function readRequests(q: Queryable, tenant: string, seqs: readonly number[]): Promise<Map<number, SpendRequestFacts>> {
  const res = await q.query<RequestRow>(
    `SELECT r.request_seq, r.policy_name, r.tool, r.args_hash, r.principal, r.created_at, e.event::text AS event_text
       FROM ledger.spend_requests r
       JOIN ledger.entries e ON e.tenant_id = r.tenant_id AND e.seq = r.request_seq
      WHERE r.tenant_id = $1 AND r.request_seq = ANY($2::bigint[])`,
    [tenant, [...seqs]],
  );
  const out = new Map<number, SpendRequestFacts>();
  for (const row of res.rows) {
    const channels = parseEvent(row.event_text).approval_channels;
    const seq = toInt(row.request_seq);
    out.set(seq, {
      requestSeq: seq,
      policy: row.policy_name,
      tool: row.tool,
      argsHash: row.args_hash,
      requestedBy: row.principal,
      createdAt: toDate(row.created_at)!,
      channels: Array.isArray(channels) ? channels.filter((c): c is string => typeof c === "string") : [],
    });
  }
  return out;
}

// A row is due when it is neither settled nor leased by anyone now; an entry goes before the checkpoint of its size.
const LEASE = `
  UPDATE ledger.webhook_outbox o SET lease_until = now() + make_interval(secs => $3)
   WHERE o.tenant_id = $1 AND (o.kind, o.entry_seq) IN (
     SELECT kind, entry_seq FROM ledger.webhook_outbox
      WHERE tenant_id = $1 AND delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
        AND (lease_until IS NULL OR lease_until <= now())
      ORDER BY entry_seq, kind DESC
      LIMIT $2
      FOR UPDATE SKIP LOCKED)
  RETURNING o.kind, o.entry_seq, o.payload::text AS body, o.attempts`;

/** Only a row still unsettled moves: a slower replica whose lease ran out cannot undo a delivery. */
const UNSETTLED = "tenant_id = $1 AND kind = $2 AND entry_seq = $3 AND delivered_at IS NULL AND failed_at IS NULL";

const kindOf = (v: string): WebhookKey["kind"] => (v === "checkpoint" ? "checkpoint" : "entry");
const byLedgerOrder = (a: WebhookKey, b: WebhookKey) => a.entrySeq - b.entrySeq || (a.kind === b.kind ? 0 : a.kind === "entry" ? -1 : 1);

/**
 * The outbox on the ledger's database, as the application role under row-level security (the
 * tenant list, ids only, through the connecting role). `publicUrl` builds the console links.
 */
export function createWebhookOutbox(db: Db, options: { publicUrl?: string } = {}): WebhookOutbox {
  const context = options.publicUrl !== undefined ? { publicUrl: options.publicUrl } : {};
  return {
    async enqueue(q, tenant, entries) {
      const candidates = entries.filter((e) => notifies(e.event));
      if (candidates.length === 0) return;
      const seqs = [...new Set(candidates.map(spendRequestSeqOf).filter((s): s is number => s !== undefined))];
      const requests = seqs.length > 0 ? await readRequests(q, tenant, seqs) : new Map<number, SpendRequestFacts>();
      const rows: Array<[number, string]> = [];
      for (const entry of candidates) {
        const seq = spendRequestSeqOf(entry);
        const request = seq !== undefined ? requests.get(seq) : undefined;
        const event = webhookEventOf(entry, request ? { ...context, request } : context);
        if (event) rows.push([entry.seq, JSON.stringify(event)]);
      }
      if (rows.length === 0) return;
      await q.query("INSERT INTO ledger.webhook_tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", [tenant]);
      await q.query(
        `INSERT INTO ledger.webhook_outbox (tenant_id, entry_seq, payload)
         SELECT $1, r.seq, r.body::json FROM unnest($2::bigint[], $3::text[]) AS r(seq, body)`,
        [tenant, rows.map((r) => r[0]), rows.map((r) => r[1])],
      );
    },

    async enqueueCheckpoint(q, tenant, checkpoint) {
      await q.query("INSERT INTO ledger.webhook_tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", [tenant]);
      await q.query("INSERT INTO ledger.webhook_outbox (tenant_id, kind, entry_seq, payload) VALUES ($1, 'checkpoint', $2, $3::json)", [
        tenant,
        checkpoint.size,
        JSON.stringify(checkpointEventOf(tenant, checkpoint, new Date())),
      ]);
    },

    async tenants() {
      // The one read outside a tenant: ids only, which every tenant may read (see the migration).
      const res = await db.adminTx((q) => q.query<{ tenant_id: string }>("SELECT tenant_id FROM ledger.webhook_tenants ORDER BY tenant_id"));
      return res.rows.map((r) => r.tenant_id);
    },

    async lease(tenant, limit, leaseSeconds) {
      const res = await db.tenantTx(tenant, (q) =>
        q.query<{ kind: string; entry_seq: string | number; body: string; attempts: string | number }>(LEASE, [tenant, limit, leaseSeconds]),
      );
      return res.rows.map((r) => ({ kind: kindOf(r.kind), entrySeq: toInt(r.entry_seq), body: r.body, attempts: toInt(r.attempts) })).sort(byLedgerOrder);
    },

    async delivered(tenant, key) {
      await db.tenantTx(tenant, (q) =>
        q.query(`UPDATE ledger.webhook_outbox SET attempts = attempts + 1, delivered_at = now(), lease_until = NULL, last_error = NULL WHERE ${UNSETTLED}`, [
          tenant,
          key.kind,
          key.entrySeq,
        ]),
      );
    },

    async retry(tenant, key, afterSeconds, error) {
      await db.tenantTx(tenant, (q) =>
        q.query(
          `UPDATE ledger.webhook_outbox
              SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $4), lease_until = NULL, last_error = $5
            WHERE ${UNSETTLED}`,
          [tenant, key.kind, key.entrySeq, afterSeconds, error.slice(0, 500)],
        ),
      );
    },

    async failed(tenant, key, error) {
      await db.tenantTx(tenant, (q) =>
        q.query(`UPDATE ledger.webhook_outbox SET attempts = attempts + 1, failed_at = now(), lease_until = NULL, last_error = $4 WHERE ${UNSETTLED}`, [
          tenant,
          key.kind,
          key.entrySeq,
          error.slice(0, 500),
        ]),
      );
    },

    async release(tenant, keys) {
      if (keys.length === 0) return;
      await db.tenantTx(tenant, (q) =>
        q.query(
          `UPDATE ledger.webhook_outbox SET lease_until = NULL
            WHERE tenant_id = $1 AND (kind, entry_seq) IN (SELECT * FROM unnest($2::text[], $3::bigint[]))
              AND delivered_at IS NULL AND failed_at IS NULL`,
          [tenant, keys.map((k) => k.kind), keys.map((k) => k.entrySeq)],
        ),
      );
    },

    async list(tenant) {
      const res = await db.tenantTx(tenant, (q) =>
        q.query<{
          kind: string;
          entry_seq: string | number;
          body: string;
          attempts: string | number;
          next_attempt_at: unknown;
          lease_until: unknown;
          delivered_at: unknown;
          failed_at: unknown;
          last_error: string | null;
        }>(
          `SELECT kind, entry_seq, payload::text AS body, attempts, next_attempt_at, lease_until, delivered_at, failed_at, last_error
             FROM ledger.webhook_outbox WHERE tenant_id = $1 ORDER BY entry_seq, kind DESC`,
          [tenant],
        ),
      );
      return res.rows.map((r) => ({
        kind: kindOf(r.kind),
        entrySeq: toInt(r.entry_seq),
        body: r.body,
        attempts: toInt(r.attempts),
        nextAttemptAt: toDate(r.next_attempt_at)!,
        leaseUntil: toDate(r.lease_until),
        deliveredAt: toDate(r.delivered_at),
        failedAt: toDate(r.failed_at),
        lastError: r.last_error,
      }));
    },
  };
}
