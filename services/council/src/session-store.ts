/** A session's state as the store keeps it: one JSON object, opaque to the store. */
export type SessionState = { readonly [key: string]: unknown };

/** A stored session: its state and the version an update must name. */
export interface StoredSession<S extends SessionState = SessionState> {
  readonly id: string;
  readonly state: S;
  /** Starts at 1 and grows by one with every update. */
  readonly version: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
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
   * Replaces the state of a session read at `expectedVersion`. `conflict` when someone else
   * updated it since (re-read, re-apply, retry), `not_found` when the tenant has no such session.
   */
  update(tenant: string, id: string, state: SessionState, expectedVersion: number): Promise<StoredSession>;
}

/** The largest session state the store accepts, as JSON text. */
export const SESSION_STATE_MAX_BYTES = 4 * 1024 * 1024;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether `id` looks like a session id the service issues (a lowercase UUID). */
export function isSessionId(id: string): boolean {
  return UUID.test(id);
}
