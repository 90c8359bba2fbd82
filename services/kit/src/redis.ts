import { Redis, type RedisOptions } from "ioredis";
import type { Logger } from "./logger.js";

/** How long one connection attempt may take before it is abandoned (and retried). */
export const REDIS_CONNECT_TIMEOUT_MS = 2_000;

/**
 * How long a command waits for its reply. A Redis that accepts connections but does not answer
 * (overloaded, paused, a half-open link) costs a caller at most this, never minutes.
 */
export const REDIS_COMMAND_TIMEOUT_MS = 2_000;

/** The longest pause between two reconnect attempts; the client never stops trying. */
export const REDIS_MAX_RECONNECT_DELAY_MS = 2_000;

/**
 * The options of every Redis client Chaos Core opens (edge, cognition, ledger, standalone), so
 * they all behave alike during an outage: while the connection is down a command fails at once
 * (no offline queue, no retries per request) instead of waiting seconds for a reconnect, and
 * the client keeps reconnecting in the background, so service resumes without a restart.
 * Commands in flight when the link drops are failed, not resent: a resent `SET NX` or Lua
 * transition could run twice. (ioredis's auto-pipelining was measured for the edge, issue 14:
 * no gain at 16 clients on this two-core machine, so it stays off.)
 */
export const REDIS_CLIENT_OPTIONS: Readonly<RedisOptions> = Object.freeze({
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
  commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
  retryStrategy: (attempt: number) => Math.min(100 * attempt, REDIS_MAX_RECONNECT_DELAY_MS),
});

/** `redis://user:***@host:port/db`: a URL fit for a log line or an error message. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(an unparseable REDIS_URL)";
  }
}

/**
 * A Redis client with {@link REDIS_CLIENT_OPTIONS}, not yet connected. Connection trouble is
 * logged once per outage (and its end once), never as ioredis's unhandled-error lines, which
 * would go to the console on every reconnect attempt.
 */
export function createRedisClient(url: string, options: { logger: Logger; name: string }): Redis {
  const redis = new Redis(url, { ...REDIS_CLIENT_OPTIONS, connectionName: options.name });
  const where = redactRedisUrl(url);
  let down = false;
  redis.on("error", (err: Error) => {
    if (down) return;
    down = true;
    options.logger.warn(
      { redis: where, err: err.message },
      "Redis is unavailable: what needs it fails closed (unavailable) until it is back; reconnecting",
    );
  });
  // Emitted only when the client will try again, so a deliberate quit() is not an outage.
  redis.on("reconnecting", () => {
    if (down) return;
    down = true;
    options.logger.warn({ redis: where }, "Redis connection lost: what needs it fails closed (unavailable) until it is back; reconnecting");
  });
  redis.on("ready", () => {
    if (!down) return;
    down = false;
    options.logger.info({ redis: where }, "Redis is available again");
  });
  return redis;
}

/**
 * {@link createRedisClient}, connected. A Redis that cannot be reached at start-up fails here
 * with a message naming `REDIS_URL` (password redacted), and the client is closed.
 */
export async function connectRedis(url: string, options: { logger: Logger; name: string }): Promise<Redis> {
  const redis = createRedisClient(url, options);
  let last: Error | undefined;
  const remember = (err: Error) => (last = err);
  redis.on("error", remember);
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    const why = last?.message ?? (err as Error).message;
    throw new Error(`REDIS_URL ${redactRedisUrl(url)}: cannot connect to Redis (${why})`, { cause: err });
  } finally {
    redis.off("error", remember);
  }
  return redis;
}

/**
 * Closes a client without ever rejecting: `QUIT` when connected (replies still due arrive
 * first), otherwise it stops reconnecting at once. `quit()` alone rejects while Redis is down
 * (there is no offline queue), which would fail a shutdown and skip what closes after it.
 */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === "ready") {
    try {
      await redis.quit();
      return;
    } catch {
      // The link dropped meanwhile: disconnect below.
    }
  }
  redis.disconnect();
}
