import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import { failClosedOnRedisOutage, tenantKeyPrefix } from "@chaos-core/kit";
import {
  SIGN_IN_FAILURE_WINDOW_SECONDS,
  sessionLive,
  sessionRemainingMs,
  tenantOfSessionId,
  type ConsoleSession,
  type ConsoleSessionStore,
  type ConsoleSessionStoreOptions,
} from "./sessions.js";

/** Key layout of the Redis console session store. */
export interface RedisConsoleSessionStoreOptions extends ConsoleSessionStoreOptions {
  /**
   * Prepended to every key, e.g. `chaoscore:`: a session reads `<prefix><tenant>:console:<sha256
   * of the cookie>`, a failure count `<prefix>console-sign-in-failures:<sha256 of the address>`.
   */
  readonly prefix?: string;
}

const sha256 = (s: string) => createHash("sha256").update(s, "utf8").digest("hex");

/**
 * Counts a failed sign-in in the address's window, opening a new window when none is open (or
 * the last one is over at ARGV[1], this request's clock): one script, so two replicas counting
 * at once lose no failure. Returns the window's count.
 */
const COUNT_FAILURE = `
local since, count = 0, 0
local v = redis.call('GET', KEYS[1])
if v then
  local sep = string.find(v, ':')
  since, count = tonumber(string.sub(v, 1, sep - 1)), tonumber(string.sub(v, sep + 1))
end
if not v or tonumber(ARGV[1]) - since >= tonumber(ARGV[2]) then since, count = tonumber(ARGV[1]), 0 end
count = count + 1
redis.call('SET', KEYS[1], string.format('%d:%d', since, count), 'PX', ARGV[2])
return count
`;

function parseSession(text: string | null): ConsoleSession | undefined {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as ConsoleSession;
  } catch {
    return undefined;
  }
}

/**
 * A {@link ConsoleSessionStore} on Redis, shared by every edge replica: a person signed in
 * through one replica is signed in on all. Each session is one JSON value whose expiry follows
 * the idle and absolute limits (checked again on every read against the store's clock); the
 * cookie's value is never stored, only its SHA-256. While Redis cannot be reached every method
 * rejects with `unavailable` naming Redis, so the console refuses rather than guesses.
 */
export function createRedisConsoleSessionStore(redis: Redis, options: RedisConsoleSessionStoreOptions = {}): ConsoleSessionStore {
  const prefix = options.prefix ?? "chaoscore:";
  const now = options.now ?? Date.now;
  /** The key of a session; undefined for a value no session id can be (it reaches no key then). */
  const sessionKey = (id: string) => {
    const tenant = tenantOfSessionId(id);
    return tenant && `${tenantKeyPrefix(prefix, tenant)}console:${sha256(id)}`;
  };
  const failureKey = (address: string) => `${prefix}console-sign-in-failures:${sha256(address)}`;
  const windowMs = SIGN_IN_FAILURE_WINDOW_SECONDS * 1000;

  return failClosedOnRedisOutage<ConsoleSessionStore>(
    {
      async create(id, session) {
        const key = sessionKey(id);
        if (!key || tenantOfSessionId(id) !== session.tenant) throw new Error("a console session id must be newSessionId(tenant)");
        const at = now();
        const stored: ConsoleSession = { ...session, createdAt: at, lastSeenAt: at };
        await redis.set(key, JSON.stringify(stored), "PX", sessionRemainingMs(stored, at));
        return stored;
      },

      async get(id) {
        const key = sessionKey(id);
        if (!key) return undefined;
        const s = parseSession(await redis.get(key));
        if (!s) return undefined;
        const at = now();
        if (!sessionLive(s, at)) {
          await redis.del(key);
          return undefined;
        }
        const touched: ConsoleSession = { ...s, lastSeenAt: at };
        // XX: a session deleted meanwhile (sign-out, a revoked key on another replica) stays gone.
        const kept = await redis.set(key, JSON.stringify(touched), "PX", sessionRemainingMs(touched, at), "XX");
        return kept === "OK" ? touched : undefined;
      },

      async delete(id) {
        const key = sessionKey(id);
        if (key) await redis.del(key);
      },

      async failedSignIns(address) {
        const v = await redis.get(failureKey(address));
        if (!v) return 0;
        const [since, count] = v.split(":").map(Number) as [number, number];
        return now() - since < windowMs ? count : 0;
      },

      async recordFailedSignIn(address) {
        return Number(await redis.eval(COUNT_FAILURE, 1, failureKey(address), String(now()), String(windowMs)));
      },
    },
    "the console session store",
  );
}
