import type { Redis } from "ioredis";
import type { EventStore } from "@modelcontextprotocol/server";
import { ChaosError, type CallContext, type Logger } from "@chaos-core/kit";
import type { CouncilClient, PolicyClient } from "../clients/service-clients.js";
import type { UpstreamCatalog } from "../clients/upstream-catalog.js";
import { createRedisLegacyRelay, type LegacyRelay } from "./legacy-relay.js";
import { createMemoryEventBuses, createRedisEventBuses, type TenantEventBuses } from "./bus.js";
import { createMemoryEventStore, createRedisEventStore } from "./event-store.js";

/** The URI of the tenant's live policy document (resources/chaoscore.ts). */
export const POLICY_URI = "chaoscore://policy";

/** The URIs of a council session and of its phase brief (resources/council.ts). */
export function councilUris(sessionId: string): string[] {
  return [`council://sessions/${sessionId}`, `council://sessions/${sessionId}/brief`];
}

/**
 * What the edge's streams are built on (docs/protocol.md §9, §10): the per-tenant change-event
 * buses and the SSE event store of each 2025-11-25 session. With Redis both span the replicas;
 * without it, both live in this process.
 */
export interface EdgeEvents {
  readonly buses: TenantEventBuses;
  /** `"redis"` or `"in-process"`, for the start-up line. */
  readonly kind: "redis" | "in-process";
  /** The event store of one session's SSE streams. */
  eventStore(tenant: string, sessionId: string): EventStore;
  /**
   * The 2025-11-25 relay between replicas (docs/protocol.md §8), with Redis only: without it one
   * process serves every session, and nothing needs relaying.
   */
  readonly relay?: LegacyRelay;
  close(): Promise<void>;
}

/** Streams in this process: one replica serves every session (no `REDIS_URL`). */
export function createMemoryEdgeEvents(logger: Logger): EdgeEvents {
  const buses = createMemoryEventBuses(logger);
  return { buses, kind: "in-process", eventStore: () => createMemoryEventStore(), close: () => buses.close() };
}

/**
 * Streams on Redis, shared by every replica. `ttlSeconds` is the session TTL (a stream's events
 * expire with it); `prefix` starts every key and channel, as the session store's do.
 */
export async function createRedisEdgeEvents(redis: Redis, options: { prefix: string; ttlSeconds: number; logger: Logger }): Promise<EdgeEvents> {
  const buses = await createRedisEventBuses(redis, { prefix: options.prefix, logger: options.logger });
  const relay = await createRedisLegacyRelay(redis, { prefix: options.prefix, logger: options.logger });
  return {
    buses,
    kind: "redis",
    eventStore: (tenant, sessionId) =>
      createRedisEventStore(redis, { tenant, sessionId, prefix: options.prefix, ttlSeconds: options.ttlSeconds, logger: options.logger }),
    relay,
    close: async () => {
      await Promise.all([buses.close(), relay.close()]);
    },
  };
}

/** Who the edge's own background reads run as: never a person, never a client's key. */
const WATCHER = "chaos-core-edge:events";

/** How long one policy watch call runs before it is made again (its deadline). */
const WATCH_ROUND_MS = 10 * 60_000;
/** The pause before a failed watch is tried again, doubling up to {@link WATCH_RETRY_MAX_MS}. */
const WATCH_RETRY_MS = 1_000;
const WATCH_RETRY_MAX_MS = 30_000;

/**
 * The policy publisher: while a tenant has a listener on this replica (an open listen stream, a
 * 2025-11-25 session held here), the tenant's policy is watched (`PolicyService.WatchPolicy`), and
 * each new version is published as `resources/updated` for {@link POLICY_URI}. Every replica
 * watching the same policy store sees the same version; it is published once (its once-key is
 * the version and time). The first snapshot a watch answers is the one in force when it started,
 * not a change: it is published only when it differs from the last one this replica saw (a
 * change made while the watch was down).
 */
export function startPolicyWatches(policy: PolicyClient, buses: TenantEventBuses, logger: Logger): { close(): void } {
  const running = new Map<string, AbortController>();
  const seen = new Map<string, string>();

  const watch = async (tenant: string, signal: AbortSignal) => {
    const ctx: CallContext = { tenant, principal: WATCHER };
    let retryMs = WATCH_RETRY_MS;
    while (!signal.aborted) {
      try {
        for await (const snapshot of policy.watchPolicy({}, { ctx, signal, timeoutMs: WATCH_ROUND_MS })) {
          retryMs = WATCH_RETRY_MS;
          const at = snapshot.updatedAt ? `${snapshot.updatedAt.seconds}.${snapshot.updatedAt.nanos}` : "";
          const key = `policy:${snapshot.version}:${at}`;
          const previous = seen.get(tenant);
          seen.set(tenant, key);
          if (previous === undefined || previous === key) continue;
          await buses
            .publish(tenant, { kind: "resource_updated", uri: POLICY_URI }, key)
            .catch((err: unknown) => logger.warn({ err, tenant }, "publishing a policy change failed"));
        }
      } catch (err) {
        if (signal.aborted) return;
        const e = ChaosError.from(err);
        // A round past its deadline is the normal end of one watch call: start the next at once.
        if (e.code === "deadline_exceeded") continue;
        logger.warn({ err: e.message, code: e.code, tenant, retryMs }, "watching the policy for change events failed; retrying");
        await new Promise((resolve) => setTimeout(resolve, retryMs).unref());
        retryMs = Math.min(retryMs * 2, WATCH_RETRY_MAX_MS);
      }
    }
  };

  const start = (tenant: string) => {
    if (running.has(tenant)) return;
    const stop = new AbortController();
    running.set(tenant, stop);
    void watch(tenant, stop.signal);
  };
  buses.onActivity((tenant, active) => {
    if (active) return start(tenant);
    running.get(tenant)?.abort();
    running.delete(tenant);
  });
  for (const tenant of buses.activeTenants()) start(tenant);
  return {
    close() {
      for (const stop of running.values()) stop.abort();
      running.clear();
    },
  };
}

/**
 * The council client, publishing what changes a tenant's council resources: a new session
 * (`Init`: the resource list changed, and the session itself), a saved phase or a score (the
 * session and its brief). Published after the call succeeded, as the caller's tenant; a failed
 * publish is logged and never fails the call (an event is a hint to read again).
 */
export function publishingCouncil(council: CouncilClient, buses: TenantEventBuses, logger: Logger): CouncilClient {
  const publish = (tenant: string, sessionId: string, listChanged: boolean) => {
    if (sessionId.length === 0) return;
    const events = [
      ...(listChanged ? [{ kind: "resources_list_changed" as const }] : []),
      ...councilUris(sessionId).map((uri) => ({ kind: "resource_updated" as const, uri })),
    ];
    for (const event of events) {
      buses.publish(tenant, event).catch((err: unknown) => logger.warn({ err, tenant, event: event.kind }, "publishing a council change failed"));
    }
  };
  return {
    ...council,
    async init(req, opts) {
      const res = await council.init(req, opts);
      publish(opts.ctx.tenant, res.sessionId, true);
      return res;
    },
    async save(req, opts) {
      const res = await council.save(req, opts);
      publish(opts.ctx.tenant, req.sessionId ?? "", false);
      return res;
    },
    async score(req, opts) {
      const res = await council.score(req, opts);
      publish(opts.ctx.tenant, res.sessionId || (req.sessionId ?? ""), false);
      return res;
    },
  };
}

/**
 * The upstream tools publisher (docs/federation.md §6): when what cognition serves changes (a tool
 * pinned, approved, quarantined or gone), every tenant with a listener on this replica is told
 * `tools_list_changed`. The operator's upstreams are offered to every tenant, so every listening
 * tenant hears it. Each replica reads the catalog on its own and publishes what it sees; the
 * once-key is the new set's version, so a client hears one change once. Returns a function that stops it.
 */
export function publishUpstreamChanges(catalog: UpstreamCatalog, buses: TenantEventBuses, logger: Logger): () => void {
  // A tenant's own registry upstreams changed: that tenant alone hears it.
  return catalog.onChange((change, only) => {
    for (const tenant of only === undefined ? buses.activeTenants() : buses.activeTenants().filter((t) => t === only)) {
      buses
        .publish(tenant, { kind: "tools_list_changed" }, `tools:${change}`)
        .catch((err: unknown) => logger.warn({ err, tenant }, "publishing an upstream tools change failed"));
    }
  });
}
