import type { Redis } from "ioredis";
import type { EventId, EventStore, JSONRPCMessage, StreamId } from "@modelcontextprotocol/server";
import { assertTenantId, failClosedOnRedisOutage, isRedisOutage, type Logger, tenantKeyPrefix } from "@chaos-core/kit";

/**
 * Resumable 2025-11-25 SSE streams (docs/protocol.md §10): the SDK's `EventStore` for one MCP
 * session. The SDK stores every message it writes on a session's streams here, and the priming
 * event (SEP-1699) each stream opens with; a client that reconnects with `Last-Event-ID` is sent
 * what followed that event, from the store, by whichever replica it reaches.
 *
 * An event id is `<streamId>:<position>`: the stream comes back from the id alone (the SDK asks
 * for it before replaying), and an id names only a stream of the session its store was made for.
 */

/** Most events kept per stream (Redis `MAXLEN ~`, so a few more at times); older ones are gone. */
export const EVENTS_PER_STREAM = 1000;

/** Most streams one session keeps in process; the oldest is dropped beyond it. */
export const MEMORY_STREAMS_PER_SESSION = 100;

/** The stream ids the SDK makes: a UUID per POST, and the session's one GET stream. */
const STREAM_ID_RE = /^(?:_GET_stream|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
/** A Redis stream entry id (`<ms>-<seq>`); the in-process store writes the same shape. */
const POSITION_RE = /^\d{1,20}-\d{1,20}$/;

/** The stream and position an event id names, or undefined for anything this store never wrote. */
export function parseEventId(eventId: EventId): { streamId: StreamId; position: string } | undefined {
  const at = eventId.lastIndexOf(":");
  if (at <= 0) return undefined;
  const streamId = eventId.slice(0, at);
  const position = eventId.slice(at + 1);
  return STREAM_ID_RE.test(streamId) && POSITION_RE.test(position) ? { streamId, position } : undefined;
}

/** The priming event is stored as `{}` (the SDK's own choice): it marks a position, and is never replayed. */
function isPriming(message: JSONRPCMessage): boolean {
  return typeof message !== "object" || message === null || !("jsonrpc" in message);
}

/** The session's one GET stream: reopened by the client, so its priming events mark positions inside it. */
const GET_STREAM = "_GET_stream";

/**
 * The id of a POST stream's priming event, which opens the stream: "before everything in it". A
 * client resuming from it is replayed every event of the stream, as it would be from a stored
 * priming event, and the store is spared a write per POST (issue 14: one Redis round trip fewer
 * per tool call). A GET stream's priming events are stored: it is reopened, and a resumption from
 * its later priming events must not replay what the client already received.
 */
const STREAM_START = "0-0";

/** Where one session's events go. */
export interface SessionEventStoreOptions {
  readonly tenant: string;
  readonly sessionId: string;
}

/**
 * The event store of one session in Redis Streams, shared by every replica: one stream key per
 * SSE stream, `<prefix><tenant>:mcp-events:<sessionId>:<streamId>`, capped at
 * {@link EVENTS_PER_STREAM} and expiring `ttlSeconds` after its last event (the session TTL: a
 * stream outlives no session).
 *
 * While Redis cannot be reached the streams go on unresumable rather than stop (a session a
 * replica holds is served through an outage, docs/operations.md): an event that cannot be stored
 * is still sent, with an id made of the time (`<streamId>:<ms>-0`, the shape of a Redis entry id),
 * so a client resuming from it later is replayed what was stored after that moment, and nothing
 * twice. A replay while Redis is down fails (`unavailable`; the SDK answers 500).
 */
export function createRedisEventStore(
  redis: Redis,
  options: SessionEventStoreOptions & { prefix: string; ttlSeconds: number; logger?: Logger },
): EventStore {
  assertTenantId(options.tenant);
  const key = (streamId: StreamId) => `${tenantKeyPrefix(options.prefix, options.tenant)}mcp-events:${options.sessionId}:${streamId}`;
  return failClosedOnRedisOutage<EventStore>(
    {
      async storeEvent(streamId, message) {
        if (streamId !== GET_STREAM && isPriming(message)) return `${streamId}:${STREAM_START}`;
        const k = key(streamId);
        let stored: [[Error | null, string], [Error | null, unknown]];
        try {
          stored = (await redis
            .multi()
            .xadd(k, "MAXLEN", "~", String(EVENTS_PER_STREAM), "*", "m", JSON.stringify(message))
            .expire(k, options.ttlSeconds)
            .exec()) as typeof stored;
        } catch (err) {
          if (!isRedisOutage(err)) throw err;
          options.logger?.debug({ tenant: options.tenant, session: options.sessionId }, "an SSE event was sent without being stored: Redis is unavailable");
          return `${streamId}:${Date.now()}-0`;
        }
        const [[err, position], [expireErr]] = stored;
        if (err) throw err;
        if (expireErr) throw expireErr;
        return `${streamId}:${position}`;
      },

      async getStreamIdForEventId(eventId) {
        return parseEventId(eventId)?.streamId;
      },

      async replayEventsAfter(lastEventId, { send }) {
        const parsed = parseEventId(lastEventId);
        if (!parsed) throw new Error(`Last-Event-ID ${JSON.stringify(lastEventId)} is no event id of this session`);
        const entries = await redis.xrange(key(parsed.streamId), `(${parsed.position}`, "+");
        for (const [position, fields] of entries) {
          const raw = fields[fields.indexOf("m") + 1];
          if (raw === undefined) continue;
          const message = JSON.parse(raw) as JSONRPCMessage;
          if (!isPriming(message)) await send(`${parsed.streamId}:${position}`, message);
        }
        return parsed.streamId;
      },
    },
    "the SSE event store",
  );
}

/**
 * The event store of one session in this process (no `REDIS_URL`: one replica serves every
 * session). It lives as long as the session's objects here; {@link MEMORY_STREAMS_PER_SESSION}
 * streams of {@link EVENTS_PER_STREAM} events at most.
 */
export function createMemoryEventStore(): EventStore {
  const streams = new Map<StreamId, { position: number; message: JSONRPCMessage }[]>();
  let next = 0;
  return {
    async storeEvent(streamId, message) {
      let events = streams.get(streamId);
      if (!events) {
        if (streams.size >= MEMORY_STREAMS_PER_SESSION) streams.delete(streams.keys().next().value!);
        streams.set(streamId, (events = []));
      }
      const position = ++next;
      events.push({ position, message });
      if (events.length > EVENTS_PER_STREAM) events.shift();
      return `${streamId}:${position}-0`;
    },

    async getStreamIdForEventId(eventId) {
      return parseEventId(eventId)?.streamId;
    },

    async replayEventsAfter(lastEventId, { send }) {
      const parsed = parseEventId(lastEventId);
      if (!parsed) throw new Error(`Last-Event-ID ${JSON.stringify(lastEventId)} is no event id of this session`);
      const after = Number(parsed.position.split("-")[0]);
      for (const { position, message } of [...(streams.get(parsed.streamId) ?? [])]) {
        if (position > after && !isPriming(message)) await send(`${parsed.streamId}:${position}-0`, message);
      }
      return parsed.streamId;
    },
  };
}
