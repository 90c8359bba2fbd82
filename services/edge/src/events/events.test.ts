import type { EventStore, JSONRPCMessage, ServerEvent } from "@modelcontextprotocol/server";
import { describe, expect, it } from "vitest";
import { createLogger } from "@chaos-core/kit";
import { useRedisReplicas } from "../../../../test/support/redis.js";
import { createMemoryEventBuses, createRedisEventBuses, eventOf, type TenantEventBuses } from "./bus.js";
import { createMemoryEventStore, createRedisEventStore, EVENTS_PER_STREAM, parseEventId } from "./event-store.js";

const logger = createLogger("events-test", "silent");
const redis = useRedisReplicas("edge-events");
const STREAM = "0b6cc7a4-5f7e-4f57-8b38-2f0ef1a5e0d1";

const message = (id: number): JSONRPCMessage => ({ jsonrpc: "2.0", id, result: { n: id } });

/** What a replay sends, in order. */
async function replay(store: EventStore, after: string): Promise<{ streamId: string; sent: [string, JSONRPCMessage][] }> {
  const sent: [string, JSONRPCMessage][] = [];
  const streamId = await store.replayEventsAfter(after, { send: async (id, m) => void sent.push([id, m]) });
  return { streamId, sent };
}

describe.each([
  ["in process", () => ({ write: createMemoryEventStore(), read: undefined as EventStore | undefined })],
  [
    "on Redis, written by one replica and replayed by another",
    () => {
      const at = { tenant: "acme", sessionId: "s-1", prefix: redis.prefix, ttlSeconds: 60 };
      return { write: createRedisEventStore(redis.a, at), read: createRedisEventStore(redis.b, at) };
    },
  ],
])("the SSE event store %s", (_name, make) => {
  it("replays what followed an event, skipping the priming event, with the ids first sent", async () => {
    const { write, read = write } = make();
    const priming = await write.storeEvent(STREAM, {} as JSONRPCMessage);
    const first = await write.storeEvent(STREAM, message(1));
    const second = await write.storeEvent(STREAM, message(2));
    await write.storeEvent("_GET_stream", message(3));
    expect(parseEventId(priming)).toMatchObject({ streamId: STREAM });
    expect(await read.getStreamIdForEventId!(first)).toBe(STREAM);
    expect(await replay(read, priming)).toEqual({ streamId: STREAM, sent: [[first, message(1)], [second, message(2)]] });
    expect(await replay(read, first)).toEqual({ streamId: STREAM, sent: [[second, message(2)]] });
    expect((await replay(read, second)).sent).toEqual([]);
  });

  it("resumes a reopened GET stream from its latest priming event without replaying what came before it", async () => {
    const { write, read = write } = make();
    await write.storeEvent("_GET_stream", {} as JSONRPCMessage);
    await write.storeEvent("_GET_stream", message(1));
    const reopened = await write.storeEvent("_GET_stream", {} as JSONRPCMessage);
    const after = await write.storeEvent("_GET_stream", message(2));
    expect(await replay(read, reopened)).toEqual({ streamId: "_GET_stream", sent: [[after, message(2)]] });
  });

  it("knows no id it did not write: the SDK answers 400 for those", async () => {
    const { write } = make();
    for (const bad of ["", "x", `${STREAM}`, `${STREAM}:`, `not-a-stream:1-0`, `${STREAM}:1-0:2`, `../${STREAM}:1-0`]) {
      expect(await write.getStreamIdForEventId!(bad)).toBeUndefined();
      await expect(write.replayEventsAfter(bad, { send: async () => {} })).rejects.toThrow(/no event id of this session/);
    }
  });
});

describe("the Redis event store", () => {
  it("keeps each session's streams apart, caps a stream and expires it with the session", async () => {
    const at = { tenant: "acme", prefix: redis.prefix, ttlSeconds: 30 };
    const mine = createRedisEventStore(redis.a, { ...at, sessionId: "mine" });
    const theirs = createRedisEventStore(redis.a, { ...at, sessionId: "theirs" });
    const priming = await mine.storeEvent(STREAM, {} as JSONRPCMessage);
    const key = `${redis.prefix}{acme}:mcp-events:mine:${STREAM}`;
    // A POST stream's priming event marks its start: nothing is written for it.
    expect(await redis.a.exists(key)).toBe(0);
    await mine.storeEvent(STREAM, message(1));
    expect((await replay(theirs, priming)).sent).toEqual([]);
    const ttl = await redis.a.ttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(30);
    for (let i = 0; i < EVENTS_PER_STREAM + 200; i++) await mine.storeEvent("_GET_stream", message(i));
    // MAXLEN ~ trims in whole nodes: a little over the cap at most, never the whole history.
    const kept = await redis.a.xlen(`${redis.prefix}{acme}:mcp-events:mine:_GET_stream`);
    expect(kept).toBeGreaterThanOrEqual(EVENTS_PER_STREAM);
    expect(kept).toBeLessThan(EVENTS_PER_STREAM + 200);
  });

  it("refuses a tenant id that could reach outside its keys", () => {
    expect(() => createRedisEventStore(redis.a, { tenant: "a:b", sessionId: "s", prefix: redis.prefix, ttlSeconds: 1 })).toThrow(/tenant/);
  });
});

/** Waits for `received` to hold `count` events (events cross Redis asynchronously). */
async function heard(received: ServerEvent[], count: number): Promise<ServerEvent[]> {
  const deadline = Date.now() + 5_000;
  while (received.length < count) {
    if (Date.now() > deadline) throw new Error(`heard ${received.length} of ${count} events: ${JSON.stringify(received)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return received;
}

describe("the per-tenant change-event buses", () => {
  it("in process: deliver to the tenant's listeners only, and report when a tenant gains and loses its last", async () => {
    const buses = createMemoryEventBuses(logger);
    const activity: [string, boolean][] = [];
    buses.onActivity((tenant, active) => activity.push([tenant, active]));
    const a: ServerEvent[] = [];
    const b: ServerEvent[] = [];
    const offA = buses.bus("acme").subscribe((e) => a.push(e));
    const offA2 = buses.bus("acme").subscribe(() => {});
    buses.bus("other").subscribe((e) => b.push(e));
    await buses.publish("acme", { kind: "resource_updated", uri: "chaoscore://policy" });
    expect(a).toEqual([{ kind: "resource_updated", uri: "chaoscore://policy" }]);
    expect(b).toEqual([]);
    offA();
    offA();
    expect(buses.activeTenants().sort()).toEqual(["acme", "other"]);
    offA2();
    expect(activity).toEqual([
      ["acme", true],
      ["other", true],
      ["acme", false],
    ]);
  });

  it("on Redis: an event published by one replica reaches the other's listeners, a once-key only once", async () => {
    const one = await createRedisEventBuses(redis.a, { prefix: redis.prefix, logger });
    const two = await createRedisEventBuses(redis.b, { prefix: redis.prefix, logger });
    const buses: TenantEventBuses[] = [one, two];
    try {
      const onTwo: ServerEvent[] = [];
      const otherTenant: ServerEvent[] = [];
      two.bus("acme").subscribe((e) => onTwo.push(e));
      two.bus("globex").subscribe((e) => otherTenant.push(e));
      // The subscription is made asynchronously: publish until the first event arrives.
      const deadline = Date.now() + 5_000;
      while (onTwo.length === 0) {
        if (Date.now() > deadline) throw new Error("the other replica never heard the first event");
        await one.publish("acme", { kind: "resources_list_changed" });
        await new Promise((r) => setTimeout(r, 50));
      }
      onTwo.length = 0;
      // Both replicas saw the same policy version: it is published once.
      await one.publish("acme", { kind: "resource_updated", uri: "chaoscore://policy" }, "policy:7:1.0");
      await two.publish("acme", { kind: "resource_updated", uri: "chaoscore://policy" }, "policy:7:1.0");
      await one.publish("acme", { kind: "tools_list_changed" });
      expect(await heard(onTwo, 2)).toEqual([{ kind: "resource_updated", uri: "chaoscore://policy" }, { kind: "tools_list_changed" }]);
      expect(otherTenant).toEqual([]);
    } finally {
      await Promise.all(buses.map((b) => b.close()));
    }
  });

  it("drops a bus message that is no event", () => {
    expect(eventOf("nope")).toBeUndefined();
    expect(eventOf(JSON.stringify({ event: { kind: "resource_updated" } }))).toBeUndefined();
    expect(eventOf(JSON.stringify({ event: { kind: "shutdown" } }))).toBeUndefined();
    expect(eventOf(JSON.stringify({ event: { kind: "resource_updated", uri: "x://y", extra: 1 } }))).toEqual({ kind: "resource_updated", uri: "x://y" });
  });
});
