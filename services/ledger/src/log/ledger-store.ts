import type { KeyObject } from "node:crypto";
import { ChaosError, assertTenantId, type Db, type Queryable } from "@chaos-core/kit";
import { signCheckpoint, verifierKey, type NoteSigner } from "./checkpoint.js";
import {
  assertLedgerText,
  canonicalEvent,
  chainEntry,
  checkpointLine,
  entryLine,
  headerLine,
  parseEvent,
  type CanonicalEvent,
  type LedgerEntry,
} from "./entry.js";
import { Integrator, type IntegratorOptions, type IntegratorStats } from "./integrator.js";
import { assembleProof, consistencyProofPlan, foldRange, inclusionProofPlan, planNodes, rangeNodes } from "./merkle.js";
import { Sequencer, type SequencerStats, type Settled } from "./sequencer.js";
import { nodeGetter, readNodes, toInt } from "./store-rows.js";
import { verifyChainSegment } from "./verify.js";

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

/** The signing key of the log (from the keyring; there is no default key). */
export interface LedgerSigningKey {
  /**
   * Key name and checkpoint origin; `{tenant}` is replaced by the tenant id, so each tenant's
   * log has its own origin (default `chaos-core/{tenant}`). No spaces or `+`.
   */
  name?: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

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

/** Options of {@link createLedgerStore}. */
export interface LedgerStoreOptions {
  key: LedgerSigningKey;
  /** Sees each batch inside its transaction and after its commit. */
  batches?: BatchListener;
  /** At most this many appends per transaction (default 1000). */
  maxBatch?: number;
  /**
   * At most this many group-commit transactions of one tenant in flight at once (default 4 on
   * Postgres, 1 on PGlite): each is chained on the head the one before it will leave and written
   * only if that head is there, so they commit in order, and a failed one voids the ones after it
   * (re-chained). PGlite runs one statement at a time and each batch waits for its WAL flush, so
   * a second batch in flight only queues there; waiting instead makes the next batch larger —
   * fewer statements and fewer fdatasyncs per append (1.1–1.2× governed calls/s at 16 clients,
   * BENCHMARKS.md).
   */
  pipelineDepth?: number;
  /** The clock of entry timestamps; tests pin it. */
  now?: () => Date;
  /**
   * How the integrator batches (see {@link IntegratorOptions}); `autoStart: false` leaves its
   * periodic sweep off (marked tenants are still integrated), for tests that want no
   * background reads of other tenants.
   */
  integration?: IntegratorOptions & { autoStart?: boolean };
}

/** A signed checkpoint as stored. */
export interface StoredCheckpoint {
  size: number;
  /** Root hash, lowercase hex. */
  root: string;
  /** The signed note (C2SP tlog-checkpoint). */
  note: string;
}

/** An inclusion proof of one entry in the tree of `treeSize` entries. */
export interface InclusionProof {
  seq: number;
  /** Leaf index: `seq - 1`. */
  index: number;
  treeSize: number;
  /** SHA-256(0x00 || sig bytes), hex. */
  leafHash: string;
  /** Hex hashes, innermost first (RFC 6962 order). */
  proof: string[];
  /** The signed checkpoint at `treeSize`. */
  checkpoint: StoredCheckpoint;
}

/** A consistency proof between two checkpoints of one log. */
export interface ConsistencyProof {
  from: number;
  to: number;
  proof: string[];
  /**
   * The root of the tree of `from` entries, hex: the signed one when a checkpoint was signed at
   * `from` (`fromCheckpoint`), else computed from the stored tree — checkpoints are signed per
   * integration batch, not per size, so a client checks it against the root it already holds.
   */
  fromRoot: string;
  fromCheckpoint: StoredCheckpoint | null;
  toCheckpoint: StoredCheckpoint;
}

/** The health of the newest part of a chain (for an inspect tool; no key needed). */
export interface ChainStatus {
  ok: boolean;
  /** Entries in the log. */
  size: number;
  /** How many of the newest entries were re-hashed. */
  checked: number;
  /** The first entry that does not re-hash, and what failed. */
  firstBad?: { seq: number; check: string; message: string };
  /** The newest checkpoint, and whether its root is the root of the stored Merkle nodes. */
  checkpoint: { size: number; root: string; rootMatchesTree: boolean } | null;
}

/** A record of a ledger read for export or verification. */
export type LedgerRecord =
  | { type: "entry"; entry: LedgerEntry; eventText: string }
  | { type: "checkpoint"; checkpoint: StoredCheckpoint };

/** The read side of the audit log: needs no signing key (operator tools, `verify`, `export`). */
export interface LedgerReader {
  /** Entries with `seq > afterSeq`, oldest first, at most `limit` (default 100, at most 1000). */
  list(tenant: string, options?: { afterSeq?: number; limit?: number }): Promise<LedgerEntry[]>;
  /** The newest signed checkpoint, or null for an empty log. */
  latestCheckpoint(tenant: string): Promise<StoredCheckpoint | null>;
  /** The checkpoint at exactly `size`, or null. */
  checkpointAt(tenant: string, size: number): Promise<StoredCheckpoint | null>;
  /** Proof that entry `seq` (or leaf `index`) is in the tree of `treeSize` (default: newest). */
  inclusionProof(tenant: string, at: { seq: number } | { index: number }, treeSize?: number): Promise<InclusionProof>;
  /** Proof that the tree of `from` entries is a prefix of the tree of `to` (default: newest). */
  consistencyProof(tenant: string, from: number, to?: number): Promise<ConsistencyProof>;
  /** Entries in the log (sequenced, integrated or not). */
  size(tenant: string): Promise<number>;
  /**
   * Entries and checkpoints up to one committed size, in seq order (checkpoint after its last
   * entry). The size is the larger of the newest entry and the newest checkpoint (`bound:
   * "entries"`, the default: entries not yet integrated are read too, and a verifier reports
   * them), or the newest checkpoint's (`"checkpoint"`).
   */
  readLedger(tenant: string, options?: { pageSize?: number; bound?: ReadBound }): AsyncIterable<LedgerRecord>;
  /** The JSONL export: a header line, then entries and checkpoints as {@link readLedger} orders them. */
  exportLedger(tenant: string, options?: { bound?: ReadBound }): AsyncIterable<string>;
  /** Re-hashes the newest `last` entries (default 1000) and checks the newest checkpoint against the stored tree. */
  chainStatus(tenant: string, options?: { last?: number }): Promise<ChainStatus>;
  /** The checkpoint origin (and key name) of a tenant's log. */
  origin(tenant: string): string;
}

/** Where {@link LedgerReader.readLedger} stops. */
export type ReadBound = "entries" | "checkpoint";

/**
 * The per-tenant audit log on Postgres (or PGlite): append, read, prove, export. Unlike the
 * reader, its `readLedger` and `exportLedger` first integrate what is sequenced and stop at the
 * checkpoint that covers it, and `inclusionProof` of a sequenced entry waits up to
 * {@link PROOF_WAIT_MS} for its integration before answering `unavailable`.
 */
export interface LedgerStore extends LedgerReader {
  /** Appends one entry; resolves only after the transaction holding it (entry and chain link) has committed. */
  append(tenant: string, input: AppendInput): Promise<AppendedEntry>;
  /** Integrates every entry sequenced so far into the tree and a signed checkpoint. */
  integrate(tenant: string): Promise<void>;
  /** Integrator counters. */
  integrationStats(): IntegratorStats;
  /** Waits for appends and their integration, then stops the integrator's timers. */
  close(): Promise<void>;
  /** The verifier key (`name+hash+key`) for a tenant's checkpoints. */
  verifierKey(tenant: string): string;
  /** Group-commit counters: `batches` counts transactions. */
  stats(): SequencerStats;
  /** Resolves when every append submitted so far has settled and been integrated (or its pass failed). */
  drain(): Promise<void>;
}

interface QueuedAppend {
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

interface EntryRow {
  seq: string | number;
  ts: string;
  tenant_id: string;
  session: string;
  principal: string;
  event_text: string;
  content_hash: string;
  prev_sig: string;
  sig: string;
}

interface CheckpointRow {
  size: string | number;
  root: string;
  note: string;
}

const ENTRY_COLUMNS = "seq, ts, tenant_id, session, principal, event::text AS event_text, content_hash, prev_sig, sig";
const CHECKPOINT_COLUMNS = "size, encode(root, 'hex') AS root, note";

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

function toEntry(row: EntryRow): LedgerEntry {
  return {
    seq: toInt(row.seq),
    ts: row.ts,
    tenant: row.tenant_id,
    session: row.session,
    principal: row.principal,
    event: parseEvent(row.event_text),
    content_hash: row.content_hash,
    prev_sig: row.prev_sig,
    sig: row.sig,
  };
}

function toCheckpoint(row: CheckpointRow): StoredCheckpoint {
  return { size: toInt(row.size), root: row.root, note: row.note };
}

function assertNonNegative(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new ChaosError("invalid_argument", `${what} must be a non-negative integer`);
}

/** Locks the tenant's head row, creating it on the tenant's first append. */
async function lockHead(q: Queryable, tenant: string): Promise<HeadRow> {
  const select = "SELECT size, last_sig FROM ledger.heads WHERE tenant_id = $1 FOR UPDATE";
  let res = await q.query<HeadRow>(select, [tenant], { name: "ledger_lock_head" });
  if (res.rows.length === 0) {
    // Two replicas may both get here; the loser of the insert waits on the winner's row lock.
    await q.query(
      "INSERT INTO ledger.heads (tenant_id, size, last_sig, frontier) VALUES ($1, 0, '', '${SEQUENCED_MARKER}') ON CONFLICT (tenant_id) DO NOTHING",
      [tenant],
    );
    res = await q.query<HeadRow>(select, [tenant]);
  }
  const head = res.rows[0];
  if (!head) throw new ChaosError("internal", `the ledger head of ${tenant} cannot be locked`);
  return head;
}

async function checkpointAt(q: Queryable, tenant: string, size: number): Promise<StoredCheckpoint | null> {
  const res = await q.query<CheckpointRow>(`SELECT ${CHECKPOINT_COLUMNS} FROM ledger.checkpoints WHERE tenant_id = $1 AND size = $2`, [tenant, size]);
  return res.rows[0] ? toCheckpoint(res.rows[0]) : null;
}

async function latestCheckpoint(q: Queryable, tenant: string): Promise<StoredCheckpoint | null> {
  const res = await q.query<CheckpointRow>(
    `SELECT ${CHECKPOINT_COLUMNS} FROM ledger.checkpoints WHERE tenant_id = $1 ORDER BY size DESC LIMIT 1`,
    [tenant],
  );
  return res.rows[0] ? toCheckpoint(res.rows[0]) : null;
}

/** Options of {@link createLedgerReader}. */
export interface LedgerReaderOptions {
  /** The key name / origin template of the store that wrote the log (default `chaos-core/{tenant}`). */
  name?: string;
}

/**
 * The read side of the ledger over a {@link Db} already migrated with `migrateLedger`: reads,
 * proofs, export and chain status, as the application role under row-level security.
 */
export function createLedgerReader(db: Db, options: LedgerReaderOptions = {}): LedgerReader {
  const nameTemplate = options.name ?? "chaos-core/{tenant}";
  const originOf = (tenant: string): string => nameTemplate.replaceAll("{tenant}", tenant);

  async function readCommittedSize(q: Queryable, tenant: string): Promise<number> {
    const cp = await latestCheckpoint(q, tenant);
    return cp?.size ?? 0;
  }

  const reader: LedgerReader = {
    async list(tenant, opts = {}) {
      const afterSeq = opts.afterSeq ?? 0;
      const limit = Math.min(opts.limit ?? 100, 1000);
      assertNonNegative(afterSeq, "afterSeq");
      if (!Number.isSafeInteger(limit) || limit < 1) throw new ChaosError("invalid_argument", "limit must be a positive integer");
      const res = await db.tenantTx(tenant, (q) =>
        q.query<EntryRow>(`SELECT ${ENTRY_COLUMNS} FROM ledger.entries WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [
          tenant,
          afterSeq,
          limit,
        ]),
      );
      return res.rows.map(toEntry);
    },

    latestCheckpoint(tenant) {
      return db.tenantTx(tenant, (q) => latestCheckpoint(q, tenant));
    },

    size(tenant) {
      return db.tenantTx(tenant, async (q) => {
        const res = await q.query<{ size: string | number }>("SELECT size FROM ledger.heads WHERE tenant_id = $1", [tenant]);
        return res.rows[0] ? toInt(res.rows[0].size) : 0;
      });
    },

    checkpointAt(tenant, size) {
      assertNonNegative(size, "size");
      return db.tenantTx(tenant, (q) => checkpointAt(q, tenant, size));
    },

    async inclusionProof(tenant, at, treeSize) {
      const index = "seq" in at ? at.seq - 1 : at.index;
      assertNonNegative(index, "the leaf index");
      return db.tenantTx(tenant, async (q) => {
        const size = treeSize ?? (await readCommittedSize(q, tenant));
        if (index >= size) throw new ChaosError("not_found", `entry ${index + 1} is not in a tree of ${size} entries`);
        const checkpoint = await checkpointAt(q, tenant, size);
        if (!checkpoint) throw new ChaosError("not_found", `no signed checkpoint at tree size ${size}`);
        const plan = inclusionProofPlan(index, size);
        const leaf = { level: 0, index };
        const map = await readNodes(q, tenant, [...planNodes(plan), leaf]);
        const get = nodeGetter(map, tenant);
        return {
          seq: index + 1,
          index,
          treeSize: size,
          leafHash: get(leaf).toString("hex"),
          proof: assembleProof(plan, get).map((h) => h.toString("hex")),
          checkpoint,
        };
      });
    },

    async consistencyProof(tenant, from, to) {
      assertNonNegative(from, "from");
      return db.tenantTx(tenant, async (q) => {
        const size = to ?? (await readCommittedSize(q, tenant));
        if (from > size) throw new ChaosError("invalid_argument", `size ${from} is larger than ${size}`);
        const toCheckpoint = await checkpointAt(q, tenant, size);
        if (!toCheckpoint) throw new ChaosError("not_found", `no signed checkpoint at tree size ${size}`);
        const fromCheckpoint = from === 0 ? null : await checkpointAt(q, tenant, from);
        const plan = consistencyProofPlan(from, size);
        const prefix = rangeNodes(0, from);
        const get = nodeGetter(await readNodes(q, tenant, [...planNodes(plan), ...(fromCheckpoint ? [] : prefix)]), tenant);
        return {
          from,
          to: size,
          proof: assembleProof(plan, get).map((h) => h.toString("hex")),
          fromRoot: fromCheckpoint ? fromCheckpoint.root : foldRange(prefix.map(get)).toString("hex"),
          fromCheckpoint,
          toCheckpoint,
        };
      });
    },

    async *readLedger(tenant, opts = {}) {
      const pageSize = opts.pageSize ?? 2000;
      const onlySigned = opts.bound === "checkpoint";
      // One snapshot fixes the bound. By entries: the larger of the newest entry and the
      // newest checkpoint, so entries not yet integrated are read (a verifier reports them) and
      // a checkpoint beyond the entries (entries lost at the tail) stays visible. By checkpoint:
      // the newest checkpoint, whose entries must all be there.
      const bound = await db.tenantTx(tenant, async (q) => {
        const res = await q.query<{ max_seq: string | number | null; max_size: string | number | null }>(
          `SELECT (SELECT max(seq) FROM ledger.entries WHERE tenant_id = $1) AS max_seq,
                  (SELECT max(size) FROM ledger.checkpoints WHERE tenant_id = $1) AS max_size`,
          [tenant],
        );
        const r = res.rows[0];
        const signed = toInt(r?.max_size ?? 0);
        return onlySigned ? signed : Math.max(toInt(r?.max_seq ?? 0), signed);
      });
      const checkpoints = await db.tenantTx(tenant, async (q) => {
        const res = await q.query<CheckpointRow>(
          `SELECT ${CHECKPOINT_COLUMNS} FROM ledger.checkpoints WHERE tenant_id = $1 AND size <= $2 ORDER BY size`,
          [tenant, bound],
        );
        return res.rows.map(toCheckpoint);
      });
      let c = 0;
      while (c < checkpoints.length && checkpoints[c]!.size === 0) yield { type: "checkpoint", checkpoint: checkpoints[c++]! };
      let after = 0;
      for (;;) {
        const rows = await db.tenantTx(tenant, async (q) =>
          (
            await q.query<EntryRow>(
              `SELECT ${ENTRY_COLUMNS} FROM ledger.entries WHERE tenant_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4`,
              [tenant, after, bound, pageSize],
            )
          ).rows,
        );
        for (const row of rows) {
          const entry = toEntry(row);
          yield { type: "entry", entry, eventText: row.event_text };
          while (c < checkpoints.length && checkpoints[c]!.size <= entry.seq) yield { type: "checkpoint", checkpoint: checkpoints[c++]! };
          after = entry.seq;
        }
        if (rows.length < pageSize) break;
      }
      // Checkpoints beyond the last entry (entries missing at the tail) still go out: a
      // verifier must see them to notice the loss.
      while (c < checkpoints.length) yield { type: "checkpoint", checkpoint: checkpoints[c++]! };
    },

    async *exportLedger(tenant, opts = {}) {
      assertTenantId(tenant);
      // The origin the log actually signs, which a reader without the writer's configuration
      // (the CLI) cannot know otherwise; verify checks it against the signatures anyway.
      const latest = await reader.latestCheckpoint(tenant);
      yield headerLine(tenant, latest ? latest.note.slice(0, latest.note.indexOf("\n")) : originOf(tenant));
      for await (const r of reader.readLedger(tenant, opts.bound ? { bound: opts.bound } : {})) {
        yield r.type === "entry" ? entryLine(r.entry, r.eventText) : checkpointLine(r.checkpoint.size, r.checkpoint.note);
      }
    },

    async chainStatus(tenant, opts = {}) {
      const last = opts.last ?? 1000;
      if (!Number.isSafeInteger(last) || last < 1) throw new ChaosError("invalid_argument", "last must be a positive integer");
      return db.tenantTx(tenant, async (q) => {
        const checkpoint = await latestCheckpoint(q, tenant);
        // The chain is checked up to the newest entry, integrated or not.
        const head = await q.query<{ size: string | number }>("SELECT size FROM ledger.heads WHERE tenant_id = $1", [tenant]);
        const size = Math.max(checkpoint?.size ?? 0, head.rows[0] ? toInt(head.rows[0].size) : 0);
        const firstChecked = Math.max(1, size - last + 1);
        // One entry before the checked ones supplies the first link's prev_sig.
        const rows = (
          await q.query<EntryRow>(
            `SELECT ${ENTRY_COLUMNS} FROM ledger.entries WHERE tenant_id = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq`,
            [tenant, Math.max(1, firstChecked - 1), size],
          )
        ).rows.map(toEntry);
        const link = firstChecked > 1 ? rows.shift() : undefined;
        const firstBad = verifyChainSegment(rows, {
          firstSeq: firstChecked,
          lastSeq: size,
          prevSig: firstChecked === 1 ? "" : (link?.seq === firstChecked - 1 ? link.sig : undefined),
          tenant,
        });
        let cpStatus: ChainStatus["checkpoint"] = null;
        if (checkpoint) {
          const ids = rangeNodes(0, checkpoint.size);
          const map = await readNodes(q, tenant, ids);
          const complete = ids.every((id) => map.has(`${id.level}:${id.index}`));
          const treeRoot = complete ? foldRange(ids.map(nodeGetter(map, tenant))).toString("hex") : undefined;
          cpStatus = { size: checkpoint.size, root: checkpoint.root, rootMatchesTree: treeRoot === checkpoint.root };
        }
        const checked = size - firstChecked + 1;
        const ok = firstBad === undefined && (cpStatus === null || cpStatus.rootMatchesTree);
        return firstBad ? { ok, size, checked, firstBad, checkpoint: cpStatus } : { ok, size, checked, checkpoint: cpStatus };
      });
    },

    origin: originOf,
  };
  return reader;
}

/** How long a proof of a sequenced entry waits for its integration before saying so. */
export const PROOF_WAIT_MS = 250;

/**
 * The ledger store over a {@link Db} already migrated with `migrateLedger`: sequence, then
 * integrate (docs/ledger.md §2). An append group-commits its entry and chain link (one
 * transaction per flush and tenant in this process; the head row serialises replicas) and
 * resolves once that has committed; an {@link Integrator} adds the Merkle nodes and a signed
 * checkpoint in batches shortly after. Every query runs through `tenantTx`, as the application
 * role under row-level security.
 */
export function createLedgerStore(db: Db, options: LedgerStoreOptions): LedgerStore {
  const now = options.now ?? (() => new Date());
  const nameTemplate = options.key.name ?? "chaos-core/{tenant}";
  const originOf = (tenant: string): string => nameTemplate.replaceAll("{tenant}", tenant);
  const signerOf = (tenant: string): NoteSigner => ({
    name: originOf(tenant),
    privateKey: options.key.privateKey,
    publicKey: options.key.publicKey,
  });
  // Fail at construction, not at the first commit, on a key name the note format refuses.
  verifierKey(originOf("t"), options.key.publicKey);
  signCheckpoint({ origin: originOf("t"), size: 0, root: foldRange([]) }, signerOf("t"));

  const integrator = new Integrator(db, (tenant, size, root) => signCheckpoint({ origin: originOf(tenant), size, root }, signerOf(tenant)), options.integration);
  const reader = createLedgerReader(db, { name: nameTemplate });
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
      if (fast && !options.batches && (await sequenceAlone(tenant, projected!, fast.written, fast.texts))) {
        committed = fast.written;
        listed.add(tenant);
        // Durable before any append resolves (on PGlite the commit alone is not: Db.flush).
        await db.flush();
        return fast.written.map((value): Settled<AppendedEntry> => ({ ok: true, value }));
      }
      const outcomes = await db.tenantTx(tenant, async (q) => {
        if (fast && options.batches && (await sequence(q, tenant, projected!, fast.written, fast.texts))) {
          await options.batches?.inTransaction(q, tenant, fast.written);
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
        await options.batches?.inTransaction(q, tenant, written);
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
        options.batches?.committed(tenant, committed);
      }
    }
  }

  const sequencer = new Sequencer<QueuedAppend, AppendedEntry>(writeBatch, {
    maxBatch: options.maxBatch ?? 1000,
    depth: options.pipelineDepth ?? (db.kind === "pglite" ? 1 : 4),
    // A batch can be chained before the one ahead of it commits when the head it will leave is
    // known and nothing in it runs a hook (hooks read state under the head lock).
    overlaps: (tenant, item) => item.canonical !== undefined && heads.has(tenant),
  });
  if (options.integration?.autoStart !== false) integrator.start();

  /** Integrates `tenant` fully (for an export or a verification that should cover everything). */
  async function integrateAll(tenant: string): Promise<void> {
    if ((await integrator.catchUp(tenant, 30_000)) === undefined) {
      throw new ChaosError("unavailable", `another integrator held the ledger tree of ${tenant} for 30 s`);
    }
  }

  /**
   * Read your writes: before "the newest checkpoint" is answered, entries sequenced before the
   * request are integrated (waiting at most {@link PROOF_WAIT_MS} for another integrator). If
   * that cannot be done in time, the newest checkpoint there is still is the truthful answer.
   */
  async function freshen(tenant: string): Promise<void> {
    const [cp, size] = await Promise.all([reader.latestCheckpoint(tenant), reader.size(tenant)]);
    if (size > (cp?.size ?? 0)) await integrator.catchUp(tenant, PROOF_WAIT_MS).catch(() => undefined);
  }

  /**
   * Integrates before a read of the whole log, which then stops at the checkpoint covering it.
   * An integrator refuses a log whose sequenced tail is damaged (a gap, a broken link); then
   * every entry is read, so a verifier names the first bad one instead of the read failing.
   */
  async function boundAfterIntegrating(tenant: string): Promise<ReadBound> {
    try {
      await integrateAll(tenant);
      return "checkpoint";
    } catch (err) {
      if (ChaosError.from(err).code === "internal") return "entries";
      throw err;
    }
  }

  const store: LedgerStore = {
    ...reader,

    append(tenant, input) {
      try {
        assertTenantId(tenant);
        assertLedgerText(input.session, "session");
        assertLedgerText(input.principal, "principal");
        if (input.principal === "") throw new ChaosError("invalid_argument", "principal must not be empty");
        if (input.hook !== undefined && typeof input.hook !== "function") throw new ChaosError("invalid_argument", "hook must be a function");
        // Without a hook the event is final now: refuse a bad one before it joins a batch.
        const queued: QueuedAppend = input.hook ? { input } : { input, canonical: canonicalEvent(input.event) };
        return sequencer.submit(tenant, queued);
      } catch (err) {
        return Promise.reject(err);
      }
    },

    async latestCheckpoint(tenant) {
      await freshen(tenant);
      return reader.latestCheckpoint(tenant);
    },

    async consistencyProof(tenant, from, to) {
      if (to === undefined) await freshen(tenant);
      return reader.consistencyProof(tenant, from, to);
    },

    async inclusionProof(tenant, at, treeSize) {
      if (treeSize === undefined) {
        const index = "seq" in at ? at.seq - 1 : at.index;
        assertNonNegative(index, "the leaf index");
        const cp = await reader.latestCheckpoint(tenant);
        if (index >= (cp?.size ?? 0) && index < (await reader.size(tenant))) {
          // Sequenced, not yet integrated: integrate now rather than make the caller poll.
          const size = await integrator.catchUp(tenant, PROOF_WAIT_MS);
          if (size === undefined || index >= size) {
            throw new ChaosError("unavailable", `entry ${index + 1} is sequenced (its chain link is durable) but not yet integrated into a signed checkpoint; retry shortly`);
          }
          return reader.inclusionProof(tenant, at, size);
        }
      }
      return reader.inclusionProof(tenant, at, treeSize);
    },

    async *readLedger(tenant, opts = {}) {
      assertTenantId(tenant);
      // Everything appended before this call is integrated and signed first, so what is read
      // (up to the newest checkpoint) covers it; later appends are simply after the snapshot.
      yield* reader.readLedger(tenant, { ...opts, bound: await boundAfterIntegrating(tenant) });
    },

    async *exportLedger(tenant) {
      assertTenantId(tenant);
      yield* reader.exportLedger(tenant, { bound: await boundAfterIntegrating(tenant) });
    },

    verifierKey(tenant) {
      return verifierKey(originOf(tenant), options.key.publicKey);
    },

    integrate: integrateAll,
    stats: () => sequencer.stats(),
    integrationStats: () => integrator.stats(),
    async drain() {
      await sequencer.idle();
      await integrator.idle();
    },
    async close() {
      await sequencer.idle();
      await integrator.idle();
      await integrator.stop();
    },
  };
  return store;
}
