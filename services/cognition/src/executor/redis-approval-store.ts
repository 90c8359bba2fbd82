import { assertTenantId, ChaosError } from "@chaos-core/kit";
import type { Redis } from "ioredis";
import {
  approvalNotFound,
  assertNewApproval,
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
  /** Prepended to every key, e.g. `chaoscore:`; keys then read `<prefix><tenant>:approval:<approvalId>`. */
  prefix?: string;
}

// A hash per approval: `record` (the immutable approval as JSON), `status`, then `resolution`
// (JSON) and `consumedAt` as they are set. Redis expires the whole hash.
const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'record', ARGV[1], 'status', 'pending')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

// Compare-and-set of the status: nil when the key is gone, 'ok' when it moved, else the status found.
const TRANSITION = `
local s = redis.call('HGET', KEYS[1], 'status')
if not s then return false end
if s ~= ARGV[1] then return s end
redis.call('HSET', KEYS[1], 'status', ARGV[2], ARGV[3], ARGV[4])
return 'ok'`;

const STATUSES: readonly string[] = ["pending", "approved", "rejected", "consumed"];

/**
 * An {@link ApprovalStore} on Redis, shared by every cognition replica. The key names the tenant,
 * so an approval is reachable only from its own tenant; transitions are Lua compare-and-set
 * scripts, so of two concurrent resolves (or consumes) exactly one wins, on any replica.
 */
export function createRedisApprovalStore(redis: Redis, options: RedisApprovalStoreOptions = {}): ApprovalStore {
  const prefix = options.prefix ?? "chaoscore:";
  const now = options.now ?? Date.now;
  const ttlMs = resolveTtlSeconds(options.ttlSeconds) * 1000;
  // Approval ids are UUIDs (no `:`), checked before they reach a key.
  const keyOf = (tenant: string, id: string) => `${prefix}${tenant}:approval:${id}`;

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
    const res = (await redis.eval(TRANSITION, 1, keyOf(tenant, approvalId), from, to, field, value)) as string | null;
    if (res === null) throw approvalNotFound(approvalId);
    if (res !== "ok") throw wrongState(approvalId, res, wanted);
  }

  return {
    async create(approval) {
      assertNewApproval(approval);
      const at = now();
      const record = { ...approval, createdAt: new Date(at).toISOString(), expiresAt: new Date(at + ttlMs).toISOString() };
      const created = await redis.eval(CREATE, 1, keyOf(approval.call.tenant, approval.approvalId), JSON.stringify(record), String(ttlMs));
      if (created !== 1) throw new ChaosError("already_exists", "an approval with this id exists");
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
  };
}
