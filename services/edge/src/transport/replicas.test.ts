import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { TEST_REDIS_URL, uniquePrefix } from "../../../../test/support/redis.js";
import { hashApiKey } from "../auth/api-keys.js";
import { createRedisSessionStore } from "../sessions/redis-store.js";
import type { SessionStore } from "../sessions/session-store.js";
import { httpClient, listTools, openSession, rpc, toolCall } from "../test-support/http.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "./http.js";

// Two edge replicas sharing one Redis and the same (real, in-process) services: a session
// opened on one must be served by the other, and ended everywhere by a DELETE on either.

const keyA = randomBytes(24).toString("base64url");
const keyB = randomBytes(24).toString("base64url");
const tenantA = `replica-a-${randomBytes(3).toString("hex")}`;
const tenantB = `replica-b-${randomBytes(3).toString("hex")}`;
const auth = (key: string) => ({ authorization: `Bearer ${key}` });

let services: TestServices;
let redis: Redis;
let store: SessionStore;
let a: RunningHttpTransport;
let b: RunningHttpTransport;

beforeAll(async () => {
  services = await startTestServices("replicas");
  redis = new Redis(TEST_REDIS_URL, { lazyConnect: true });
  await redis.connect();
  const prefix = uniquePrefix("edge-replicas");
  const apiKeys = [
    { tenant: tenantA, principal: "alice", sha256: hashApiKey(keyA) },
    { tenant: tenantB, principal: "bob", sha256: hashApiKey(keyB) },
  ];
  // Each replica has its own store object over the shared Redis, as separate processes would.
  store = createRedisSessionStore(redis, { prefix });
  a = await startHttpTransport(services.deps(createRedisSessionStore(redis, { prefix })), { port: 0, apiKeys });
  b = await startHttpTransport(services.deps(createRedisSessionStore(redis, { prefix })), { port: 0, apiKeys });
});

afterAll(async () => {
  await a?.close();
  await b?.close();
  await redis?.quit();
  await services?.close();
});

describe("two edge replicas sharing Redis", () => {
  it("serve one session: initialize on A, tools on B, DELETE on B, then A answers 404", async () => {
    const { client: onA, transport } = await httpClient(a.url, { headers: auth(keyA) });
    const session = transport.sessionId!;
    expect(b.localSessionCount()).toBe(0);

    // B never saw this session's initialize; a real SDK client joins it there by id.
    const { client: onB } = await httpClient(b.url, { headers: auth(keyA), sessionId: session });
    const lines: unknown[] = [];
    onB.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void lines.push(n.params));
    await onB.listTools();
    const stored = await onB.callTool({ name: "chaoscore_remember", arguments: { key: "shared", value: "from b" } });
    expect(stored.isError).toBeFalsy();
    expect(b.localSessionCount()).toBe(1);

    const recalled = await onA.callTool({ name: "chaoscore_recall", arguments: { key: "shared" } });
    expect(JSON.stringify(recalled.structuredContent)).toContain("from b");

    // What A stored at initialize is what B serves: the client's info and the caller's tenant.
    const inspected = await onB.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } });
    expect(inspected.structuredContent).toMatchObject({
      session: { id: session, tenant: tenantA, principal: "alice", client_info: { name: "edge-http-test" } },
    });

    // A level set through A filters what B sends.
    await onA.setLoggingLevel("debug");
    await onB.callTool({ name: "chaoscore_recall", arguments: { key: "shared" } });
    expect(lines).toContainEqual(expect.objectContaining({ level: "debug" }));

    const del = await fetch(b.url, { method: "DELETE", headers: { "mcp-session-id": session, ...auth(keyA) } });
    expect(del.status).toBe(200);
    expect(await store.get(tenantA, session)).toBeUndefined();
    expect((await rpc(a.url, session, listTools, auth(keyA))).status).toBe(404);
    expect((await rpc(b.url, session, listTools, auth(keyA))).status).toBe(404);
    expect(a.localSessionCount()).toBe(0);
    await onA.close();
    await onB.close();
  });

  it("keep a session to its tenant on every replica", async () => {
    const session = await openSession(a.url, auth(keyA));
    expect((await rpc(b.url, session, listTools, auth(keyB))).status).toBe(404);
    expect(b.localSessionCount()).toBe(0);
    const ok = await rpc(b.url, session, toolCall(3, "chaoscore_inspect", { what: "sessions" }), auth(keyA));
    expect(ok.status).toBe(200);
    expect(JSON.stringify(ok.message)).toContain(session);
  });

  it("rehydrate a session once when requests race on a replica", async () => {
    const session = await openSession(a.url, auth(keyA));
    const before = b.localSessionCount();
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => rpc(b.url, session, { ...listTools, id: 100 + i }, auth(keyA))),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(b.localSessionCount()).toBe(before + 1);
  });
});
