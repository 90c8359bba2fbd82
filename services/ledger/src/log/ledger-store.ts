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
  leafData,
  parseEvent,
  type CanonicalEvent,
  type LedgerEntry,
} from "./entry.js";
import {
  TreeFrontier,
  assembleProof,
  consistencyProofPlan,
  foldRange,
  hashLeaf,
  inclusionProofPlan,
  planNodes,
  rangeNodes,
  type NodeId,
} from "./merkle.js";
import { Sequencer, type SequencerStats, type Settled } from "./sequencer.js";
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

/** A committed entry and the size of the signed checkpoint that covers it. */
export interface AppendedEntry extends LedgerEntry {
  treeSize: number;
}

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
  /** The clock of entry timestamps; tests pin it. */
  now?: () => Date;
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
  /** Entries and checkpoints up to one committed size, in seq order (checkpoint after its last entry). */
  readLedger(tenant: string, options?: { pageSize?: number }): AsyncIterable<LedgerRecord>;
  /** The JSONL export: a header line, then entries and checkpoints as {@link readLedger} orders them. */
  exportLedger(tenant: string): AsyncIterable<string>;
  /** Re-hashes the newest `last` entries (default 1000) and checks the newest checkpoint against the stored tree. */
  chainStatus(tenant: string, options?: { last?: number }): Promise<ChainStatus>;
  /** The checkpoint origin (and key name) of a tenant's log. */
  origin(tenant: string): string;
}

/** The per-tenant audit log on Postgres (or PGlite): append, read, prove, export. */
export interface LedgerStore extends LedgerReader {
  /** Appends one entry; resolves only after the transaction holding it has committed. */
  append(tenant: string, input: AppendInput): Promise<AppendedEntry>;
  /** The verifier key (`name+hash+key`) for a tenant's checkpoints. */
  verifierKey(tenant: string): string;
  /** Group-commit counters: `batches` counts transactions. */
  stats(): SequencerStats;
  /** Resolves when every append submitted so far has settled. */
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
  frontier: string;
}

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

/** One statement writes a whole batch: entries, new nodes, the checkpoint, and moves the head. */
const WRITE_BATCH = `
  WITH new_entries AS (
    INSERT INTO ledger.entries (tenant_id, seq, ts, session, principal, event, content_hash, prev_sig, sig)
    SELECT $1, e.seq, e.ts, e.session, e.principal, e.event::json, e.content_hash, e.prev_sig, e.sig
      FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
           AS e(seq, ts, session, principal, event, content_hash, prev_sig, sig)
    RETURNING 1
  ), new_nodes AS (
    INSERT INTO ledger.nodes (tenant_id, level, idx, hash)
    SELECT $1, n.level, n.idx, decode(n.hash, 'hex')
      FROM unnest($10::smallint[], $11::bigint[], $12::text[]) AS n(level, idx, hash)
    RETURNING 1
  ), new_checkpoint AS (
    INSERT INTO ledger.checkpoints (tenant_id, size, root, note) VALUES ($1, $13, decode($14, 'hex'), $15)
    RETURNING 1
  )
  UPDATE ledger.heads SET size = $13, last_sig = $16, frontier = $17, updated_at = now()
   WHERE tenant_id = $1 AND size = $18
  RETURNING (SELECT count(*) FROM new_entries) AS entries, (SELECT count(*) FROM new_checkpoint) AS checkpoints`;

/** pg returns int8 as text, PGlite as number or bigint. */
function toInt(v: unknown): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new ChaosError("internal", `not a safe integer: ${String(v)}`);
  return n;
}

function splitFrontier(hex: string): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < hex.length; i += 64) out.push(Buffer.from(hex.slice(i, i + 64), "hex"));
  return out;
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
  const select = "SELECT size, last_sig, frontier FROM ledger.heads WHERE tenant_id = $1 FOR UPDATE";
  let res = await q.query<HeadRow>(select, [tenant]);
  if (res.rows.length === 0) {
    // Two replicas may both get here; the loser of the insert waits on the winner's row lock.
    await q.query(
      "INSERT INTO ledger.heads (tenant_id, size, last_sig, frontier) VALUES ($1, 0, '', '') ON CONFLICT (tenant_id) DO NOTHING",
      [tenant],
    );
    res = await q.query<HeadRow>(select, [tenant]);
  }
  const head = res.rows[0];
  if (!head) throw new ChaosError("internal", `the ledger head of ${tenant} cannot be locked`);
  return head;
}

async function readNodes(q: Queryable, tenant: string, ids: NodeId[]): Promise<Map<string, Buffer>> {
  const map = new Map<string, Buffer>();
  if (ids.length === 0) return map;
  const inner = ids.filter((i) => i.level > 0);
  // Leaves are not stored as nodes: their hash comes from the entry's sig.
  const leaves = ids.filter((i) => i.level === 0).map((i) => i.index + 1);
  const res = await q.query<{ level: number; idx: string | number; hash: string }>(
    `SELECT level, idx, encode(hash, 'hex') AS hash FROM ledger.nodes
      WHERE tenant_id = $1 AND (level, idx) IN (SELECT * FROM unnest($2::smallint[], $3::bigint[]))
     UNION ALL
     SELECT 0::smallint, seq - 1, sig FROM ledger.entries WHERE tenant_id = $1 AND seq = ANY($4::bigint[])`,
    [tenant, inner.map((i) => i.level), inner.map((i) => i.index), leaves],
  );
  for (const r of res.rows) {
    const hash = r.level === 0 ? hashLeaf(leafData(r.hash)) : Buffer.from(r.hash, "hex");
    map.set(`${r.level}:${toInt(r.idx)}`, hash);
  }
  return map;
}

function nodeGetter(map: Map<string, Buffer>, tenant: string): (id: NodeId) => Buffer {
  return (id) => {
    const h = map.get(`${id.level}:${id.index}`);
    // A missing node means the tree tables were tampered with or lost: fail, never guess.
    if (!h) throw new ChaosError("internal", `ledger node ${id.level}:${id.index} of ${tenant} is missing`);
    return h;
  };
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
        const map = await readNodes(q, tenant, planNodes(plan));
        return {
          from,
          to: size,
          proof: assembleProof(plan, nodeGetter(map, tenant)).map((h) => h.toString("hex")),
          fromCheckpoint,
          toCheckpoint,
        };
      });
    },

    async *readLedger(tenant, opts = {}) {
      const pageSize = opts.pageSize ?? 2000;
      // One snapshot fixes the bound: every commit writes its entries and its checkpoint
      // together, so at that instant the newest entry and the newest checkpoint agree unless
      // someone wrote around the store. Taking the larger of the two keeps that visible.
      const bound = await db.tenantTx(tenant, async (q) => {
        const res = await q.query<{ max_seq: string | number | null; max_size: string | number | null }>(
          `SELECT (SELECT max(seq) FROM ledger.entries WHERE tenant_id = $1) AS max_seq,
                  (SELECT max(size) FROM ledger.checkpoints WHERE tenant_id = $1) AS max_size`,
          [tenant],
        );
        const r = res.rows[0];
        return Math.max(toInt(r?.max_seq ?? 0), toInt(r?.max_size ?? 0));
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

    async *exportLedger(tenant) {
      assertTenantId(tenant);
      // The origin the log actually signs, which a reader without the writer's configuration
      // (the CLI) cannot know otherwise; verify checks it against the signatures anyway.
      const latest = await reader.latestCheckpoint(tenant);
      yield headerLine(tenant, latest ? latest.note.slice(0, latest.note.indexOf("\n")) : originOf(tenant));
      for await (const r of reader.readLedger(tenant)) {
        yield r.type === "entry" ? entryLine(r.entry, r.eventText) : checkpointLine(r.checkpoint.size, r.checkpoint.note);
      }
    },

    async chainStatus(tenant, opts = {}) {
      const last = opts.last ?? 1000;
      if (!Number.isSafeInteger(last) || last < 1) throw new ChaosError("invalid_argument", "last must be a positive integer");
      return db.tenantTx(tenant, async (q) => {
        const checkpoint = await latestCheckpoint(q, tenant);
        const size = checkpoint?.size ?? 0;
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

/**
 * The ledger store over a {@link Db} already migrated with `migrateLedger`. Appends to one
 * tenant are group-committed: one transaction at a time per tenant in this process, and the
 * head row lock serialises replicas. Every query runs through `tenantTx`, as the application
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

  async function writeBatch(tenant: string, items: QueuedAppend[]): Promise<Settled<AppendedEntry>[]> {
    let committed: readonly LedgerEntry[] = [];
    const outcomes = await db.tenantTx(tenant, async (q) => {
      // Re-read the head every time: another replica may have appended, and a failed batch
      // must leave nothing behind in memory.
      const head = await lockHead(q, tenant);
      const startSize = toInt(head.size);
      const frontier = new TreeFrontier(startSize, splitFrontier(head.frontier));
      let prevSig = head.last_sig;
      const outcomes: Settled<AppendedEntry>[] = [];
      const written: LedgerEntry[] = [];
      const texts: string[] = [];
      const nodes = { levels: [] as number[], idxs: [] as number[], hashes: [] as string[] };

      for (const item of items) {
        const seq = startSize + written.length + 1;
        let canonical = item.canonical;
        if (item.input.hook) {
          await q.query("SAVEPOINT ledger_append_hook");
          try {
            canonical = canonicalEvent(await item.input.hook(q, { seq, tenant }));
            await q.query("RELEASE SAVEPOINT ledger_append_hook");
          } catch (error) {
            // If even the rollback fails the transaction is unusable: let it fail the batch.
            await q.query("ROLLBACK TO SAVEPOINT ledger_append_hook");
            outcomes.push({ ok: false, error });
            continue;
          }
        }
        const entry = chainEntry(prevSig, {
          seq,
          ts: now().toISOString(),
          tenant,
          session: item.input.session,
          principal: item.input.principal,
          event: canonical!.event,
          content_hash: canonical!.hash,
        });
        frontier.append(hashLeaf(leafData(entry.sig)), (id, hash) => {
          if (id.level === 0) return;
          nodes.levels.push(id.level);
          nodes.idxs.push(id.index);
          nodes.hashes.push(hash.toString("hex"));
        });
        prevSig = entry.sig;
        written.push(entry);
        texts.push(canonical!.text);
        outcomes.push({ ok: true, value: { ...entry, treeSize: 0 } });
      }
      if (written.length === 0) return outcomes;

      const size = frontier.size;
      const root = frontier.root();
      const note = signCheckpoint({ origin: originOf(tenant), size, root }, signerOf(tenant));
      const res = await q.query<{ entries: string | number; checkpoints: string | number }>(WRITE_BATCH, [
        tenant,
        written.map((e) => e.seq),
        written.map((e) => e.ts),
        written.map((e) => e.session),
        written.map((e) => e.principal),
        texts,
        written.map((e) => e.content_hash),
        written.map((e) => e.prev_sig),
        written.map((e) => e.sig),
        nodes.levels,
        nodes.idxs,
        nodes.hashes,
        size,
        root.toString("hex"),
        note,
        prevSig,
        frontier.hashes.map((h) => h.toString("hex")).join(""),
        startSize,
      ]);
      const row = res.rows[0];
      if (!row || toInt(row.entries) !== written.length || toInt(row.checkpoints) !== 1) {
        throw new ChaosError("internal", `the ledger head of ${tenant} moved under its lock`);
      }
      for (const o of outcomes) if (o.ok) o.value.treeSize = size;
      await options.batches?.inTransaction(q, tenant, written);
      committed = written;
      return outcomes;
    });
    if (committed.length > 0) options.batches?.committed(tenant, committed);
    return outcomes;
  }

  const sequencer = new Sequencer<QueuedAppend, AppendedEntry>(writeBatch, { maxBatch: options.maxBatch ?? 1000 });

  const store: LedgerStore = {
    ...createLedgerReader(db, { name: nameTemplate }),

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


    verifierKey(tenant) {
      return verifierKey(originOf(tenant), options.key.publicKey);
    },

    stats: () => sequencer.stats(),
    drain: () => sequencer.idle(),
  };
  return store;
}
