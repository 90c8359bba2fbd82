/** A JSON value as the memory service stores it. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** One remembered item, as a caller sees it. */
export interface MemoryItem {
  readonly key: string;
  readonly value: JsonValue;
  /** Distinct tags, in the order they were first given. */
  readonly tags: readonly string[];
  /** When this key was first remembered (an expired item remembered again starts afresh). */
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** `null` when the item never expires. */
  readonly expiresAt: Date | null;
}

/** What `remember` takes. The value is checked to be plain JSON; nothing is coerced. */
export interface RememberInput {
  readonly key: string;
  readonly value: unknown;
  readonly tags?: readonly string[];
  /** Seconds until the item expires; 0 or omitted keeps it until it is forgotten. */
  readonly ttlSeconds?: number;
}

/** What `search` takes. */
export interface SearchInput {
  /** Case-insensitive substring of the key or of the value's JSON text; empty matches all. */
  readonly query?: string;
  /** Every tag must be present on an item. */
  readonly tags?: readonly string[];
  /** Page size; 0 or omitted means 20, anything above 100 is served as 100. */
  readonly limit?: number;
  /** `nextCursor` of the previous page, for the same query and tags. */
  readonly cursor?: string;
}

/** One page of search results, in key order. */
export interface SearchPage {
  readonly items: MemoryItem[];
  /** Absent on the last page. */
  readonly nextCursor?: string;
}

/** A tag and how many live items carry it. */
export interface TagCount {
  readonly tag: string;
  readonly count: number;
}

/** A summary of one tenant's memory. */
export interface MemoryStats {
  /** Live (unexpired) items. */
  readonly items: number;
  /** Expired items that have not been purged yet. */
  readonly expired: number;
  /** Bytes of the live values as stored JSON text. */
  readonly valueBytes: number;
  /** Absent when there are no live items. */
  readonly oldestUpdate?: Date;
  readonly newestUpdate?: Date;
  /** At most 10, most used first, ties by tag. */
  readonly topTags: TagCount[];
}

/** One stored item as an export carries it: every column, the value as its stored JSON text. */
export interface StoredItem {
  readonly key: string;
  /** The value's JSON text exactly as stored. */
  readonly valueJson: string;
  readonly tags: readonly string[];
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /** `null` when the item never expires; in the past for an expired item not yet purged. */
  readonly expiresAt: Date | null;
}

/** What {@link MemoryStore.deleteAll} removed. */
export interface DeletedItems {
  /** Every item, expired ones included. */
  readonly items: number;
  /** Of those, the cognitive core's episodes (keys starting `episode:`). */
  readonly episodes: number;
  /** Of those, the cognitive core's procedures (keys starting `procedure:`). */
  readonly procedures: number;
}

/** What {@link MemoryStore.applyRetention} removed. */
export interface RetentionResult {
  readonly deleted: number;
  /** Items last written before this instant were removed; the rest were kept. */
  readonly cutoff: Date;
}

/** Options of the calls that work through a tenant's items in batches. */
export interface BatchOptions {
  /** Checked between batches: once aborted, no further batch starts (the call fails `cancelled`). */
  readonly signal?: AbortSignal;
}

/**
 * Durable semantic memory, one keyspace per tenant. Every method validates its input and
 * throws `ChaosError("invalid_argument")` naming the problem. Expired items are never
 * returned by `recall` or `search` and are not counted as live by `stats`.
 */
export interface MemoryStore {
  /** Stores `value` under `key`, replacing value, tags and TTL of a live item (its `createdAt` stays). */
  remember(tenant: string, input: RememberInput): Promise<MemoryItem>;
  /** The live item under `key`, or `undefined`. */
  recall(tenant: string, key: string): Promise<MemoryItem | undefined>;
  /** One page of live items matching the query and tags, ordered by key. */
  search(tenant: string, input: SearchInput): Promise<SearchPage>;
  /** Deletes `key`; `true` when a live item was deleted. */
  forget(tenant: string, key: string): Promise<boolean>;
  stats(tenant: string): Promise<MemoryStats>;
  /**
   * Every stored item of the tenant in key order, expired ones not yet purged included, read a
   * page at a time (each page its own transaction, bounded in rows and bytes): not one
   * snapshot, but no item is read twice. Stopping the iteration stops the reading.
   */
  exportItems(tenant: string): AsyncIterable<StoredItem>;
  /**
   * Deletes every item of the tenant, a batch per transaction, until a batch finds none. A
   * failure part way leaves the batches already done deleted; calling again finishes the job.
   */
  deleteAll(tenant: string, options?: BatchOptions): Promise<DeletedItems>;
  /**
   * Deletes the tenant's items last written (`updatedAt`) more than `maxAgeSeconds` ago (a whole
   * number above 0, else `invalid_argument` naming `max_age_seconds`), in batches as
   * {@link deleteAll} does. An item written again meanwhile is kept.
   */
  applyRetention(tenant: string, maxAgeSeconds: number, options?: BatchOptions): Promise<RetentionResult>;
}
