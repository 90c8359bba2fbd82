import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { autoAcceptingClient } from "../support/elicitation.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { MCP_HEADERS, openSession, PROTOCOL_VERSION, rpc, sseStream } from "../support/mcp-http.js";
import { Redis } from "ioredis";
import { removeDir, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { TEST_REDIS_URL, uniquePrefix } from "../support/redis.js";
import { postListen } from "../support/streams.js";

function call(id: number, name: string, args: Record<string, unknown>) {
  return { jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } };
}

describe("one MCP session served by two edge processes sharing Redis", () => {
  let db: TestDatabase;
  const dirs = [tempDir(), tempDir()];
  let a: ServeProcess;
  let b: ServeProcess;
  const prefix = uniquePrefix("sessions-across");

  beforeAll(async () => {
    db = await createTestDatabase();
    // Their own prefix (CHAOS_CORE_REDIS_PREFIX): what they share, they share under it.
    const env = { DATABASE_URL: db.url, REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_REDIS_PREFIX: prefix };
    a = await startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[0] });
    b = await startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[1] });
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    dirs.forEach(removeDir);
    await db?.drop();
  });

  it("lets the second process serve a session the first one created, and DELETE end it everywhere", async () => {
    const session = await openSession(a.url);

    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      expect((await redis.keys(`${prefix}*`)).some((k) => k.includes(session))).toBe(true);
    } finally {
      redis.disconnect();
    }

    const wrote = await rpc(b.url, session, call(10, "chaoscore_remember", { key: "shared", value: "from b" }));
    expect(wrote.status).toBe(200);
    expect((wrote.message?.result as { isError?: boolean }).isError).toBeFalsy();

    const read = await rpc(a.url, session, call(11, "chaoscore_recall", { key: "shared" }));
    expect(read.status).toBe(200);
    expect(JSON.stringify(read.message?.result)).toContain("from b");

    const inspected = await rpc(b.url, session, call(12, "chaoscore_inspect", { what: "sessions" }));
    expect(JSON.stringify(inspected.message?.result)).toContain(session);

    const del = await fetch(b.url, { method: "DELETE", headers: { "mcp-session-id": session } });
    expect(del.status).toBe(200);
    expect((await rpc(a.url, session, call(13, "chaoscore_recall", { key: "shared" }))).status).toBe(404);
    expect((await rpc(b.url, session, call(14, "chaoscore_recall", { key: "shared" }))).status).toBe(404);
  });
});

describe("change events across two edge processes sharing Redis (docs/protocol.md §9, §10)", () => {
  // Each process has its own Postgres here, so a policy change is seen by one process's policy
  // watch only: what the other's clients hear of it crossed Redis. (Sharing one database, both
  // would see it, and it would be announced once.) A tenant of this test's own keeps other tests'
  // events on the same Redis out of its streams.
  const tenant = `streams-${randomBytes(4).toString("hex")}`;
  const key = randomBytes(24).toString("base64url");
  const auth = { authorization: `Bearer ${key}` };
  const dirs = [tempDir(), tempDir(), tempDir()];
  const dbs: TestDatabase[] = [];
  let a: ServeProcess;
  let b: ServeProcess;

  beforeAll(async () => {
    dbs.push(await createTestDatabase(), await createTestDatabase());
    const keysFile = join(dirs[0]!, "keys.json");
    writeFileSync(keysFile, JSON.stringify([{ tenant, principal: "agent", sha256: createHash("sha256").update(key).digest("hex") }]));
    const env = (i: number) => ({ DATABASE_URL: dbs[i]!.url, REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_DATA_DIR: dirs[i], CHAOS_CORE_API_KEYS_FILE: keysFile });
    [a, b] = await Promise.all([startServe(env(0)), startServe(env(1))]);
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    dirs.forEach(removeDir);
    for (const db of dbs) await db.drop();
  });

  /** A 2026-07-28 subscriptions/listen stream on `url`, and its acknowledgement. */
  async function listen(url: string, id: string) {
    const res = await postListen(url, auth, id);
    expect(res.status).toBe(200);
    const stream = sseStream(res);
    const ack = await stream.next((e) => e.message !== undefined, "the acknowledgement");
    expect(ack.message).toMatchObject({ method: "notifications/subscriptions/acknowledged" });
    return stream;
  }

  const isPolicyUpdate = (e: { message?: Record<string, unknown> }) =>
    e.message?.["method"] === "notifications/resources/updated" && (e.message["params"] as { uri?: string }).uri === "chaoscore://policy";

  it("a listen stream on A and a 2025-11-25 GET stream on A hear a policy change only B's store saw, and a council session started through B", async () => {
    const onA = await listen(a.url, "listen-a");
    // B watches the tenant's policy while it has a listener for the tenant.
    const onB = await listen(b.url, "listen-b");
    const session = await openSession(a.url, auth);
    const subscribed = await rpc(a.url, session, { jsonrpc: "2.0", id: 2, method: "resources/subscribe", params: { uri: "chaoscore://policy" } }, auth);
    expect(subscribed.message).toMatchObject({ result: {} });
    const get = await fetch(a.url, { headers: { ...auth, accept: "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION } });
    expect(get.status).toBe(200);
    const legacyOnA = sseStream(get);
    try {
      // B's own policy store only: A's database never holds this version.
      const policyFile = join(dirs[1]!, "changed-policy.json");
      writeFileSync(policyFile, JSON.stringify({ requireConfirmationFor: ["http.request"] }));
      const set = await runToExit(["policy", "set", policyFile, "--tenant", tenant, "--database-url", dbs[1]!.url], { CHAOS_CORE_DATA_DIR: dirs[2] });
      expect(set.code, set.stderr).toBe(0);

      const heard = await onA.next(isPolicyUpdate, "resources/updated for chaoscore://policy on A's listen stream", 30_000);
      expect(heard.message?.["params"]).toMatchObject({ _meta: { "io.modelcontextprotocol/subscriptionId": "listen-a" } });
      await onB.next(isPolicyUpdate, "resources/updated on B's own listen stream", 30_000);
      const legacy = await legacyOnA.next(isPolicyUpdate, "resources/updated on A's 2025-11-25 GET stream", 30_000);
      expect(legacy.message?.["params"]).toEqual({ uri: "chaoscore://policy" });

      // A council session started through B: both of A's streams hear that the resource list changed.
      const onB2025 = await openSession(b.url, auth);
      const started = await rpc(b.url, onB2025, call(3, "council_init", { task: "pick a queue for the audit events" }), auth);
      expect((started.message?.result as { isError?: boolean }).isError).toBeFalsy();
      const listChanged = (e: { message?: Record<string, unknown> }) => e.message?.["method"] === "notifications/resources/list_changed";
      await onA.next(listChanged, "resources/list_changed on A's listen stream", 30_000);
      await legacyOnA.next(listChanged, "resources/list_changed on A's 2025-11-25 GET stream", 30_000);
    } finally {
      await Promise.all([onA.cancel(), onB.cancel(), legacyOnA.cancel()]);
    }
  });
});

describe("a 2025-11-25 elicitation answered through the other edge process (the relay, docs/protocol.md §8)", () => {
  let db: TestDatabase;
  const dirs = [tempDir(), tempDir(), tempDir()];
  let a: ServeProcess;
  let b: ServeProcess;

  beforeAll(async () => {
    db = await createTestDatabase();
    // The operator lets a client's own answer approve a wire: the session is asked for it.
    const policyFile = join(dirs[2]!, "policy.json");
    writeFileSync(policyFile, JSON.stringify({ approvalChannels: { spend: { policies: { wire: ["client_elicitation", "approver", "operator"] } } } }));
    const set = await runToExit(["policy", "set", policyFile, "--tenant", "default", "--database-url", db.url], { CHAOS_CORE_DATA_DIR: dirs[2] });
    expect(set.code, set.stderr).toBe(0);
    const env = { DATABASE_URL: db.url, REDIS_URL: TEST_REDIS_URL };
    // Debug lines on A: how the cancellation test sees a relayed message arrive.
    [a, b] = await Promise.all([
      startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[0], LOG_LEVEL: "debug" }),
      startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[1] }),
    ]);
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    dirs.forEach(removeDir);
    await db?.drop();
  });

  it("passes a notifications/cancelled posted to B to A, where the call runs", async () => {
    const posted: Record<string, unknown>[] = [];
    let asked!: () => void;
    const elicited = new Promise<void>((resolve) => (asked = resolve));
    const client = new Client({ name: "relay-cancel-test", version: "0" }, { capabilities: { elicitation: { form: {} } } });
    // The person never answers: the call waits on A until it is cancelled.
    client.setRequestHandler(ElicitRequestSchema, () => {
      asked();
      return new Promise(() => {});
    });
    const transport = new StreamableHTTPClientTransport(new URL(a.url), {
      fetch: async (url: string | URL, init?: RequestInit) => {
        if (typeof init?.body === "string") posted.push(JSON.parse(init.body) as Record<string, unknown>);
        return fetch(url, init);
      },
    });
    await client.connect(transport);
    try {
      const wire = { beneficiary: "ACME Supplies GmbH", amount: 900, currency: "EUR", memo: "cancel" };
      const held = (await client.callTool({ name: "request_authorization", arguments: { tool: "wire_treasury_transfer", args: wire } })).structuredContent as {
        request_seq: number;
      };
      void client.callTool({ name: "approve_spend", arguments: { request_seq: held.request_seq } }).catch(() => {});
      await elicited;
      const call = posted.find((m) => m["method"] === "tools/call" && JSON.stringify(m).includes("approve_spend"))!;
      const cancelled = await fetch(b.url, {
        method: "POST",
        headers: { ...MCP_HEADERS, "mcp-session-id": transport.sessionId!, "mcp-protocol-version": PROTOCOL_VERSION },
        body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: call["id"], reason: "the user gave up" } }),
      });
      expect(cancelled.status).toBe(202);
      // Waited for, not timed: the line appears once A has handed the cancellation to the session.
      const deliveredLine = () =>
        a.stderr().split("\n").find((l) => l.includes("delivered a relayed message") && l.includes("notifications/cancelled"));
      const deadline = Date.now() + 15_000;
      while (!deliveredLine() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(deliveredLine(), "A never got the cancellation posted to B").toBeDefined();
      expect(JSON.parse(deliveredLine()!)).toMatchObject({ method: "notifications/cancelled", session: transport.sessionId });
    } finally {
      await client.close();
    }
  });

  it("sends the v1 client's requests to A and its answers to B, and the wire is approved by that answer, once", async () => {
    // A load balancer without affinity, made deterministic: requests alternate between the two
    // processes until the governed call, which goes to A; every answer to a server request goes to B.
    const routed: { to: "a" | "b"; kind: string }[] = [];
    let turn = 0;
    let pinToA = false;
    const fetchRouted = async (url: string | URL, init?: RequestInit) => {
      const body = typeof init?.body === "string" ? (JSON.parse(init.body) as Record<string, unknown>) : undefined;
      const answer = body !== undefined && !("method" in body);
      const to: "a" | "b" = init?.method !== "POST" ? "a" : answer ? "b" : pinToA ? "a" : turn++ % 2 === 0 ? "a" : "b";
      routed.push({ to, kind: answer ? "answer" : String(body?.["method"] ?? init?.method ?? "GET") });
      return fetch(new URL(to === "a" ? a.url : b.url), init);
    };
    const asked: string[] = [];
    const accepting = autoAcceptingClient(asked);
    const client = new Client({ name: "relay-test", version: "0" }, { capabilities: accepting.capabilities });
    accepting.setup(client);
    await client.connect(new StreamableHTTPClientTransport(new URL(a.url), { fetch: fetchRouted }));
    try {
      const remembered = await client.callTool({ name: "chaoscore_remember", arguments: { key: "relay", value: "alternating" } });
      expect(remembered.isError).toBeFalsy();
      const recalled = await client.callTool({ name: "chaoscore_recall", arguments: { key: "relay" } });
      expect(JSON.stringify(recalled.structuredContent)).toContain("alternating");
      expect(new Set(routed.filter((r) => r.kind === "tools/call").map((r) => r.to))).toEqual(new Set(["a", "b"]));

      pinToA = true;
      const wire = { beneficiary: "ACME Supplies GmbH", amount: 2500, currency: "EUR", memo: "relay" };
      const held = (await client.callTool({ name: "request_authorization", arguments: { tool: "wire_treasury_transfer", args: wire } })).structuredContent as {
        request_seq: number;
      };
      const approved = await client.callTool({ name: "approve_spend", arguments: { request_seq: held.request_seq } });
      expect(approved.isError, JSON.stringify(approved.content)).toBeFalsy();
      expect(approved.structuredContent).toMatchObject({ state: "LOCKED", channel: "client_elicitation" });
      expect(asked).toHaveLength(1);
      // The question went out on A's stream; its answer was posted to B, which passed it to A.
      expect(routed.filter((r) => r.kind === "answer").map((r) => r.to)).toEqual(["b"]);
    } finally {
      await client.close();
    }
  });
});
