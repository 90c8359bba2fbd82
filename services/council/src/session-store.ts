/** A session's state as the store keeps it: one JSON object, opaque to the store. */
export type SessionState = { readonly [key: string]: unknown };

/** A stored session: its state and its version. */
export interface StoredSession<S extends SessionState = SessionState> {
  readonly id: string;
  readonly state: S;
  /** Starts at 1 and grows by one with every {@link CouncilSessionStore.modify}. */
  readonly version: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** One session as {@link CouncilSessionStore.list} lists it. */
export interface SessionListing {
  readonly id: string;
  /** The state's top-level `title`, "" when it has none. */
  readonly title: string;
  /** The state's top-level `currentPhase`, null when it has none (a complete session). */
  readonly currentPhase: string | null;
  readonly updatedAt: Date;
}

/** One stored session as an export carries it: every column, the state as its stored JSON text. */
export interface ExportedSession {
  readonly id: string;
  /** The state's JSON text exactly as stored. */
  readonly stateJson: string;
  readonly version: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** What {@link CouncilSessionStore.applyRetention} removed. */
export interface SessionRetentionResult {
  readonly deleted: number;
  /** Sessions last updated before this instant were removed; the rest were kept. */
  readonly cutoff: Date;
}

/** Options of the calls that work through a tenant's sessions in batches. */
export interface SessionBatchOptions {
  /** Checked between batches: once aborted, no further batch starts (the call fails `cancelled`). */
  readonly signal?: AbortSignal;
}

/** The largest `max_age_seconds` (what its uint32 carries). */
export const SESSION_MAX_AGE_SECONDS_MAX = 2 ** 32 - 1;

/** The most sessions one {@link CouncilSessionStore.list} returns. */
export const SESSION_LIST_MAX = 100;

/** What a {@link CouncilSessionStore.modify} function returns: the state to store, and its result. */
export interface Modification<R> {
  readonly state: SessionState;
  readonly result: R;
}

/**
 * Where council sessions live, per tenant. Every method is scoped to `tenant`: another
 * tenant's session is `undefined` / `not_found`, exactly like one that never existed.
 */
export interface CouncilSessionStore {
  /** The session, or undefined when the tenant has none with this id. */
  get(tenant: string, id: string): Promise<StoredSession | undefined>;
  /** Stores a new session at version 1; `already_exists` if the tenant already has this id. */
  create(tenant: string, id: string, state: SessionState): Promise<StoredSession>;
  /**
   * Read-modify-write in one tenant transaction: locks the session's row, calls `fn` with its
   * state and version, stores the state `fn` returns at version + 1 and resolves with `fn`'s
   * result. Modifications of one session run one after another, each seeing the state the
   * previous one stored, so there is nothing to retry. `fn` must be synchronous and pure: it
   * runs while the row is locked, and if it throws, nothing is stored and its error is the
   * call's. `not_found` (and `fn` is not called) when the tenant has no such session.
   */
  modify<R>(tenant: string, id: string, fn: (state: SessionState, version: number) => Modification<R>): Promise<R>;
  /**
   * The tenant's sessions whose id starts with `prefix` (see {@link isSessionIdPrefix}), most
   * recently updated first, then by id; at most `limit` (1 to {@link SESSION_LIST_MAX}). The only
   * call that reads inside a state: its top-level `title` and `currentPhase`.
   */
  list(tenant: string, query: { prefix: string; limit: number }): Promise<SessionListing[]>;
  /**
   * Every session of the tenant in id order, read a page at a time (each page its own
   * transaction, bounded in rows and bytes): not one snapshot, but no session is read twice.
   * Stopping the iteration stops the reading.
   */
  exportSessions(tenant: string): AsyncIterable<ExportedSession>;
  /**
   * Deletes every session of the tenant, a batch per transaction, until a batch finds none; how
   * many. A failure part way leaves the batches already done deleted; calling again finishes.
   */
  deleteAll(tenant: string, options?: SessionBatchOptions): Promise<number>;
  /**
   * Deletes the tenant's sessions last updated (saved, or created) more than `maxAgeSeconds` ago
   * (a whole number from 1 to {@link SESSION_MAX_AGE_SECONDS_MAX}, else `invalid_argument` naming
   * `max_age_seconds`), in batches as {@link deleteAll} does. A session saved meanwhile is kept.
   */
  applyRetention(tenant: string, maxAgeSeconds: number, options?: SessionBatchOptions): Promise<SessionRetentionResult>;
}

/** The largest session state the store accepts, as JSON text. */
export const SESSION_STATE_MAX_BYTES = 4 * 1024 * 1024;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether `id` looks like a session id the service issues (a lowercase UUID). */
export function isSessionId(id: string): boolean {
  return UUID.test(id);
}

const ID_PREFIX = /^[0-9a-f-]{0,36}$/;

/** Whether `prefix` can start a session id: lowercase hex digits and hyphens, at most 36 characters. */
export function isSessionIdPrefix(prefix: string): boolean {
  return ID_PREFIX.test(prefix);
}
