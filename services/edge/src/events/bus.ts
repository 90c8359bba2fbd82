import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import type { ServerEvent, ServerEventBus } from "@modelcontextprotocol/server";
import { assertTenantId, ChaosError, isRedisOutage, redisUnavailable, type Logger, tenantKeyPrefix } from "@chaos-core/kit";

/**
 * Change events per tenant (docs/protocol.md §9, §13 step 10): what a tenant's open
 * `subscriptions/listen` streams (2026-07-28) and the GET streams of its 2025-11-25 sessions
 * hear. A tenant has one bus; `chaoscore://policy` is the same URI in every tenant, so no stream
 * ever hears another tenant's events. With Redis the bus spans every replica (pub/sub on
 * `<prefix><tenant>:mcp-bus`): a change seen by one replica reaches the streams another holds.
 */
export interface TenantEventBuses {
  /** The tenant's bus, in the SDK's shape (`createMcpHandler({ bus })`, and the legacy sessions). */
  bus(tenant: string): ServerEventBus;
  /**
   * Publishes `event` to every listener of the tenant on every replica. With `onceKey` (a name of
   * the change itself, e.g. the policy version) it is published once however many replicas saw
   * the change: the first to claim the key publishes, for a minute. Rejects `unavailable` while
   * Redis cannot be reached.
   */
  publish(tenant: string, event: ServerEvent, onceKey?: string): Promise<void>;
  /** Called when a tenant gets its first listener on this replica (`true`) and loses its last (`false`). */
  onActivity(listener: (tenant: string, active: boolean) => void): void;
  /** Tenants with a listener on this replica. */
  activeTenants(): string[];
  close(): Promise<void>;
}

type Listener = (event: ServerEvent) => void;

const KINDS = new Set(["tools_list_changed", "prompts_list_changed", "resources_list_changed", "resource_updated"]);

/** The event in a bus message, or undefined for anything that is not one (the message is dropped). */
export function eventOf(payload: string): ServerEvent | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    return undefined;
  }
  const event = (parsed as { event?: unknown } | null)?.event as { kind?: unknown; uri?: unknown } | undefined;
  if (typeof event !== "object" || event === null || typeof event.kind !== "string" || !KINDS.has(event.kind)) return undefined;
  if (event.kind === "resource_updated") {
    return typeof event.uri === "string" && event.uri.length > 0 ? { kind: "resource_updated", uri: event.uri } : undefined;
  }
  return { kind: event.kind } as ServerEvent;
}

/** How long a once-key holds: a replica that sees the same change later than this publishes it again. */
export const ONCE_KEY_TTL_MS = 60_000;

/** The listeners of each tenant on this replica, and the activity callbacks; shared by both buses. */
class LocalListeners {
  private readonly tenants = new Map<string, Set<Listener>>();
  private readonly activity: ((tenant: string, active: boolean) => void)[] = [];

  constructor(private readonly logger: Logger) {}

  add(tenant: string, listener: Listener): () => void {
    let set = this.tenants.get(tenant);
    const first = !set;
    if (!set) this.tenants.set(tenant, (set = new Set()));
    // One function subscribed twice is two subscriptions: wrap it so each has its own identity.
    const entry: Listener = (event) => listener(event);
    set.add(entry);
    if (first) this.changed(tenant, true);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const current = this.tenants.get(tenant);
      if (!current?.delete(entry) || current.size > 0) return;
      this.tenants.delete(tenant);
      this.changed(tenant, false);
    };
  }

  deliver(tenant: string, event: ServerEvent): void {
    for (const listener of [...(this.tenants.get(tenant) ?? [])]) {
      try {
        listener(event);
      } catch (err) {
        this.logger.warn({ err, tenant, event: event.kind }, "a change-event listener failed");
      }
    }
  }

  has(tenant: string): boolean {
    return this.tenants.has(tenant);
  }

  list(): string[] {
    return [...this.tenants.keys()];
  }

  onActivity(listener: (tenant: string, active: boolean) => void): void {
    this.activity.push(listener);
  }

  private changed(tenant: string, active: boolean): void {
    for (const listener of this.activity) {
      try {
        listener(tenant, active);
      } catch (err) {
        this.logger.warn({ err, tenant }, "a change-event activity callback failed");
      }
    }
  }
}

function busOf(buses: TenantEventBuses, listeners: LocalListeners, tenant: string, logger: Logger): ServerEventBus {
  assertTenantId(tenant);
  return {
    publish(event) {
      buses.publish(tenant, event).catch((err: unknown) => logger.warn({ err, tenant, event: event.kind }, "publishing a change event failed"));
    },
    subscribe: (listener) => listeners.add(tenant, listener),
  };
}

/** The buses of one process (no `REDIS_URL`): delivered synchronously, to this replica's listeners. */
export function createMemoryEventBuses(logger: Logger): TenantEventBuses {
  const listeners = new LocalListeners(logger);
  const buses: TenantEventBuses = {
    bus: (tenant) => busOf(buses, listeners, tenant, logger),
    async publish(tenant, event) {
      assertTenantId(tenant);
      listeners.deliver(tenant, event);
    },
    onActivity: (listener) => listeners.onActivity(listener),
    activeTenants: () => listeners.list(),
    async close() {},
  };
  return buses;
}

/**
 * The buses over Redis pub/sub. `redis` publishes (and claims once-keys); a duplicate of it,
 * connected here, subscribes to the channel of each tenant with a listener on this replica, and
 * again after a reconnect. Every event comes back through Redis, the publisher's own included,
 * so every replica delivers alike. While Redis is down nothing is delivered (events are change
 * hints: a client reads the resource again when it hears one), and `publish` fails `unavailable`.
 */
export async function createRedisEventBuses(redis: Redis, options: { prefix: string; logger: Logger }): Promise<TenantEventBuses> {
  const { prefix, logger } = options;
  const listeners = new LocalListeners(logger);
  const channel = (tenant: string) => `${tenantKeyPrefix(prefix, tenant)}mcp-bus`;
  const tenantOf = new Map<string, string>();
  const subscriber = redis.duplicate({ connectionName: "chaos-core-edge-events", lazyConnect: true });
  // The client's own error lines are the command connection's (kit's logger); this one is quiet.
  subscriber.on("error", () => {});
  await subscriber.connect();

  const subscribe = (tenant: string) => {
    tenantOf.set(channel(tenant), tenant);
    subscriber.subscribe(channel(tenant)).catch((err: unknown) => {
      // Tried again when the connection is ready again.
      logger.warn({ err: (err as Error).message, tenant }, "subscribing to the change events of a tenant failed; retrying on reconnect");
    });
  };
  subscriber.on("ready", () => {
    for (const tenant of listeners.list()) subscribe(tenant);
  });
  subscriber.on("message", (ch: string, payload: string) => {
    const tenant = tenantOf.get(ch);
    if (tenant === undefined || !listeners.has(tenant)) return;
    const event = eventOf(payload);
    if (!event) return logger.warn({ tenant }, "dropped a change event that is no event");
    listeners.deliver(tenant, event);
  });
  listeners.onActivity((tenant, active) => {
    if (active) return subscribe(tenant);
    tenantOf.delete(channel(tenant));
    subscriber.unsubscribe(channel(tenant)).catch(() => {});
  });

  const buses: TenantEventBuses = {
    bus: (tenant) => busOf(buses, listeners, tenant, logger),
    async publish(tenant, event, onceKey) {
      assertTenantId(tenant);
      try {
        if (onceKey !== undefined) {
          const digest = createHash("sha256").update(onceKey, "utf8").digest("hex");
          const claimed = await redis.set(`${tenantKeyPrefix(prefix, tenant)}mcp-bus:once:${digest}`, "1", "PX", ONCE_KEY_TTL_MS, "NX");
          if (claimed === null) return;
        }
        await redis.publish(channel(tenant), JSON.stringify({ v: 1, event }));
      } catch (err) {
        if (isRedisOutage(err)) throw redisUnavailable("the change-event bus", err);
        throw ChaosError.from(err);
      }
    },
    onActivity: (listener) => listeners.onActivity(listener),
    activeTenants: () => listeners.list(),
    async close() {
      subscriber.disconnect();
    },
  };
  return buses;
}
