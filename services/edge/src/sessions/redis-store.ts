import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import type { LoggingLevel } from "@modelcontextprotocol/server";
import { assertTenantId, failClosedOnRedisOutage, tenantKeyPrefix } from "@chaos-core/kit";
import {
  DEFAULT_SESSION_TTL_SECONDS,
  sessionLimitReached,
  type NewSessionRecord,
  type SessionLimits,
  type SessionPatch,
  type SessionRecord,
  type SessionStore,
} from "./session-store.js";

/** Key layout and idle TTL of the Redis session store. */
export interface RedisSessionStoreOptions {
  /** Prepended to every key, e.g. `chaoscore:`; keys then read `<prefix><tenant>:mcp-session:<id>`. */
  prefix?: string;
  ttlSeconds?: number;
}

// A session is a hash: the fields fixed at initialize as one JSON value, and the two that change
// (`lastSeenAt`, `logLevel`) beside it, so a touch never rewrites (or re-encodes) the record.
// Two sorted sets (member: the session id, score: its expiry in ms) index the live sessions: the
// tenant's, to list them, and the principal's (`principalIndex`, its key kept in the hash), to
// count them against the per-key cap. Every key of a session starts with `<prefix><tenant>:`;
// the touch and delete scripts reach the principal's set through the name stored in the hash,
// which is fine on one Redis node (the store already uses MULTI across these keys).

/** Creates a session unless its principal already holds `ARGV[5]` (0: no cap) live ones. */
const CREATE = `
if tonumber(ARGV[5]) > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[1])
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then return 0 end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 6))
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[3], ARGV[2])
return 1
`;

/** Renews a live session; a missing key stays missing (HSET alone would resurrect it). */
const TOUCH = `
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
redis.call('HSET', KEYS[1], 'lastSeenAt', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[2])
local principal = redis.call('HGET', KEYS[1], 'principalIndex')
if principal then
  redis.call('ZADD', principal, ARGV[3], ARGV[4])
  redis.call('EXPIRE', principal, ARGV[2])
end
return redis.call('HGETALL', KEYS[1])
`;

/** Deletes a session and its index entries; 1 when it existed. */
const DELETE = `
local principal = redis.call('HGET', KEYS[1], 'principalIndex')
local existed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if principal then redis.call('ZREM', principal, ARGV[1]) end
return existed
`;

/**
 * Patches a live session without renewing it: ARGV[1] a field to set ('' for none) and ARGV[2]
 * its value, ARGV[3] a field to delete ('' for none).
 */
const PATCH = `
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HDEL', KEYS[1], ARGV[3]) end
return redis.call('HGETALL', KEYS[1])
`;

/** A subscription is a field of the session's hash, so a subscribe on one replica never overwrites another's. */
const SUBSCRIPTION_FIELD = "sub:";

function fromHash(hash: Record<string, string>): SessionRecord | undefined {
  if (!hash.record) return undefined;
  const fixed = JSON.parse(hash.record) as Omit<SessionRecord, "lastSeenAt" | "logLevel" | "subscriptions">;
  const subscriptions = Object.keys(hash)
    .filter((field) => field.startsWith(SUBSCRIPTION_FIELD))
    .map((field) => field.slice(SUBSCRIPTION_FIELD.length));
  return {
    ...fixed,
    lastSeenAt: hash.lastSeenAt ?? fixed.createdAt,
    ...(hash.logLevel ? { logLevel: hash.logLevel as LoggingLevel } : {}),
    ...(subscriptions.length > 0 ? { subscriptions } : {}),
  };
}

/** HGETALL through EVAL comes back as a flat [field, value, ...] list. */
function pairsToHash(pairs: unknown): Record<string, string> {
  const hash: Record<string, string> = {};
  if (!Array.isArray(pairs)) return hash;
  for (let i = 0; i + 1 < pairs.length; i += 2) hash[String(pairs[i])] = String(pairs[i + 1]);
  return hash;
}

/**
 * A {@link SessionStore} on Redis, shared by every edge replica: a session created on one
 * replica can be served by another. Keys are prefixed by tenant and expire after `ttlSeconds`
 * without a touch. While Redis cannot be reached every method rejects at once with
 * `unavailable` naming Redis (kit's client options and {@link failClosedOnRedisOutage}).
 */
export function createRedisSessionStore(redis: Redis, options: RedisSessionStoreOptions = {}): SessionStore {
  const prefix = options.prefix ?? "chaoscore:";
  const ttlSeconds = options.ttlSeconds ?? DEFAULT_SESSION_TTL_SECONDS;

  const keys = (tenant: string, id: string) => {
    assertTenantId(tenant);
    return { session: `${tenantKeyPrefix(prefix, tenant)}mcp-session:${id}`, index: `${tenantKeyPrefix(prefix, tenant)}mcp-sessions` };
  };
  // A principal is any string the operator chose: hashed, it cannot reach outside its tenant's keys.
  const principalIndex = (tenant: string, principal: string) =>
    `${tenantKeyPrefix(prefix, tenant)}mcp-sessions:principal:${createHash("sha256").update(principal, "utf8").digest("hex")}`;

  const get = async (tenant: string, id: string) => fromHash(await redis.hgetall(keys(tenant, id).session));

  return failClosedOnRedisOutage<SessionStore>({
    ttlSeconds,

    async create(record: NewSessionRecord, limits: SessionLimits = {}) {
      const k = keys(record.tenant, record.id);
      const byPrincipal = principalIndex(record.tenant, record.principal);
      const now = Date.now();
      const at = new Date(now).toISOString();
      const { logLevel, ...fixed } = record;
      const fields = ["record", JSON.stringify({ ...fixed, createdAt: at }), "lastSeenAt", at, "principalIndex", byPrincipal];
      if (logLevel) fields.push("logLevel", logLevel);
      const max = limits.maxPerPrincipal ?? 0;
      const created = await redis.eval(
        CREATE,
        3,
        k.session,
        k.index,
        byPrincipal,
        String(now),
        String(ttlSeconds),
        String(now + ttlSeconds * 1000),
        record.id,
        String(max),
        ...fields,
      );
      if (created !== 1) throw sessionLimitReached(record, max);
      return { ...record, createdAt: at, lastSeenAt: at };
    },

    get,

    async touch(tenant, id) {
      const k = keys(tenant, id);
      const now = Date.now();
      const pairs = await redis.eval(
        TOUCH,
        2,
        k.session,
        k.index,
        new Date(now).toISOString(),
        String(ttlSeconds),
        String(now + ttlSeconds * 1000),
        id,
      );
      return pairs ? fromHash(pairsToHash(pairs)) : undefined;
    },

    async update(tenant, id, patch: SessionPatch) {
      const session = keys(tenant, id).session;
      let pairs: unknown = undefined;
      if (patch.logLevel !== undefined) pairs = await redis.eval(PATCH, 1, session, "logLevel", patch.logLevel, "");
      if (patch.subscribe !== undefined) pairs = await redis.eval(PATCH, 1, session, `${SUBSCRIPTION_FIELD}${patch.subscribe}`, "1", "");
      if (patch.unsubscribe !== undefined) pairs = await redis.eval(PATCH, 1, session, "", "", `${SUBSCRIPTION_FIELD}${patch.unsubscribe}`);
      if (patch.logLevel === undefined && patch.subscribe === undefined && patch.unsubscribe === undefined) return get(tenant, id);
      return pairs ? fromHash(pairsToHash(pairs)) : undefined;
    },

    async delete(tenant, id) {
      const k = keys(tenant, id);
      return (await redis.eval(DELETE, 2, k.session, k.index, id)) === 1;
    },

    async listByTenant(tenant) {
      const k = keys(tenant, "");
      await redis.zremrangebyscore(k.index, "-inf", Date.now());
      const ids = await redis.zrange(k.index, 0, -1);
      if (ids.length === 0) return [];
      const pipeline = redis.pipeline();
      for (const id of ids) pipeline.hgetall(keys(tenant, id).session);
      const results = (await pipeline.exec()) ?? [];
      return results
        .map(([err, hash]) => (err ? undefined : fromHash(hash as Record<string, string>)))
        .filter((r): r is SessionRecord => r !== undefined)
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
    },

    async ping() {
      await redis.ping();
    },
  }, "the MCP session store");
}
