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
  /** Batches being written. */
  inFlight: number;
  /** A batch that may not overlap others is being written. */
  exclusive: boolean;
  /** A pump is scheduled. */
  scheduled: boolean;
  /** Settles when the lane is empty and idle. */
  done: Promise<void>;
  finish: () => void;
}

/** Options of {@link Sequencer}. */
export interface SequencerOptions<I> {
  /** At most this many items per batch (default 1000). */
  maxBatch?: number;
  /** At most this many batches of one key in flight at once (default 1). */
  depth?: number;
  /**
   * Whether a batch starting with `item` may be written while other batches of `key` are in
   * flight (default: never). A batch that may not starts only when the key is idle, and nothing
   * starts beside it; items that may not overlap never join a batch that does.
   */
  overlaps?: (key: string, item: I) => boolean;
}

/**
 * Group commit per key: items for one key queue in the process and a writer call takes
 * everything queued (up to `maxBatch`), so N concurrent submitters cost a few writes, not N.
 * With `depth` > 1, up to that many writer calls per key run at once for batches the writer
 * says may overlap (it pipelines them: each is conditional on the one before), so a commit's
 * latency need not stall the next batch. Keys are independent. Nothing is remembered between
 * batches here; the writer re-reads (or checks) whatever state it needs.
 */
export class Sequencer<I, O> {
  private readonly lanes = new Map<string, Lane<I, O>>();
  private readonly maxBatch: number;
  private readonly depth: number;
  private readonly overlaps: (key: string, item: I) => boolean;
  private readonly counters: SequencerStats = { submitted: 0, batches: 0, failedBatches: 0, largestBatch: 0 };

  constructor(
    private readonly write: BatchWriter<I, O>,
    options: SequencerOptions<I> = {},
  ) {
    this.maxBatch = options.maxBatch ?? 1000;
    this.depth = options.depth ?? 1;
    this.overlaps = options.overlaps ?? (() => false);
    if (!Number.isInteger(this.maxBatch) || this.maxBatch < 1) throw new RangeError("maxBatch must be a positive integer");
    if (!Number.isInteger(this.depth) || this.depth < 1) throw new RangeError("depth must be a positive integer");
  }

  /** Queues `item` for `key`; resolves with its outcome once the batch holding it is written. */
  submit(key: string, item: I): Promise<O> {
    this.counters.submitted++;
    return new Promise<O>((resolve, reject) => {
      let lane = this.lanes.get(key);
      if (!lane) {
        let finish!: () => void;
        const done = new Promise<void>((r) => (finish = r));
        lane = { queue: [], inFlight: 0, exclusive: false, scheduled: false, done, finish };
        this.lanes.set(key, lane);
      }
      lane.queue.push({ item, resolve, reject });
      this.schedule(key, lane);
    });
  }

  /** A copy of the counters. */
  stats(): SequencerStats {
    return { ...this.counters };
  }

  /** Resolves when every item submitted so far has been written or rejected. */
  async idle(): Promise<void> {
    while (this.lanes.size > 0) await Promise.all([...this.lanes.values()].map((l) => l.done));
  }

  /**
   * Pumps after one turn of the event loop: submitters that are ready in this turn (a burst of
   * concurrent callers, or callers whose append just resolved) join the same batch.
   */
  private schedule(key: string, lane: Lane<I, O>): void {
    if (lane.scheduled) return;
    lane.scheduled = true;
    setImmediate(() => {
      lane.scheduled = false;
      this.pump(key, lane);
    });
  }

  private pump(key: string, lane: Lane<I, O>): void {
    while (lane.queue.length > 0 && lane.inFlight < this.depth && !lane.exclusive) {
      const overlapping = this.depth > 1 && this.overlaps(key, lane.queue[0]!.item);
      if (!overlapping && lane.inFlight > 0) break;
      let n = 1;
      if (overlapping) while (n < lane.queue.length && n < this.maxBatch && this.overlaps(key, lane.queue[n]!.item)) n++;
      else n = Math.min(lane.queue.length, this.maxBatch);
      const batch = lane.queue.splice(0, n);
      lane.inFlight++;
      lane.exclusive = !overlapping;
      void this.run(key, lane, batch);
    }
    if (lane.queue.length === 0 && lane.inFlight === 0) {
      if (this.lanes.get(key) === lane) this.lanes.delete(key);
      lane.finish();
    }
  }

  private async run(key: string, lane: Lane<I, O>, batch: Array<Pending<I, O>>): Promise<void> {
    this.counters.batches++;
    this.counters.largestBatch = Math.max(this.counters.largestBatch, batch.length);
    try {
      const outcomes = await this.write(
        key,
        batch.map((p) => p.item),
      );
      if (outcomes.length !== batch.length) throw new Error(`the writer returned ${outcomes.length} outcomes for ${batch.length} items`);
      outcomes.forEach((o, i) => (o.ok ? batch[i]!.resolve(o.value) : batch[i]!.reject(o.error)));
    } catch (err) {
      this.counters.failedBatches++;
      for (const p of batch) p.reject(err);
    } finally {
      lane.inFlight--;
      lane.exclusive = false;
      // Give the callers just resolved a turn to submit again before the next batch is cut.
      this.schedule(key, lane);
    }
  }
}
