import { ChaosError } from "./errors.js";

// Kept apart from redis.ts (the client) so that stores can map errors without loading ioredis.

/** Error messages of ioredis meaning "no connection to answer on", not "Redis refused the command". */
const CONNECTION_MESSAGES = [
  "Connection is closed.",
  "Stream isn't writeable and enableOfflineQueue options is false",
  "Command timed out",
  "Command aborted due to connection close",
  "Socket timeout",
  "connect ETIMEDOUT",
  "Ready check failed",
];

/** Replies with which Redis says it cannot serve right now (loading, a replica, a failover). */
const UNAVAILABLE_REPLIES = /^(LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|BUSY|NOREPLICAS|OOM)\b/;

const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

/** Whether `err` is Redis being out of reach (or refusing to serve for now), as ioredis reports it. */
export function isRedisOutage(err: unknown): boolean {
  if (!(err instanceof Error) || err instanceof ChaosError) return false;
  if (err.name === "MaxRetriesPerRequestError") return true;
  if (err.name === "ReplyError") return UNAVAILABLE_REPLIES.test(err.message);
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== undefined && NETWORK_CODES.has(code)) return true;
  return CONNECTION_MESSAGES.some((m) => err.message.startsWith(m));
}

/**
 * The error a caller sees when `what` (e.g. "the plan store") needs Redis and Redis cannot be
 * reached: `unavailable`, naming Redis, with the ioredis error kept as the cause (for logs).
 */
export function redisUnavailable(what: string, cause: unknown): ChaosError {
  return new ChaosError("unavailable", `Redis is unavailable: ${what} cannot be reached, so this call was refused; try again shortly`, {
    cause,
  });
}

/**
 * Wraps every method of a Redis-backed store so that a Redis outage rejects as
 * {@link redisUnavailable} (fail closed, naming Redis) instead of an unnamed internal error.
 * Anything else the store throws passes through unchanged. Non-function members are copied.
 */
export function failClosedOnRedisOutage<T extends object>(store: T, what: string): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, member] of Object.entries(store)) {
    if (typeof member !== "function") {
      wrapped[name] = member;
      continue;
    }
    const method = member as (...args: unknown[]) => unknown;
    wrapped[name] = async (...args: unknown[]) => {
      try {
        return await method.apply(store, args);
      } catch (err) {
        throw isRedisOutage(err) ? redisUnavailable(what, err) : err;
      }
    };
  }
  return wrapped as T;
}
