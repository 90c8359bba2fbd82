import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import type { JSONRPCMessage } from "@modelcontextprotocol/server";
import { assertTenantId, ChaosError, isRedisOutage, redisUnavailable, type Logger, tenantKeyPrefix } from "@chaos-core/kit";

/**
 * The 2025-11-25 relay between edge replicas (docs/protocol.md §8). A server→client request
 * (an elicitation) goes out on the stream of the replica running the call; the client's answer is
 * a new POST the load balancer may send to any replica. Each replica has an id, every request it
 * sends a session carries that id in its JSON-RPC id (`<replica>.<n>`), and a replica that gets
 * an answer naming another replica passes it over Redis pub/sub to that one
 * (`<prefix>mcp-relay:<replica>`), which hands it to the session's transport as if it had been
 * posted there. A `notifications/cancelled` for a request running on another replica goes the
 * same way, found by the request's in-flight key (`<prefix><tenant>:mcp-inflight:<session>:<id>`).
 * Legacy only: 2026-07-28 has no server→client requests (MRTR).
 */

/** A message on its way to the replica that holds the session's pending request. */
export interface RelayedMessage {
  readonly tenant: string;
  readonly sessionId: string;
  readonly protocolVersion: string;
  readonly message: JSONRPCMessage;
}

export interface LegacyRelay {
  /** This replica's id, `edge-<16 hex>`. */
  readonly replica: string;
  /** Where messages relayed to this replica go (one handler: the session table's). */
  onMessage(handler: (relayed: RelayedMessage) => void): void;
  /** Passes a message to `owner`; rejects `unavailable` while Redis cannot be reached. */
  send(owner: string, relayed: RelayedMessage): Promise<void>;
  /**
   * Notes that a client request of a session runs here (for its `notifications/cancelled`) once
   * it has run {@link INFLIGHT_MARK_AFTER_MS}: most calls are answered sooner and cost Redis nothing.
   */
  markInflight(tenant: string, sessionId: string, requestId: string | number): void;
  /** Forgets it once answered. */
  clearInflight(tenant: string, sessionId: string, requestId: string | number): void;
  /**
   * The replica running a client request of a session, if any is. A request not yet noted (it
   * started less than {@link INFLIGHT_MARK_AFTER_MS} ago on another replica) is looked for once
   * more after {@link INFLIGHT_LOOK_AGAIN_MS}.
   */
  inflightOwner(tenant: string, sessionId: string, requestId: string | number): Promise<string | undefined>;
  close(): Promise<void>;
}

/** A server→client request id this relay wrote: `<replica>.<n>`. */
const WIRE_ID_RE = /^(edge-[0-9a-f]{16})\.(\d{1,15})$/;

/** The replica and the SDK's own id in a server→client request id, when a relay wrote it. */
export function parseWireId(id: unknown): { replica: string; id: number } | undefined {
  if (typeof id !== "string") return undefined;
  const match = WIRE_ID_RE.exec(id);
  return match ? { replica: match[1]!, id: Number(match[2]) } : undefined;
}

/** The id a server→client request of `replica` goes out with. */
export function wireId(replica: string, id: string | number): string {
  return `${replica}.${id}`;
}

/** How long an in-flight key outlives a request that never answered (the longest tool wait, and some). */
export const INFLIGHT_TTL_MS = 15 * 60_000;

/**
 * How long a call runs before its in-flight key is written. A call answered sooner (nearly all
 * of them) writes and deletes nothing: two Redis round trips per call saved (issue 14), and a
 * cancellation of a call that short would come too late anyway.
 */
export const INFLIGHT_MARK_AFTER_MS = 100;

/** How long a lookup that found no owner waits before its second look: past the mark's delay and its write. */
export const INFLIGHT_LOOK_AGAIN_MS = 250;

/** The relay a message arriving on this replica's channel is checked against. */
function relayedOf(payload: string): RelayedMessage | undefined {
  try {
    const parsed = JSON.parse(payload) as Partial<RelayedMessage>;
    if (typeof parsed.tenant !== "string" || typeof parsed.sessionId !== "string" || typeof parsed.protocolVersion !== "string") return undefined;
    if (typeof parsed.message !== "object" || parsed.message === null) return undefined;
    return parsed as RelayedMessage;
  } catch {
    return undefined;
  }
}

/**
 * The relay over Redis: `redis` publishes and keeps the in-flight keys; a duplicate of it,
 * connected here, listens on this replica's channel.
 */
export async function createRedisLegacyRelay(redis: Redis, options: { prefix: string; logger: Logger }): Promise<LegacyRelay> {
  const { prefix, logger } = options;
  const replica = `edge-${randomBytes(8).toString("hex")}`;
  const channel = (r: string) => `${prefix}mcp-relay:${r}`;
  const inflightKey = (tenant: string, sessionId: string, requestId: string | number) => {
    assertTenantId(tenant);
    return `${tenantKeyPrefix(prefix, tenant)}mcp-inflight:${sessionId}:${typeof requestId}:${requestId}`;
  };
  const subscriber = redis.duplicate({ connectionName: "chaos-core-edge-relay", lazyConnect: true });
  subscriber.on("error", () => {});
  await subscriber.connect();
  await subscriber.subscribe(channel(replica));
  let handler: ((relayed: RelayedMessage) => void) | undefined;
  subscriber.on("message", (_ch: string, payload: string) => {
    const relayed = relayedOf(payload);
    if (!relayed) return logger.warn({ replica }, "dropped a relayed message that is none");
    handler?.(relayed);
  });
  /** Calls running here not yet noted in Redis, by in-flight key: their mark's timer. */
  const pending = new Map<string, NodeJS.Timeout>();
  /** Calls running here whose in-flight key was written (to delete when answered): the timer that forgets one never answered. */
  const noted = new Map<string, NodeJS.Timeout>();
  const outage = (err: unknown) => (isRedisOutage(err) ? redisUnavailable("the relay between edge replicas", err) : ChaosError.from(err));

  return {
    replica,
    onMessage(h) {
      handler = h;
    },
    async send(owner, relayed) {
      try {
        await redis.publish(channel(owner), JSON.stringify(relayed));
      } catch (err) {
        throw outage(err);
      }
    },
    markInflight(tenant, sessionId, requestId) {
      const key = inflightKey(tenant, sessionId, requestId);
      clearTimeout(pending.get(key));
      const timer = setTimeout(() => {
        pending.delete(key);
        // A call never answered (its session went away) is forgotten here when its key expires.
        noted.set(key, setTimeout(() => noted.delete(key), INFLIGHT_TTL_MS).unref());
        redis.set(key, replica, "PX", INFLIGHT_TTL_MS).catch((err: unknown) => {
          // Only a cancellation from another replica needs it; the request itself runs on.
          logger.debug({ err, tenant, session: sessionId }, "noting an in-flight request failed");
        });
      }, INFLIGHT_MARK_AFTER_MS);
      timer.unref();
      pending.set(key, timer);
    },
    clearInflight(tenant, sessionId, requestId) {
      const key = inflightKey(tenant, sessionId, requestId);
      const timer = pending.get(key);
      if (timer) {
        clearTimeout(timer);
        pending.delete(key);
      }
      const forget = noted.get(key);
      if (!forget) return;
      clearTimeout(forget);
      noted.delete(key);
      // Sent after the SET on the same connection, so it lands after it.
      redis.del(key).catch(() => {});
    },
    async inflightOwner(tenant, sessionId, requestId) {
      const key = inflightKey(tenant, sessionId, requestId);
      if (pending.has(key)) return replica;
      try {
        const owner = await redis.get(key);
        if (owner !== null) return owner;
        await new Promise((resolve) => setTimeout(resolve, INFLIGHT_LOOK_AGAIN_MS));
        if (pending.has(key)) return replica;
        return (await redis.get(key)) ?? undefined;
      } catch (err) {
        throw outage(err);
      }
    },
    async close() {
      for (const timer of [...pending.values(), ...noted.values()]) clearTimeout(timer);
      pending.clear();
      noted.clear();
      subscriber.disconnect();
    },
  };
}
