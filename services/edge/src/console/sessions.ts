import { randomBytes } from "node:crypto";

/**
 * Who is signed in to the approval console (docs/approvals.md §2, "Sessions and cookies"): the
 * record a session cookie names, kept server side, and the count of failed sign-ins per remote
 * address. Two stores meet one contract (`sessions.test.ts`): in-process here, Redis in
 * `redis-sessions.ts`, so any edge replica serves a session when `REDIS_URL` is set.
 */

/** A session ends after this long without a request. */
export const CONSOLE_IDLE_SECONDS = 30 * 60;
/** A session ends this long after sign-in, however busy (the cookie's `Max-Age` too). */
export const CONSOLE_MAX_AGE_SECONDS = 8 * 3600;
/** Failed sign-ins one remote address may make in a window before it is refused (429). */
export const SIGN_IN_FAILURE_LIMIT = 10;
/** The window, from an address's first failure, over which failures are counted. */
export const SIGN_IN_FAILURE_WINDOW_SECONDS = 5 * 60;

/**
 * A new session cookie value: the tenant, then 256 random bits (`acme.<43 base64url
 * characters>`). The tenant is no secret (the person knows it); it lets the Redis store keep a
 * session under its tenant's keys, `<prefix><tenant>:console:<sha256(cookie)>`, as every other
 * record. Only the random part makes it unguessable.
 */
export function newSessionId(tenant: string): string {
  return `${tenant}.${randomBytes(32).toString("base64url")}`;
}

const SESSION_ID = /^([a-z0-9][a-z0-9_-]{0,62})\.[A-Za-z0-9_-]{43}$/;

/** The tenant a session cookie value names, or undefined when it is no value {@link newSessionId} made. */
export function tenantOfSessionId(id: string): string | undefined {
  return SESSION_ID.exec(id)?.[1];
}

/** What `keySha256` holds for a session the operator's one-time sign-in link opened. */
export const OPERATOR_LINK = "operator-link";

/**
 * What `keySha256` holds for a session signed in through the OAuth issuer (docs/auth.md, "The
 * approval console"). Its access token is not kept: the session ends at the token's `exp`
 * ({@link ConsoleSession.expiresAt}) at the latest.
 */
export const OAUTH_SIGN_IN = "oauth";

/** One signed-in person, as the store keeps it. Never the API key, nor the cookie's value. */
export interface ConsoleSession {
  readonly tenant: string;
  readonly principal: string;
  /**
   * The SHA-256 of the API key that signed in (re-read on every request, so a removed key or
   * role ends the session), {@link OPERATOR_LINK}, or {@link OAUTH_SIGN_IN}.
   */
  readonly keySha256: string;
  /**
   * Milliseconds since the epoch past which the session is over whatever the idle and absolute
   * limits say: the `exp` of the access token an OAuth sign-in was made with (a token the issuer
   * would no longer vouch for signs nobody in). Absent: those limits alone.
   */
  readonly expiresAt?: number;
  /** This session's CSRF token, put in every form it is shown. */
  readonly csrf: string;
  /** Milliseconds since the epoch. */
  readonly createdAt: number;
  readonly lastSeenAt: number;
}

export type NewConsoleSession = Omit<ConsoleSession, "createdAt" | "lastSeenAt">;

/**
 * Console sessions by the cookie's value (stored under its SHA-256 only), and failed sign-ins by
 * remote address. Every read applies the idle and absolute limits; an ended session is gone.
 */
export interface ConsoleSessionStore {
  /** Stores a session under the cookie value `id` ({@link newSessionId} of the session's tenant). */
  create(id: string, session: NewConsoleSession): Promise<ConsoleSession>;
  /**
   * The live session `id` names, its `lastSeenAt` moved to now; undefined when there is none,
   * it was idle over {@link CONSOLE_IDLE_SECONDS} or is older than {@link CONSOLE_MAX_AGE_SECONDS}.
   */
  get(id: string): Promise<ConsoleSession | undefined>;
  /** Ends a session (sign-out, a revoked key); nothing when there is none. */
  delete(id: string): Promise<void>;
  /** Failed sign-ins from `address` in its current window. */
  failedSignIns(address: string): Promise<number>;
  /** Counts one more failed sign-in from `address`; resolves with the window's count. */
  recordFailedSignIn(address: string): Promise<number>;
}

/** Options shared by both stores. */
export interface ConsoleSessionStoreOptions {
  /** The clock, in milliseconds since the epoch (tests move it); `Date.now` by default. */
  readonly now?: () => number;
}

type Lifetime = Pick<ConsoleSession, "createdAt" | "lastSeenAt" | "expiresAt">;

/** Whether `session` still counts at `now`. */
export function sessionLive(session: Lifetime, now: number): boolean {
  return (
    now - session.lastSeenAt < CONSOLE_IDLE_SECONDS * 1000 &&
    now - session.createdAt < CONSOLE_MAX_AGE_SECONDS * 1000 &&
    (session.expiresAt === undefined || now < session.expiresAt)
  );
}

/** How long, from `now`, a session may still live if no request comes: what a store's expiry is set to. */
export function sessionRemainingMs(session: Lifetime, now: number): number {
  const end = Math.min(session.lastSeenAt + CONSOLE_IDLE_SECONDS * 1000, session.createdAt + CONSOLE_MAX_AGE_SECONDS * 1000, session.expiresAt ?? Infinity);
  return Math.max(1, end - now);
}

/** Most sessions and counted addresses the in-process store holds; past it the oldest go first. */
const MAX_ENTRIES = 10_000;

/** Keeps `map` under {@link MAX_ENTRIES}: the entries dead at `now` first, then the oldest. */
function makeRoom<V>(map: Map<string, V>, dead: (value: V) => boolean): void {
  if (map.size < MAX_ENTRIES) return;
  for (const [k, v] of map) if (dead(v)) map.delete(k);
  // A Map iterates in insertion order: the first key is the oldest.
  while (map.size >= MAX_ENTRIES) map.delete(map.keys().next().value!);
}

/**
 * The in-process store: for one edge process (standalone, or the edge without Redis, whose
 * sessions then only that replica serves). Bounded: at most 10,000 sessions and addresses.
 */
export function createMemoryConsoleSessionStore(options: ConsoleSessionStoreOptions = {}): ConsoleSessionStore {
  const now = options.now ?? Date.now;
  const sessions = new Map<string, ConsoleSession>();
  const failures = new Map<string, { since: number; count: number }>();
  const windowMs = SIGN_IN_FAILURE_WINDOW_SECONDS * 1000;
  const current = (address: string, at: number) => {
    const f = failures.get(address);
    return f && at - f.since < windowMs ? f : undefined;
  };
  return {
    create(id, session) {
      if (tenantOfSessionId(id) !== session.tenant) return Promise.reject(new Error("a console session id must be newSessionId(tenant)"));
      const at = now();
      makeRoom(sessions, (s) => !sessionLive(s, at));
      const stored: ConsoleSession = { ...session, createdAt: at, lastSeenAt: at };
      sessions.set(id, stored);
      return Promise.resolve(stored);
    },
    get(id) {
      const at = now();
      const s = sessions.get(id);
      if (!s) return Promise.resolve(undefined);
      if (!sessionLive(s, at)) {
        sessions.delete(id);
        return Promise.resolve(undefined);
      }
      const touched: ConsoleSession = { ...s, lastSeenAt: at };
      sessions.set(id, touched);
      return Promise.resolve(touched);
    },
    delete(id) {
      sessions.delete(id);
      return Promise.resolve();
    },
    failedSignIns(address) {
      return Promise.resolve(current(address, now())?.count ?? 0);
    },
    recordFailedSignIn(address) {
      const at = now();
      const f = current(address, at);
      if (!f) makeRoom(failures, (v) => at - v.since >= windowMs);
      const next = f ? { since: f.since, count: f.count + 1 } : { since: at, count: 1 };
      // Re-inserted, so the address counted most recently is the last to make room.
      failures.delete(address);
      failures.set(address, next);
      return Promise.resolve(next.count);
    },
  };
}
