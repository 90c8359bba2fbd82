import type { KeyObject } from "node:crypto";
import { ChaosError, assertTenantId, type Db } from "@chaos-core/kit";
import { createBatchWriter, type AppendedEntry, type AppendInput, type BatchListener, type QueuedAppend } from "./batch-writer.js";
import { signCheckpoint, verifierKey, type NoteSigner } from "./checkpoint.js";
import { assertLedgerText, canonicalEvent } from "./entry.js";
import { Integrator, type IntegratorOptions, type IntegratorStats } from "./integrator.js";
import { assertNonNegative, createLedgerReader, type LedgerReader, type ReadBound } from "./ledger-reader.js";
import { foldRange } from "./merkle.js";
import { Sequencer, type SequencerStats } from "./sequencer.js";

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
  const writer = createBatchWriter(db, { now, batches: options.batches, integrator });
  const heads = writer.heads;

  const sequencer = new Sequencer<QueuedAppend, AppendedEntry>(writer.write, {
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
