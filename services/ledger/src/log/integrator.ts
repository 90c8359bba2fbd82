import { ChaosError, type Db, type Queryable } from "@chaos-core/kit";
import { leafData } from "./entry.js";
import { TreeFrontier, foldRange, hashLeaf, rangeNodes } from "./merkle.js";
import { nodeGetter, readNodes, splitFrontier, toInt } from "./store-rows.js";

/** Signs the checkpoint of `tenant`'s tree at `size` with `root`; returns the note. */
export type CheckpointSigner = (tenant: string, size: number, root: Buffer) => string;

/** What one integration pass over one tenant did. */
export type PassResult =
  /** Another integrator (this process or a replica) holds the tenant's tree: nothing done. */
  | { status: "busy" }
  /** The tree now has `size` entries; `integrated` were added; `more` when the pass hit its limit. */
  | { status: "done"; size: number; integrated: number; more: boolean };

/** Options of {@link Integrator}. */
export interface IntegratorOptions {
  /** An entry waits at most this long (plus one pass) for its checkpoint (default 50 ms). */
  intervalMs?: number;
  /** Integrate at once, without waiting for the interval, when this many entries wait (default 2000). */
  batchEntries?: number;
  /** At most this many entries per integration transaction (default 10,000). */
  maxPerPass?: number;
  /** Every this often, every tenant's log is checked for entries nobody integrated (default 10 s). */
  sweepMs?: number;
  /**
   * Told of each checkpoint in the transaction that signs it (the webhook outbox's
   * `ledger.checkpoint` row): what it writes commits or rolls back with the checkpoint.
   */
  onCheckpoint?: CheckpointListener;
}

/** A signed checkpoint as it is stored: the tree's size, its root and the signed note. */
export interface SignedCheckpoint {
  readonly size: number;
  readonly root: Buffer;
  readonly note: string;
}

export type CheckpointListener = (q: Queryable, tenant: string, checkpoint: SignedCheckpoint) => Promise<void>;

/** Counters of the integrator. */
export interface IntegratorStats {
  /** Transactions that added entries to a tree (one signed checkpoint each). */
  passes: number;
  /** Entries integrated. */
  integrated: number;
  /** Passes that found the tree held by another integrator. */
  busy: number;
  /** Passes that failed (they are retried on the next interval). */
  failures: number;
  lastError?: string;
}

interface TreeRow {
  size: string | number;
  frontier: string;
  last_sig: string;
}

interface Tree {
  frontier: TreeFrontier;
  /** The sig of the tree's last leaf ("" for the empty tree): the next leaf's prev_sig. */
  lastSig: string;
}

const LOCK_TREE = "SELECT size, frontier, last_sig FROM ledger.trees WHERE tenant_id = $1 FOR UPDATE SKIP LOCKED";

/**
 * The sequenced entries after the tree, up to the head: the head moves in the statement that
 * writes the entries, so a row beyond it was written around the store and is never integrated.
 */
const READ_SEQUENCED = `
  SELECT h.size AS head, e.seq, e.prev_sig, e.sig
    FROM ledger.heads h
    LEFT JOIN LATERAL (
      SELECT seq, prev_sig, sig FROM ledger.entries
       WHERE tenant_id = $1 AND seq > $2 AND seq <= h.size ORDER BY seq LIMIT $3
    ) e ON true
   WHERE h.tenant_id = $1`;

/** One statement adds the new nodes and the checkpoint and moves the tree. */
const WRITE_TREE = `
  WITH new_nodes AS (
    INSERT INTO ledger.nodes (tenant_id, level, idx, hash)
    SELECT $1, n.level, n.idx, decode(n.hash, 'hex')
      FROM unnest($2::smallint[], $3::bigint[], $4::text[]) AS n(level, idx, hash)
    RETURNING 1
  ), new_checkpoint AS (
    INSERT INTO ledger.checkpoints (tenant_id, size, root, note) VALUES ($1, $5, decode($6, 'hex'), $7)
    RETURNING 1
  )
  UPDATE ledger.trees SET size = $5, frontier = $8, last_sig = $10, updated_at = now()
   WHERE tenant_id = $1 AND size = $9
  RETURNING (SELECT count(*) FROM new_checkpoint) AS checkpoints`;

/**
 * Locks the tenant's tree row without waiting (another integrator holding it means "busy"),
 * creating it on first use from the newest checkpoint and its stored nodes: a log written by
 * the per-commit path (before migration 0004) has every node of that checkpoint's tree.
 */
async function lockTree(q: Queryable, tenant: string): Promise<Tree | undefined> {
  const res = await q.query<TreeRow>(LOCK_TREE, [tenant], { name: "ledger_lock_tree" });
  const row = res.rows[0];
  if (row) return { frontier: new TreeFrontier(toInt(row.size), splitFrontier(row.frontier)), lastSig: row.last_sig };
  const exists = await q.query("SELECT 1 FROM ledger.trees WHERE tenant_id = $1", [tenant]);
  if (exists.rows.length > 0) return undefined;
  const cp = await q.query<{ size: string | number; root: string }>(
    "SELECT size, encode(root, 'hex') AS root FROM ledger.checkpoints WHERE tenant_id = $1 ORDER BY size DESC LIMIT 1",
    [tenant],
  );
  const size = cp.rows[0] ? toInt(cp.rows[0].size) : 0;
  const ids = rangeNodes(0, size);
  const get = nodeGetter(await readNodes(q, tenant, ids), tenant);
  const border = ids.map(get);
  if (cp.rows[0] && foldRange(border).toString("hex") !== cp.rows[0].root) {
    // Never build on a tree that does not match what was signed: `verify` names the damage.
    throw new ChaosError("internal", `the stored Merkle nodes of ${tenant} do not match its checkpoint at size ${size}`);
  }
  let lastSig = "";
  if (size > 0) {
    const last = await q.query<{ sig: string }>("SELECT sig FROM ledger.entries WHERE tenant_id = $1 AND seq = $2", [tenant, size]);
    if (!last.rows[0]) throw new ChaosError("internal", `ledger entry ${size} of ${tenant} is missing`);
    lastSig = last.rows[0].sig;
  }
  const inserted = await q.query(
    "INSERT INTO ledger.trees (tenant_id, size, frontier, last_sig) VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id) DO NOTHING RETURNING 1",
    [tenant, size, border.map((h) => h.toString("hex")).join(""), lastSig],
  );
  return inserted.rows.length > 0 ? { frontier: new TreeFrontier(size, border), lastSig } : undefined;
}

/**
 * One integration transaction step over one tenant, inside `q` (a tenant transaction): the
 * sequenced entries after the tree's size (at most `maxEntries`) become leaves, their completed
 * subtrees are stored as nodes, and one checkpoint over the new size is signed and stored.
 */
export async function integrateTenant(q: Queryable, tenant: string, sign: CheckpointSigner, maxEntries: number, onCheckpoint?: CheckpointListener): Promise<PassResult> {
  const locked = await lockTree(q, tenant);
  if (!locked) return { status: "busy" };
  const tree = locked.frontier;
  const start = tree.size;
  const res = await q.query<{ head: string | number; seq: string | number | null; prev_sig: string | null; sig: string | null }>(
    READ_SEQUENCED,
    [tenant, start, maxEntries],
    { name: "ledger_read_sequenced" },
  );
  const head = res.rows[0] ? toInt(res.rows[0].head) : 0;
  const rows = res.rows.filter((r) => r.seq !== null);
  if (rows.length === 0) {
    if (head > start) throw new ChaosError("internal", `ledger entries ${start + 1}..${head} of ${tenant} are missing`);
    return { status: "done", size: start, integrated: 0, more: false };
  }
  const nodes = { levels: [] as number[], idxs: [] as number[], hashes: [] as string[] };
  let prevSig = locked.lastSig;
  for (const [i, row] of rows.entries()) {
    // Entries commit in seq order with the head, so up to the head they are all there, each
    // linked to the one before; a gap or a broken link means a lost or foreign row, and the
    // tree must not sign over it (verify names it; appends go on, proofs wait).
    if (toInt(row.seq) !== start + i + 1) throw new ChaosError("internal", `ledger entry ${start + i + 1} of ${tenant} is missing`);
    if (row.prev_sig !== prevSig) throw new ChaosError("internal", `ledger entry ${start + i + 1} of ${tenant} does not link to entry ${start + i}`);
    prevSig = row.sig!;
    tree.append(hashLeaf(leafData(row.sig!)), (id, hash) => {
      if (id.level === 0) return;
      nodes.levels.push(id.level);
      nodes.idxs.push(id.index);
      nodes.hashes.push(hash.toString("hex"));
    });
  }
  const size = tree.size;
  const root = tree.root();
  const note = sign(tenant, size, root);
  const wrote = await q.query<{ checkpoints: string | number }>(
    WRITE_TREE,
    [tenant, nodes.levels, nodes.idxs, nodes.hashes, size, root.toString("hex"), note, tree.hashes.map((h) => h.toString("hex")).join(""), start, prevSig],
    { name: "ledger_write_tree" },
  );
  if (wrote.rows.length !== 1 || toInt(wrote.rows[0]!.checkpoints) !== 1) throw new ChaosError("internal", `the ledger tree of ${tenant} moved under its lock`);
  await onCheckpoint?.(q, tenant, { size, root, note });
  return { status: "done", size, integrated: rows.length, more: rows.length === maxEntries && size < head };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());

/**
 * Integrates sequenced entries into each tenant's Merkle tree in batches: an entry's tenant is
 * marked when its append commits, and marked tenants are integrated within `intervalMs` (or at
 * once when `batchEntries` wait). Any number of integrators may run, in one process or in
 * replicas: the tree row lock (taken with SKIP LOCKED) lets one at a time work on a tenant, and
 * a tenant found busy stays marked and is tried again, so there is no leader to fail over from.
 * A periodic sweep finds logs a dead replica left behind.
 */
export class Integrator {
  private readonly intervalMs: number;
  private readonly batchEntries: number;
  private readonly maxPerPass: number;
  private readonly sweepMs: number;
  private readonly onCheckpoint: CheckpointListener | undefined;
  private readonly pending = new Map<string, number>();
  private readonly counters: IntegratorStats = { passes: 0, integrated: 0, busy: 0, failures: 0 };
  private timer: NodeJS.Timeout | undefined;
  private timerDue = Infinity;
  private sweeper: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly db: Db,
    private readonly sign: CheckpointSigner,
    options: IntegratorOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? 50;
    this.batchEntries = options.batchEntries ?? 2000;
    this.maxPerPass = options.maxPerPass ?? 10_000;
    this.sweepMs = options.sweepMs ?? 10_000;
    this.onCheckpoint = options.onCheckpoint;
    for (const [k, v] of Object.entries({ intervalMs: this.intervalMs, batchEntries: this.batchEntries, maxPerPass: this.maxPerPass, sweepMs: this.sweepMs })) {
      if (!Number.isInteger(v) || v < 1) throw new RangeError(`${k} must be a positive integer`);
    }
  }

  /** Starts the periodic sweep (the first one at once: logs a crashed process left are caught up). */
  start(): void {
    if (this.sweeper || this.stopped) return;
    this.sweeper = setInterval(() => void this.sweep(), this.sweepMs);
    this.sweeper.unref();
    void this.sweep();
  }

  /** Stops the timers; resolves when a running pass has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.sweeper) clearInterval(this.sweeper);
    this.timer = this.sweeper = undefined;
    await this.running;
  }

  /** `count` entries of `tenant` were sequenced (committed): integrate them soon. */
  notify(tenant: string, count: number): void {
    const waiting = (this.pending.get(tenant) ?? 0) + count;
    this.pending.set(tenant, waiting);
    this.schedule(waiting >= this.batchEntries ? 0 : this.intervalMs);
  }

  stats(): IntegratorStats {
    return { ...this.counters };
  }

  /**
   * Integrates `tenant` now (all of it, pass after pass), waiting for another integrator while
   * it holds the tree, for at most `waitMs`. Resolves with the integrated size, or undefined
   * when another integrator still held the tree at the deadline.
   */
  async catchUp(tenant: string, waitMs: number): Promise<number | undefined> {
    const deadline = performance.now() + waitMs;
    for (;;) {
      const r = await this.pass(tenant);
      if (r.status === "done" && !r.more) return r.size;
      if (r.status === "busy") {
        if (performance.now() >= deadline) return undefined;
        await sleep(Math.min(5, this.intervalMs));
      }
    }
  }

  /** Resolves when the tenants marked so far have been integrated (or their pass failed). */
  async idle(): Promise<void> {
    while (this.running || (this.pending.size > 0 && !this.stopped)) {
      if (!this.running) this.kick();
      await this.running;
      if (this.counters.failures > 0 && this.pending.size > 0) return;
    }
  }

  private async pass(tenant: string): Promise<PassResult> {
    const r = await this.db.tenantTx(tenant, (q) => integrateTenant(q, tenant, this.sign, this.maxPerPass, this.onCheckpoint));
    if (r.status === "busy") this.counters.busy++;
    else if (r.integrated > 0) {
      this.counters.passes++;
      this.counters.integrated += r.integrated;
    }
    return r;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    const due = performance.now() + delayMs;
    if (this.timer && this.timerDue <= due) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerDue = due;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerDue = Infinity;
      this.kick();
    }, delayMs);
    this.timer.unref();
  }

  private kick(): void {
    if (this.running) return;
    this.running = this.runMarked().finally(() => {
      this.running = undefined;
      if (this.pending.size > 0) this.schedule(this.intervalMs);
    });
  }

  private async runMarked(): Promise<void> {
    const tenants = [...this.pending.keys()];
    this.pending.clear();
    for (const tenant of tenants) {
      try {
        let r: PassResult;
        do r = await this.pass(tenant);
        while (r.status === "done" && r.more && !this.stopped);
        // Busy: another integrator has the tree and may have read before our entries
        // committed, so try again on the next interval.
        if (r.status === "busy") this.pending.set(tenant, this.pending.get(tenant) ?? 1);
      } catch (err) {
        this.counters.failures++;
        this.counters.lastError = err instanceof Error ? err.message : String(err);
        if (!this.stopped) this.pending.set(tenant, this.pending.get(tenant) ?? 1);
      }
    }
  }

  private async sweep(): Promise<void> {
    try {
      // The one read outside a tenant: ids only, which every tenant may read (see the migration).
      const res = await this.db.adminTx((q) => q.query<{ tenant_id: string }>("SELECT tenant_id FROM ledger.log_tenants ORDER BY tenant_id"));
      for (const r of res.rows) if (!this.pending.has(r.tenant_id)) this.pending.set(r.tenant_id, 0);
      this.schedule(0);
    } catch (err) {
      this.counters.failures++;
      this.counters.lastError = err instanceof Error ? err.message : String(err);
    }
  }
}
