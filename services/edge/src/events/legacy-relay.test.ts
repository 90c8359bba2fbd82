import { describe, expect, it } from "vitest";
import { createLogger, tenantKeyPrefix } from "@chaos-core/kit";
import { useRedisReplicas } from "../../../../test/support/redis.js";
import { createRedisLegacyRelay, INFLIGHT_MARK_AFTER_MS, parseWireId, wireId, type RelayedMessage } from "./legacy-relay.js";

const logger = createLogger("relay-test", "silent");
const redis = useRedisReplicas("edge-relay");

describe("the 2025-11-25 relay's wire ids", () => {
  it("name the replica and keep the SDK's number", () => {
    const replica = "edge-0123456789abcdef";
    expect(wireId(replica, 7)).toBe("edge-0123456789abcdef.7");
    expect(parseWireId(wireId(replica, 7))).toEqual({ replica, id: 7 });
  });

  it("are never read into a client's own ids", () => {
    for (const id of [7, "7", "edge-0123.7", "edge-0123456789abcdef", "edge-0123456789abcdef.x", "x.edge-0123456789abcdef.7", null]) {
      expect(parseWireId(id)).toBeUndefined();
    }
  });
});

describe("the relay on Redis", () => {
  it("passes a message to the replica named, and finds the replica running a call by its in-flight key", async () => {
    const a = await createRedisLegacyRelay(redis.a, { prefix: redis.prefix, logger });
    const b = await createRedisLegacyRelay(redis.b, { prefix: redis.prefix, logger });
    try {
      expect(a.replica).toMatch(/^edge-[0-9a-f]{16}$/);
      expect(b.replica).not.toBe(a.replica);
      const toA: RelayedMessage[] = [];
      const toB: RelayedMessage[] = [];
      a.onMessage((m) => toA.push(m));
      b.onMessage((m) => toB.push(m));
      const relayed: RelayedMessage = {
        tenant: "acme",
        sessionId: "s-1",
        protocolVersion: "2025-11-25",
        message: { jsonrpc: "2.0", id: wireId(a.replica, 0), result: { action: "accept", content: { approve: true } } },
      };
      await b.send(a.replica, relayed);
      const deadline = Date.now() + 5_000;
      while (toA.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(toA).toEqual([relayed]);
      expect(toB).toEqual([]);

      a.markInflight("acme", "s-1", 5);
      a.markInflight("acme", "s-1", "5");
      let owner: string | undefined;
      while (owner === undefined && Date.now() < deadline) owner = await b.inflightOwner("acme", "s-1", 5);
      expect(owner).toBe(a.replica);
      // A number and a string id are two requests; another session's or tenant's id is none.
      expect(await b.inflightOwner("acme", "s-1", "5")).toBe(a.replica);
      expect(await b.inflightOwner("acme", "s-2", 5)).toBeUndefined();
      expect(await b.inflightOwner("globex", "s-1", 5)).toBeUndefined();
      a.clearInflight("acme", "s-1", 5);
      while (owner !== undefined && Date.now() < deadline) owner = await b.inflightOwner("acme", "s-1", 5);
      expect(owner).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("notes a call in Redis only once it has run a while, and a lookup made before that looks again", async () => {
    const a = await createRedisLegacyRelay(redis.a, { prefix: redis.prefix, logger });
    const b = await createRedisLegacyRelay(redis.b, { prefix: redis.prefix, logger });
    const key = (id: number) => `${tenantKeyPrefix(redis.prefix, "acme")}mcp-inflight:s-9:number:${id}`;
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    try {
      // Answered before the delay: nothing was written, nothing is left.
      a.markInflight("acme", "s-9", 1);
      expect(await a.inflightOwner("acme", "s-9", 1)).toBe(a.replica);
      a.clearInflight("acme", "s-9", 1);
      await sleep(INFLIGHT_MARK_AFTER_MS * 3);
      expect(await redis.a.exists(key(1))).toBe(0);

      // Asked on B at once: B finds no key, looks again after the mark is written, finds A.
      a.markInflight("acme", "s-9", 2);
      expect(await redis.a.exists(key(2))).toBe(0);
      expect(await b.inflightOwner("acme", "s-9", 2)).toBe(a.replica);
      expect(await redis.a.get(key(2))).toBe(a.replica);
      // Answered after it was noted: the key goes.
      a.clearInflight("acme", "s-9", 2);
      const deadline = Date.now() + 5_000;
      while ((await redis.a.exists(key(2))) === 1 && Date.now() < deadline) await sleep(20);
      expect(await redis.a.exists(key(2))).toBe(0);
      expect(await b.inflightOwner("acme", "s-9", 2)).toBeUndefined();
    } finally {
      await a.close();
      await b.close();
    }
  });
});
