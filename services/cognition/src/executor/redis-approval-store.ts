import { assertTenantId, ChaosError, failClosedOnRedisOutage, tenantKeyPrefix } from "@chaos-core/kit";
import type { Redis } from "ioredis";
import {
  approvalNotFound,
  assertListLimit,
  assertNewApproval,
  byExpiry,
  checkResolver,
  isApprovalId,
  parseStoredRecord,
  parseStoredResolution,
  resolutionOf,
  resolveTtlSeconds,
  wrongState,
  type ApprovalStatus,
  type ApprovalStore,
  type ApprovalStoreOptions,
  type StoredApproval,
} from "./approvals.js";

/** Key layout of the Redis approval store. */
export interface RedisApprovalStoreOptions extends ApprovalStoreOptions {
  /**
   * Prepended to every key, e.g. `chaoscore:`; keys then read `<prefix><tenant>:approval:<approvalId>`,
   * and the tenant's index of pending approvals `<prefix><tenant>:approvals:pending`.
   */
  prefix?: string;
}

// A hash per approval: `record` (the immutable approval as JSON), `status`, then `resolution`
// (JSON) and `consumedAt` as they are set. Redis expires the whole hash. The tenant's pending
// approvals are indexed in a sorted set (member the id, score the expiry in ms): a transition out
// of `pending` removes its member, expired members are pruned when the index is read, and the
// set itself expires with the newest approval it holds.
const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'record', ARGV[1], 'status', 'pending')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
return 1`;

// Compare-and-set of the status: nil when the key is gone, 'ok' when it moved, else the status found.
const TRANSITION = `
local s = redis.call('HGET', KEYS[1], 'status')
if not s then return false end
if s ~= ARGV[1] then return s end
redis.call('HSET', KEYS[1], 'status', ARGV[2], ARGV[3], ARGV[4])
if ARGV[1] == 'pending' then redis.call('ZREM', KEYS[2], ARGV[5]) end
return 'ok'`;

/** How many index members one read of the pending index fetches. */
const INDEX_BATCH = 100;

const STATUSES: readonly string[] = ["pending", "approved", "rejected", "consumed"];

/**
 * An {@link ApprovalStore} on Redis, shared by every cognition replica. The key names the tenant,
 * so an approval is reachable only from its own tenant; transitions are Lua compare-and-set
 * scripts, so of two concurrent resolves (or consumes) exactly one wins, on any replica. While
 * Redis cannot be reached, every method rejects at once with `unavailable` naming Redis.
 */
export function createRedisApprovalStore(redis: Redis, options: RedisApprovalStoreOptions = {}): ApprovalStore {
  const prefix = options.prefix ?? "chaoscore:";
  const now = options.now ?? Date.now;
  const ttlMs = resolveTtlSeconds(options.ttlSeconds) * 1000;
  // Approval ids are UUIDs (no `:`), checked before they reach a key.
  const keyOf = (tenant: string, id: string) => `${tenantKeyPrefix(prefix, tenant)}approval:${id}`;
  const indexOf = (tenant: string) => `${tenantKeyPrefix(prefix, tenant)}approvals:pending`;

  async function read(tenant: string, approvalId: string): Promise<StoredApproval | undefined> {
    assertTenantId(tenant);
    if (!isApprovalId(approvalId)) return undefined;
    const fields = await redis.hgetall(keyOf(tenant, approvalId));
    if (fields.record === undefined) return undefined;
    const record = parseStoredRecord(fields.record, tenant, approvalId);
    const status = fields.status ?? "";
    if (!STATUSES.includes(status)) throw new ChaosError("internal", "a stored approval could not be read");
    if (Date.parse(record.expiresAt) <= now()) return undefined;
    return {
      ...record,
      status: status as ApprovalStatus,
      ...(fields.resolution !== undefined ? { resolution: parseStoredResolution(fields.resolution) } : {}),
      ...(fields.consumedAt !== undefined ? { consumedAt: fields.consumedAt } : {}),
    };
  }

  async function transition(
    tenant: string,
    approvalId: string,
    from: ApprovalStatus,
    to: ApprovalStatus,
    field: string,
    value: string,
    wanted: "resolve" | "consume",
  ): Promise<void> {
    const res = (await redis.eval(TRANSITION, 2, keyOf(tenant, approvalId), indexOf(tenant), from, to, field, value, approvalId)) as
      | string
      | null;
    if (res === null) throw approvalNotFound(approvalId);
    if (res !== "ok") throw wrongState(approvalId, res, wanted);
  }

  return failClosedOnRedisOutage<ApprovalStore>({
    async create(approval) {
      assertNewApproval(approval);
      const at = now();
      const record = { ...approval, createdAt: new Date(at).toISOString(), expiresAt: new Date(at + ttlMs).toISOString() };
      const tenant = approval.call.tenant;
      const created = await redis.eval(
        CREATE,
        2,
        keyOf(tenant, approval.approvalId),
        indexOf(tenant),
        JSON.stringify(record),
        String(ttlMs),
        String(at + ttlMs),
        approval.approvalId,
      );
      if (created !== 1) throw new ChaosError("already_exists", "an approval with this id exists");
      return { ...structuredClone(approval), status: "pending", createdAt: record.createdAt, expiresAt: record.expiresAt };
    },

    get: read,

    async resolve(tenant, approvalId, input) {
      const found = await read(tenant, approvalId);
      if (!found) throw approvalNotFound(approvalId);
      // The requester a rule compares against is immutable, so checking before the atomic
      // status change is sound; the change itself is the compare-and-set.
      checkResolver(found, input);
      if (found.status !== "pending") throw wrongState(approvalId, found.status, "resolve");
      const resolution = resolutionOf(input, now());
      const status: ApprovalStatus = input.approve ? "approved" : "rejected";
      await transition(tenant, approvalId, "pending", status, "resolution", JSON.stringify(resolution), "resolve");
      return { ...found, status, resolution };
    },

    async consume(tenant, approvalId) {
      const found = await read(tenant, approvalId);
      if (!found) throw approvalNotFound(approvalId);
      if (found.status !== "approved") throw wrongState(approvalId, found.status, "consume");
      const consumedAt = new Date(now()).toISOString();
      await transition(tenant, approvalId, "approved", "consumed", "consumedAt", consumedAt, "consume");
      return { ...found, status: "consumed", consumedAt };
    },

    async listPending(tenant, limit) {
      assertTenantId(tenant);
      assertListLimit(limit);
      const index = indexOf(tenant);
      const at = now();
      // Lazy pruning: members whose approval has expired go first.
      await redis.zremrangebyscore(index, "-inf", at);
      const found: StoredApproval[] = [];
      const stale: string[] = [];
      for (let offset = 0; found.length < limit; ) {
        const ids = await redis.zrangebyscore(index, `(${at}`, "+inf", "LIMIT", offset, INDEX_BATCH);
        if (ids.length === 0) break;
        offset += ids.length;
        const reads = await Promise.all(ids.map((id) => read(tenant, id)));
        reads.forEach((a, i) => (a?.status === "pending" ? found.push(a) : stale.push(ids[i]!)));
      }
      // A member whose approval is gone or no longer pending is dropped from the index.
      if (stale.length > 0) await redis.zrem(index, ...stale);
      return found.sort(byExpiry).slice(0, limit);
    },
  }, "the approval store");
}
