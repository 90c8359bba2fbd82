import { ChaosError, assertTenantId, type Db, type Queryable } from "@chaos-core/kit";
import { checkpointLine, entryLine, headerLine, parseEvent, type LedgerEntry } from "./entry.js";
import { assembleProof, consistencyProofPlan, foldRange, inclusionProofPlan, planNodes, rangeNodes } from "./merkle.js";
import { nodeGetter, readNodes, toInt } from "./store-rows.js";
import { verifyChainSegment } from "./verify.js";

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

/** Refuses a count or index that is not a non-negative safe integer (`invalid_argument`). */
export function assertNonNegative(n: number, what: string): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new ChaosError("invalid_argument", `${what} must be a non-negative integer`);
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
