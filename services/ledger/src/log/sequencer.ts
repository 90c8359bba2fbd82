/** The outcome of one item of a batch: its value, or the error that rejects only that item. */
export type Settled<O> = { ok: true; value: O } | { ok: false; error: unknown };

/**
 * Writes one batch of one key. Resolves with one outcome per item, in order; throwing (or
 * rejecting) fails every item of the batch.
 */
export type BatchWriter<I, O> = (key: string, items: I[]) => Promise<Settled<O>[]>;

/** Counters a caller (a test, a benchmark, a metric) can read. */
export interface SequencerStats {
  /** Items submitted. */
  submitted: number;
  /** Batches written (one transaction each), failed ones included. */
  batches: number;
  /** Batches whose writer threw: every item of them was rejected. */
  failedBatches: number;
  /** The most items one batch carried. */
  largestBatch: number;
}

interface Pending<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

interface Lane<I, O> {
  queue: Array<Pending<I, O>>;
  running: Promise<void>;
}

/**
 * Group commit per key: items for one key queue in the process and one writer call at a time
 * takes everything queued (up to `maxBatch`), so N concurrent submitters cost a few writes, not
 * N. Keys are independent. Nothing is remembered between batches — the writer re-reads whatever
 * state it needs — so a failed batch leaves nothing stale behind.
 */
export class Sequencer<I, O> {
  private readonly lanes = new Map<string, Lane<I, O>>();
  private readonly maxBatch: number;
  private readonly counters: SequencerStats = { submitted: 0, batches: 0, failedBatches: 0, largestBatch: 0 };

  constructor(
    private readonly write: BatchWriter<I, O>,
    options: { maxBatch?: number } = {},
  ) {
    this.maxBatch = options.maxBatch ?? 1000;
    if (!Number.isInteger(this.maxBatch) || this.maxBatch < 1) throw new RangeError("maxBatch must be a positive integer");
  }

  /** Queues `item` for `key`; resolves with its outcome once the batch holding it is written. */
  submit(key: string, item: I): Promise<O> {
    this.counters.submitted++;
    return new Promise<O>((resolve, reject) => {
      const lane = this.lanes.get(key);
      if (lane) {
        lane.queue.push({ item, resolve, reject });
        return;
      }
      const fresh: Lane<I, O> = { queue: [{ item, resolve, reject }], running: Promise.resolve() };
      this.lanes.set(key, fresh);
      fresh.running = this.drain(key, fresh);
    });
  }

  /** A copy of the counters. */
  stats(): SequencerStats {
    return { ...this.counters };
  }

  /** Resolves when every item submitted so far has been written or rejected. */
  async idle(): Promise<void> {
    while (this.lanes.size > 0) await Promise.all([...this.lanes.values()].map((l) => l.running));
  }

  private async drain(key: string, lane: Lane<I, O>): Promise<void> {
    // Yield once to the event loop first: submitters that are ready in this turn (a burst of
    // concurrent callers, or callers whose previous append just resolved) join this batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (lane.queue.length > 0) {
      const batch = lane.queue.splice(0, this.maxBatch);
      this.counters.batches++;
      this.counters.largestBatch = Math.max(this.counters.largestBatch, batch.length);
      let outcomes: Settled<O>[];
      try {
        outcomes = await this.write(
          key,
          batch.map((p) => p.item),
        );
        if (outcomes.length !== batch.length) throw new Error(`the writer returned ${outcomes.length} outcomes for ${batch.length} items`);
      } catch (err) {
        this.counters.failedBatches++;
        for (const p of batch) p.reject(err);
        continue;
      }
      outcomes.forEach((o, i) => (o.ok ? batch[i]!.resolve(o.value) : batch[i]!.reject(o.error)));
      if (lane.queue.length === 0) {
        // Give the callers just resolved a turn to submit again before deciding the lane is idle.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
    this.lanes.delete(key);
  }
}
