import { ChaosError, type Db, type Queryable } from "@chaos-core/kit";
import { canonicalEvent, chainEntry, type CanonicalEvent, type LedgerEntry } from "./entry.js";
import type { Integrator } from "./integrator.js";
import type { BatchWriter, Settled } from "./sequencer.js";
import { toInt } from "./store-rows.js";

/**
 * A hook runs inside the flush transaction, under the tenant's head lock, in a savepoint,
 * before its entry is written, and returns the event to record. Throwing rejects only its own
 * append (the savepoint is rolled back). Use it for state that must commit together with the
 * entry that records it (nonce consumption, daily spend totals).
 */
export type AppendHook = (tx: Queryable, ctx: { seq: number; tenant: string }) => Promise<Record<string, unknown>>;

/** What a caller appends. */
export interface AppendInput {
  session: string;
  principal: string;
  /** The event; with a hook, the hook's return value replaces it. */
  event: Record<string, unknown>;
  hook?: AppendHook;
}

/**
 * A committed (sequenced) entry. Its chain link is durable when the append resolves; the signed
 * checkpoint that covers it follows within the integration interval.
 */
export type AppendedEntry = LedgerEntry;

/**
 * Told of every batch a store writes (the webhook outbox): `inTransaction` runs in the flush
 * transaction after the entries are written, so what it writes commits or rolls back with them
 * (a throw fails the whole batch: its appends reject, nothing is written); `committed` runs once
 * the transaction has committed.
 */
export interface BatchListener {
  inTransaction(q: Queryable, tenant: string, entries: readonly LedgerEntry[]): Promise<void>;
  committed(tenant: string, entries: readonly LedgerEntry[]): void;
}

/** An append as it waits in the sequencer's queue for its batch. */
export interface QueuedAppend {
  input: AppendInput;
  /** Precomputed when there is no hook (the event is final at submit time). */
  canonical?: CanonicalEvent;
}

interface HeadRow {
  size: string | number;
  last_sig: string;
}

/**
 * What `heads.frontier` holds since migration 0004: the tree border lives in `ledger.trees`,
 * and a replica of the per-commit code refuses this as a border (fails closed) instead of
 * signing a root over a tree it did not build.
 */
const SEQUENCED_MARKER = "sequenced";

/**
 * One statement sequences a whole batch: it moves the head from the size and last sig the
 * entries were chained on, and writes the entries (`$2`, {@link entryRows}) only if it did. When
 * another replica moved the head first, nothing is written (`moved` is 0) and the batch is
 * re-chained under the lock. `ledger.sequence_rows` (migration 0005) is the same as one call.
 */
const SEQUENCE_BATCH = `
  WITH moved AS (
    UPDATE ledger.heads SET size = $3, last_sig = $4, frontier = '${SEQUENCED_MARKER}', updated_at = now()
     WHERE tenant_id = $1 AND size = $5 AND last_sig = $6
    RETURNING 1
  ), new_entries AS (
    INSERT INTO ledger.entries (tenant_id, seq, ts, session, principal, event, content_hash, prev_sig, sig)
    SELECT $1, e.seq, e.ts, e.session, e.principal, e.event, e.content_hash, e.prev_sig, e.sig
      FROM json_to_recordset($2::text::json)
           AS e(seq bigint, ts text, session text, principal text, event json, content_hash text, prev_sig text, sig text)
     WHERE EXISTS (SELECT 1 FROM moved)
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM new_entries) AS entries`;

/**
 * A batch's entries as the one JSON parameter `ledger.sequence_rows` and {@link SEQUENCE_BATCH}
 * take: an array of objects, one per entry, whose `event` is the event's canonical text spliced
 * in as is. Postgres keeps a `json` value's text byte for byte, so the stored event is exactly
 * what was hashed; a text array per column made `pg` escape every element (5 % of a 64-writer
 * load's CPU) and the event's quotes twice over.
 */
function entryRows(written: readonly LedgerEntry[], texts: readonly string[]): string {
  const q = JSON.stringify;
  let out = "[";
  for (let i = 0; i < written.length; i++) {
    const e = written[i]!;
    out +=
      `${i > 0 ? "," : ""}{"seq":${e.seq},"ts":${q(e.ts)},"session":${q(e.session)},"principal":${q(e.principal)},` +
      `"event":${texts[i]!},"content_hash":${q(e.content_hash)},"prev_sig":${q(e.prev_sig)},"sig":${q(e.sig)}}`;
  }
  return `${out}]`;
}

/** Locks the tenant's head row, creating it on the tenant's first append. */
async function lockHead(q: Queryable, tenant: string): Promise<HeadRow> {
  const select = "SELECT size, last_sig FROM ledger.heads WHERE tenant_id = $1 FOR UPDATE";
  let res = await q.query<HeadRow>(select, [tenant], { name: "ledger_lock_head" });
  if (res.rows.length === 0) {
    // Two replicas may both get here; the loser of the insert waits on the winner's row lock.
    await q.query(
      `INSERT INTO ledger.heads (tenant_id, size, last_sig, frontier) VALUES ($1, 0, '', '${SEQUENCED_MARKER}') ON CONFLICT (tenant_id) DO NOTHING`,
      [tenant],
    );
    res = await q.query<HeadRow>(select, [tenant]);
  }
  const head = res.rows[0];
  if (!head) throw new ChaosError("internal", `the ledger head of ${tenant} cannot be locked`);
  return head;
}

/** What {@link createBatchWriter} writes with, from the store it writes for. */
export interface BatchWriterOptions {
  /** The clock of entry timestamps. */
  readonly now: () => Date;
  /** Sees each batch inside its transaction and after its commit. */
  readonly batches: BatchListener | undefined;
  /** Told of every committed batch: it integrates them into the tree. */
  readonly integrator: Integrator;
}

/** The writing half of a store's group commit: what its `Sequencer` calls with each batch. */
export interface LedgerBatchWriter {
  /** Writes one batch of one tenant's appends; one outcome per append, in order. */
  readonly write: BatchWriter<QueuedAppend, AppendedEntry>;
  /**
   * The head each tenant's last batch in this process left, by tenant: a batch may be cut
   * before the one ahead of it commits only while its tenant's head is known.
   */
  readonly heads: ReadonlyMap<string, { size: number; lastSig: string }>;
}

/**
 * Sequencing, the append's path (docs/ledger.md, "Sequence, then integrate"): a batch of one
 * tenant's appends is chained on the head the batch before it will leave and written in one
 * statement that moves the head only if it is still there; otherwise, or when an append has a
 * hook, the batch is re-chained and written under the tenant's head lock, hooks run in seq
 * order, each in a savepoint. A batch resolves once it has committed and been flushed
 * (`Db.flush`); the integrator and the batch listener hear of it after.
 */
export function createBatchWriter(db: Db, options: BatchWriterOptions): LedgerBatchWriter {
  const { now, batches, integrator } = options;
  /**
   * The head each tenant's last batch in this process left: the next batch chains on it without
   * reading it first. Only a hint — the write is conditional on the head still being there.
   */
  const heads = new Map<string, { size: number; lastSig: string }>();
  /** Tenants this process has listed in `ledger.log_tenants` (for the integrators' sweep). */
  const listed = new Set<string>();

  function chainBatch(tenant: string, start: { size: number; lastSig: string }, items: readonly QueuedAppend[]) {
    let prevSig = start.lastSig;
    const written: LedgerEntry[] = [];
    const texts: string[] = [];
    for (const item of items) {
      const entry = chainEntry(prevSig, {
        seq: start.size + written.length + 1,
        ts: now().toISOString(),
        tenant,
        session: item.input.session,
        principal: item.input.principal,
        event: item.canonical!.event,
        content_hash: item.canonical!.hash,
      }, item.canonical!.text);
      prevSig = entry.sig;
      written.push(entry);
      texts.push(item.canonical!.text);
    }
    return { written, texts };
  }

  async function sequence(q: Queryable, tenant: string, start: { size: number; lastSig: string }, written: LedgerEntry[], texts: string[]): Promise<boolean> {
    const last = written[written.length - 1]!;
    const res = await q.query<{ moved: string | number; entries: string | number }>(
      SEQUENCE_BATCH,
      [tenant, entryRows(written, texts), last.seq, last.sig, start.size, start.lastSig],
      { name: "ledger_sequence_batch_rows" },
    );
    const row = res.rows[0];
    if (!row || toInt(row.moved) === 0) return false;
    if (toInt(row.entries) !== written.length) throw new ChaosError("internal", `the ledger head of ${tenant} moved but its entries were not written`);
    return true;
  }

  async function sequenceAlone(tenant: string, start: { size: number; lastSig: string }, written: LedgerEntry[], texts: string[]): Promise<boolean> {
    const res = await db.statement<{ n: string | number }>(
      "SELECT ledger.sequence_rows($1, $2, $3, $4) AS n",
      [tenant, entryRows(written, texts), start.size, start.lastSig],
      { name: "ledger_sequence_rows" },
    );
    const n = res.rows[0] ? toInt(res.rows[0].n) : 0;
    if (n !== 0 && n !== written.length) throw new ChaosError("internal", `the ledger head of ${tenant} moved but its entries were not written`);
    return n === written.length;
  }

  function writeBatch(tenant: string, items: QueuedAppend[]): Promise<Settled<AppendedEntry>[]> {
    // Chained now, synchronously, on the head the previous batch will leave (it may still be
    // in flight): the next batch can be cut and sent before this one commits. The write is
    // conditional on that head, so if the previous batch fails, or another replica appends
    // first, this one writes nothing and is re-chained under the head lock.
    const projected = heads.get(tenant);
    const fast = projected && items.every((i) => i.canonical) ? chainBatch(tenant, projected, items) : undefined;
    if (fast) {
      const last = fast.written[fast.written.length - 1]!;
      heads.set(tenant, { size: last.seq, lastSig: last.sig });
    } else {
      heads.delete(tenant);
    }
    return writeChained(tenant, items, projected, fast);
  }

  async function writeChained(
    tenant: string,
    items: QueuedAppend[],
    projected: { size: number; lastSig: string } | undefined,
    fast: { written: LedgerEntry[]; texts: string[] } | undefined,
  ): Promise<Settled<AppendedEntry>[]> {
    let committed: readonly LedgerEntry[] = [];
    let newHead: { size: number; lastSig: string } | undefined;
    try {
      // One round trip when nothing else must share the transaction: the statement is its own
      // transaction, committed when it answers. If the head moved, it wrote nothing.
      if (fast && !batches && (await sequenceAlone(tenant, projected!, fast.written, fast.texts))) {
        committed = fast.written;
        listed.add(tenant);
        // Durable before any append resolves (on PGlite the commit alone is not: Db.flush).
        await db.flush();
        return fast.written.map((value): Settled<AppendedEntry> => ({ ok: true, value }));
      }
      const outcomes = await db.tenantTx(tenant, async (q) => {
        if (fast && batches && (await sequence(q, tenant, projected!, fast.written, fast.texts))) {
          await batches?.inTransaction(q, tenant, fast.written);
          committed = fast.written;
          return fast.written.map((value): Settled<AppendedEntry> => ({ ok: true, value }));
        }
        // Under the head lock: hooks run here, in seq order, each in a savepoint.
        const head = await lockHead(q, tenant);
        if (!listed.has(tenant)) {
          await q.query("INSERT INTO ledger.log_tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", [tenant]);
        }
        const start = { size: toInt(head.size), lastSig: head.last_sig };
        const outcomes: Array<Settled<AppendedEntry> | undefined> = [];
        const kept: QueuedAppend[] = [];
        for (const item of items) {
          if (!item.input.hook) {
            kept.push(item);
            outcomes.push(undefined);
            continue;
          }
          await q.query("SAVEPOINT ledger_append_hook");
          try {
            const canonical = canonicalEvent(await item.input.hook(q, { seq: start.size + kept.length + 1, tenant }));
            await q.query("RELEASE SAVEPOINT ledger_append_hook");
            kept.push({ input: item.input, canonical });
            outcomes.push(undefined);
          } catch (error) {
            // If even the rollback fails the transaction is unusable: let it fail the batch.
            await q.query("ROLLBACK TO SAVEPOINT ledger_append_hook");
            outcomes.push({ ok: false, error });
          }
        }
        if (kept.length === 0) {
          newHead = start;
          return outcomes.map((o) => o!);
        }
        const { written, texts } = chainBatch(tenant, start, kept);
        if (!(await sequence(q, tenant, start, written, texts))) {
          throw new ChaosError("internal", `the ledger head of ${tenant} moved under its lock`);
        }
        await batches?.inTransaction(q, tenant, written);
        committed = written;
        newHead = { size: written[written.length - 1]!.seq, lastSig: written[written.length - 1]!.sig };
        let next = 0;
        return outcomes.map((o): Settled<AppendedEntry> => o ?? { ok: true, value: written[next++]! });
      });
      listed.add(tenant);
      // A batch that went the slow way knows the true head; batches cut after it was sent
      // were chained on nothing (the lane waited), so this is the newest head there is.
      if (newHead) heads.set(tenant, newHead);
      else if (!fast || committed !== fast.written) heads.delete(tenant);
      if (committed.length > 0) await db.flush();
      return outcomes;
    } catch (err) {
      // Whatever was chained on this batch's head is void: the next batch reads the head.
      heads.delete(tenant);
      throw err;
    } finally {
      if (committed.length > 0) {
        integrator.notify(tenant, committed.length);
        batches?.committed(tenant, committed);
      }
    }
  }

  return { write: writeBatch, heads };
}
