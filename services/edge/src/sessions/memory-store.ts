import { assertTenantId } from "@chaos-core/kit";
import {
  DEFAULT_SESSION_TTL_SECONDS,
  type NewSessionRecord,
  sessionLimitReached,
  type SessionLimits,
  type SessionPatch,
  type SessionRecord,
  type SessionStore,
} from "./session-store.js";

interface Entry {
  record: SessionRecord;
  expiresAt: number;
}

/**
 * A {@link SessionStore} in this process, for standalone mode and stdio, where one process
 * serves every session. Expiry is checked on read, so no timer keeps the process alive.
 */
export function createMemorySessionStore(
  options: { ttlSeconds?: number; now?: () => number } = {},
): SessionStore {
  const ttlSeconds = options.ttlSeconds ?? DEFAULT_SESSION_TTL_SECONDS;
  const now = options.now ?? Date.now;
  const tenants = new Map<string, Map<string, Entry>>();

  function live(tenant: string, id: string): Entry | undefined {
    const sessions = tenants.get(tenant);
    const entry = sessions?.get(id);
    if (!entry) return undefined;
    if (entry.expiresAt <= now()) {
      sessions!.delete(id);
      return undefined;
    }
    return entry;
  }

  function put(record: SessionRecord): SessionRecord {
    let sessions = tenants.get(record.tenant);
    if (!sessions) tenants.set(record.tenant, (sessions = new Map()));
    sessions.set(record.id, { record, expiresAt: now() + ttlSeconds * 1000 });
    return record;
  }

  return {
    ttlSeconds,
    async create(record: NewSessionRecord, limits: SessionLimits = {}) {
      // The same rule as the Redis store, so a tenant id that works here works there.
      assertTenantId(record.tenant);
      const max = limits.maxPerPrincipal;
      if (max !== undefined) {
        const held = [...(tenants.get(record.tenant)?.keys() ?? [])].filter(
          (id) => live(record.tenant, id)?.record.principal === record.principal,
        ).length;
        if (held >= max) throw sessionLimitReached(record, max);
      }
      const at = new Date(now()).toISOString();
      return put({ ...record, createdAt: at, lastSeenAt: at });
    },
    async get(tenant, id) {
      return live(tenant, id)?.record;
    },
    async touch(tenant, id) {
      const entry = live(tenant, id);
      return entry ? put({ ...entry.record, lastSeenAt: new Date(now()).toISOString() }) : undefined;
    },
    async update(tenant, id, patch: SessionPatch) {
      const entry = live(tenant, id);
      if (!entry) return undefined;
      const { subscribe, unsubscribe, ...fields } = patch;
      const subscriptions = new Set(entry.record.subscriptions ?? []);
      if (subscribe !== undefined) subscriptions.add(subscribe);
      if (unsubscribe !== undefined) subscriptions.delete(unsubscribe);
      // As the Redis store reads it back: no field while the session subscribes to nothing.
      const { subscriptions: _held, ...rest } = entry.record;
      const record: SessionRecord = { ...rest, ...fields, ...(subscriptions.size > 0 ? { subscriptions: [...subscriptions] } : {}) };
      tenants.get(tenant)!.set(id, { record, expiresAt: entry.expiresAt });
      return record;
    },
    async delete(tenant, id) {
      const existed = live(tenant, id) !== undefined;
      tenants.get(tenant)?.delete(id);
      return existed;
    },
    async listByTenant(tenant) {
      const sessions = tenants.get(tenant);
      if (!sessions) return [];
      return [...sessions.keys()]
        .map((id) => live(tenant, id)?.record)
        .filter((r): r is SessionRecord => r !== undefined)
        .sort((a, b) => a.createdAt.localeCompare(b.createdAt));
    },
    async ping() {},
  };
}
