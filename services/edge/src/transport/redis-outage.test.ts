import type { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createLogger } from "@chaos-core/kit";
import { connectRedis } from "@chaos-core/kit/redis";
import { startPrivateRedis, uniquePrefix, type PrivateRedis } from "../../../../test/support/redis.js";
import { createRedisEdgeEvents, type EdgeEvents } from "../events/feeds.js";
import { createRedisSessionStore } from "../sessions/redis-store.js";
import { initializeBody, listTools, MCP_HEADERS, openSession, PROTOCOL_VERSION, readJsonRpc, rpc } from "../test-support/http.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "./http.js";
import { wireId } from "../events/legacy-relay.js";

// Two edge replicas on a private redis-server that the tests kill and start again (never the
// shared one), each with its own client as separate processes would have.

const logger = createLogger("edge-redis-outage-test", "silent");

let redis: PrivateRedis;
let services: TestServices;
let clients: Redis[] = [];
let a: RunningHttpTransport;
let b: RunningHttpTransport;
/** Each replica's SSE event store, change-event bus and relay, on the same Redis, as the edge main makes them. */
const events: EdgeEvents[] = [];

async function replica(prefix: string): Promise<RunningHttpTransport> {
  const client = await connectRedis(redis.url, { logger, name: "edge-test" });
  clients.push(client);
  const sessions = createRedisSessionStore(client, { prefix });
  const made = await createRedisEdgeEvents(client, { prefix, ttlSeconds: sessions.ttlSeconds, logger });
  events.push(made);
  return startHttpTransport({ ...services.deps(sessions), events: made }, { port: 0, sweepIntervalMs: 100 });
}

async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  redis = await startPrivateRedis();
  services = await startTestServices("redis_outage");
  const prefix = uniquePrefix("edge-outage");
  a = await replica(prefix);
  b = await replica(prefix);
});

afterAll(async () => {
  await a?.close();
  await b?.close();
  for (const e of events) await e.close();
  for (const c of clients) c.disconnect();
  clients = [];
  await redis?.close();
  await services?.close();
});

describe("edge replicas through a Redis outage", () => {
  // Each test starts after the last outage has ended for both replicas: each reconnects to Redis
  // on its own (client backoff), and a test that waited for one to serve again must not leave the
  // next to meet the other still reconnecting.
  beforeEach(async () => {
    for (const replica of [a, b]) {
      await eventually(async () => {
        const res = await fetch(replica.url, { method: "POST", headers: MCP_HEADERS, body: JSON.stringify(initializeBody()) });
        await res.text();
        return res.status === 200;
      }, "both replicas to open sessions in Redis again");
    }
  });

  it("serve the sessions they hold from their cache, and refuse others and new ones with 503 naming Redis", async () => {
    const held = await openSession(a.url);
    await redis.kill();
    try {
      const onA = await rpc(a.url, held, listTools);
      expect(onA.status).toBe(200);
      expect(JSON.stringify(onA.message)).toContain("chp_version");

      // B never held it, so it cannot tell whether the session exists.
      const onB = await rpc(b.url, held, listTools);
      expect(onB.status).toBe(503);
      expect((onB.message?.error as { message: string }).message).toMatch(/^Redis is unavailable/);

      const fresh = await fetch(a.url, { method: "POST", headers: MCP_HEADERS, body: JSON.stringify(initializeBody()) });
      expect(fresh.status).toBe(503);
      expect(fresh.headers.get("mcp-session-id")).toBeNull();
      expect(((await readJsonRpc(fresh))?.error as { message: string }).message).toMatch(/^Redis is unavailable/);
    } finally {
      await redis.start();
    }
    await eventually(async () => (await rpc(b.url, held, listTools)).status === 200, "B to serve the session again");
  });

  it("end a session DELETEd during the outage at once there, and everywhere once Redis is back", async () => {
    const session = await openSession(a.url);
    expect((await rpc(b.url, session, listTools)).status).toBe(200);
    await redis.kill();
    try {
      const del = await fetch(b.url, { method: "DELETE", headers: { ...MCP_HEADERS, "mcp-session-id": session } });
      expect(del.status).toBe(200);
      expect((await rpc(b.url, session, listTools)).status).toBe(404);
      // The trade-off: A cannot see the DELETE while Redis is down, so it keeps serving its copy.
      expect((await rpc(a.url, session, listTools)).status).toBe(200);
    } finally {
      await redis.start();
    }
    await eventually(async () => (await rpc(a.url, session, listTools)).status === 404, "A to see the DELETE");
    expect((await rpc(b.url, session, listTools)).status).toBe(404);
  });

  it("answer 503 for a client's answer to another replica's request while Redis is down; the replica that asked takes its own", async () => {
    const session = await openSession(a.url);
    // B holds the session too (a POST reached it), so B serves it from its copy during the outage.
    expect((await rpc(b.url, session, listTools)).status).toBe(200);
    const answer = { jsonrpc: "2.0", id: wireId(events[0]!.relay!.replica, 0), result: { action: "cancel" } };
    const post = (url: string) =>
      fetch(url, {
        method: "POST",
        headers: { ...MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION },
        body: JSON.stringify(answer),
      });
    // With Redis up, B passes it to A (which asked nothing with that id: it is dropped there).
    expect((await post(b.url)).status).toBe(202);
    await redis.kill();
    try {
      const relayed = await post(b.url);
      expect(relayed.status).toBe(503);
      expect(relayed.headers.get("retry-after")).toBe("2");
      expect(((await readJsonRpc(relayed))?.error as { message: string }).message).toMatch(/^Redis is unavailable: the relay between edge replicas/);
      // A needs no relay for an answer to its own request.
      expect((await post(a.url)).status).toBe(202);
      // And the streams of a session A holds go on without the event store: unresumable, not stopped.
      const onA = await rpc(a.url, session, listTools);
      expect(onA.status).toBe(200);
    } finally {
      await redis.start();
    }
  });
});
