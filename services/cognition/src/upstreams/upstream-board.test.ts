import { join } from "node:path";
import type { Tool } from "@modelcontextprotocol/client";
import { Redis } from "ioredis";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { upstreamContracts, type ContractSet } from "@chaos-core/contracts";
import { createLogger, parseUpstreamsFile, type ChaosError } from "@chaos-core/kit";
import { TEST_REDIS_URL, uniquePrefix } from "../../../../test/support/redis.js";
import { createUpstreamDrift, type UpstreamDrift, type UpstreamDriftEvent } from "./drift.js";
import { definitionOf } from "./pin.js";
import { breakerKey, createRedisUpstreamBoards, type UpstreamBoard, type UpstreamBoards } from "./upstream-board.js";
import { createUpstreamPool, type UpstreamPool } from "./pool.js";
import { eventually } from "../../../../test/support/eventually.js";

/** What the replicas reach through Redis within a moment. */
const SOON = { timeoutMs: 5_000, intervalMs: 25 };

// Two cognition replicas serving the same operator upstream, each with its own drift tracker and
// its own Redis connections, sharing one board in the real Redis (docs/federation.md §4, "Across
// replicas"): what one finds, the other refuses at once, without reading the upstream itself.
const [decl] = parseUpstreamsFile(JSON.stringify({ upstreams: [{ name: "changing", command: "node", args: ["server.mjs"] }] }), "test");
const echo = (description: string, required = ["message"]): Tool => ({
  name: "echo",
  description,
  inputSchema: { type: "object", properties: { message: { type: "string" }, to: { type: "string" } }, required },
  annotations: { readOnlyHint: true, openWorldHint: false },
});
const ping: Tool = { name: "ping", description: "Answers pong.", inputSchema: { type: "object", properties: {} }, annotations: { readOnlyHint: true, openWorldHint: false } };
const pinOf = (...tools: Tool[]): Map<string, ContractSet> => new Map([["changing", upstreamContracts("changing", tools.map(definitionOf))]]);
const pinned = echo("Echoes its message back");
const drifted = echo("Echoes its message back", ["message", "to"]);
const logger = createLogger("board-test", "silent");

interface Replica {
  drift: UpstreamDrift;
  board: UpstreamBoard;
  boards: UpstreamBoards;
  redis: Redis;
  events: UpstreamDriftEvent[];
  changes: number;
}

describe("shared upstream quarantines (Redis)", () => {
  const opened: Replica[] = [];
  const admin = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  let prefix = uniquePrefix("quarantine-board");

  async function replica(pins = pinOf(pinned, ping)): Promise<Replica> {
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    const boards = await createRedisUpstreamBoards(redis, { prefix, logger });
    const board = await boards.board("operator");
    const r: Replica = { drift: createUpstreamDrift(pins, logger, board), board, boards, redis, events: [], changes: 0 };
    r.drift.onEvent((e) => r.events.push(e));
    r.drift.onChange(() => r.changes++);
    opened.push(r);
    return r;
  }

  afterEach(async () => {
    for (const r of opened.splice(0)) {
      await r.boards.close();
      r.redis.disconnect();
    }
    prefix = uniquePrefix("quarantine-board");
  });
  afterAll(() => admin.disconnect());

  it("refuses on every replica at once what one found drifted; the one that found it records it", async () => {
    const a = await replica();
    const b = await replica();
    a.drift.observe(decl!, [drifted, ping], Date.now());
    expect(a.drift.driftOf("changing", "echo")).toMatch(/upstreams\/changing\/echo \(surface\): BREAKING/);
    // B never read the upstream since it changed: it refuses the tool all the same, and is told so.
    const why = await eventually("replica B to hold the quarantine", () => b.drift.driftOf("changing", "echo"), SOON);
    expect(why).toBe(a.drift.driftOf("changing", "echo"));
    expect(b.changes).toBeGreaterThan(0);
    expect(b.drift.driftOf("changing", "ping")).toBeUndefined();
    await eventually("A's quarantine event", () => (a.events.length > 0 ? true : undefined), SOON);
    expect(a.events.map((e) => e.state)).toEqual(["quarantined"]);
    expect(b.events).toEqual([]);
  });

  it("records a change two replicas find at the same moment once, whichever claims it first", async () => {
    const a = await replica();
    const b = await replica();
    a.drift.observe(decl!, [drifted, ping], Date.now());
    b.drift.observe(decl!, [drifted, ping], Date.now());
    await eventually("a quarantine event", () => (a.events.length + b.events.length > 0 ? true : undefined), SOON);
    await new Promise((r) => setTimeout(r, 200));
    expect([...a.events, ...b.events].map((e) => e.state)).toEqual(["quarantined"]);
  });

  it("withdraws it when a replica reads the upstream back at its pin after it was found; a read from before leaves it", async () => {
    const a = await replica();
    const b = await replica();
    const before = Date.now() - 1_000;
    a.drift.observe(decl!, [drifted, ping], Date.now());
    await eventually("replica B to hold the quarantine", () => b.drift.driftOf("changing", "echo"), SOON);
    // A list B asked for before A found the drift says nothing about now.
    b.drift.observe(decl!, [pinned, ping], before);
    await new Promise((r) => setTimeout(r, 200));
    expect(b.drift.driftOf("changing", "echo")).toBeDefined();
    // One asked for afterwards: the upstream went back.
    b.drift.observe(decl!, [pinned, ping], Date.now());
    await eventually("the shared quarantine to be withdrawn", async () => ((await admin.hlen(`${prefix}upstream-quarantine:{operator}`)) === 0 ? true : undefined), SOON);
    expect(await eventually("B to serve it again", () => (b.drift.driftOf("changing", "echo") === undefined ? true : undefined), SOON)).toBe(true);
  });

  it("holds nothing once an approval re-pinned the tool: a record of the old pin no longer refuses", async () => {
    const a = await replica();
    const b = await replica();
    a.drift.observe(decl!, [drifted, ping], Date.now());
    await eventually("replica B to hold the quarantine", () => b.drift.driftOf("changing", "echo"), SOON);
    b.drift.setPins(pinOf(drifted, ping));
    expect(b.drift.driftOf("changing", "echo")).toBeUndefined();
    // A re-pinned too: its release withdraws the record of the old pin.
    a.drift.setPins(pinOf(drifted, ping));
    expect(a.drift.driftOf("changing", "echo")).toBeUndefined();
    await eventually("the record to be withdrawn", () => (a.board.current().size === 0 ? true : undefined), SOON);
  });

  it("keeps each scope's quarantines to itself: a tenant's board holds none of the operator's", async () => {
    const a = await replica();
    a.drift.observe(decl!, [drifted, ping], Date.now());
    await eventually("the record", () => (a.board.current().size === 1 ? true : undefined), SOON);
    const acme = await a.boards.board("tenant:acme");
    expect(acme.current().size).toBe(0);
    expect(createUpstreamDrift(pinOf(pinned, ping), logger, acme).driftOf("changing", "echo")).toBeUndefined();
  });

  it("finds, on a replica started later, the quarantines put before it started", async () => {
    const a = await replica();
    a.drift.observe(decl!, [drifted, ping], Date.now());
    await eventually("the record", () => (a.board.current().size === 1 ? true : undefined), SOON);
    const late = await replica();
    expect(late.drift.driftOf("changing", "echo")).toMatch(/BREAKING/);
  });
});

// Two replicas' pools in front of the same upstream (a real process that crashes on request),
// each with its own board connection to the real Redis: one breaker view (docs/federation.md §7).
describe("shared upstream breakers (Redis)", () => {
  const ROOT = new URL("../../../../", import.meta.url).pathname;
  const [trouble] = parseUpstreamsFile(
    JSON.stringify({ upstreams: [{ name: "trouble", command: process.execPath, args: [join(ROOT, "test/support/upstreams/trouble-server.mjs")], timeoutMs: 2_000 }] }),
    "test",
  );
  const prefix = uniquePrefix("breaker-board");
  const opened: Array<{ pool: UpstreamPool; boards: UpstreamBoards; redis: Redis }> = [];
  afterAll(async () => {
    for (const r of opened) {
      await r.pool.close();
      await r.boards.close();
      r.redis.disconnect();
    }
  });
  const replica = async (name: string) => {
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    const boards = await createRedisUpstreamBoards(redis, { prefix, logger });
    const board = await boards.board("operator");
    const pool = createUpstreamPool({
      connect: { secrets: { env: {} }, workDir: join(ROOT, ".cache", `breaker-board-${name}`), version: "test" },
      logger,
      breaker: { failures: 3, openMs: 1_500 },
      board,
    });
    opened.push({ pool, boards, redis });
    return pool;
  };
  const ACME = { tenant: "acme", principal: "agent" };
  /** A pool's breakers, once there are some and every one is in `state`. */
  const all = (pool: UpstreamPool, state: string) => () => (pool.breakers().every((br) => br.state === state) && pool.breakers().length > 0 ? pool.breakers() : undefined);
  const fails = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => e as ChaosError,
    );

  it("opens on every replica when one finds the upstream failing, and closes on every replica when one's probe gets through", async () => {
    const [a, b] = [await replica("a"), await replica("b")];
    expect((await b.call(trouble!, ACME, "ok", {})).isError).toBeFalsy();
    for (let i = 0; i < 3; i++) expect((await fails(a.call(trouble!, ACME, "crash", {})))?.code).toBe("unavailable");
    expect(a.breakers()).toEqual([expect.objectContaining({ upstream: "trouble", scope: "shared", state: "open", consecutiveFailures: 3 })]);

    // B had no failure of its own: it refuses at once, without a request to the upstream, as A does.
    expect(await eventually("B to see the breaker open", all(b, "open"), SOON)).toEqual([expect.objectContaining({ upstream: "trouble", consecutiveFailures: 3 })]);
    const refused = await fails(b.call(trouble!, ACME, "ok", {}));
    expect(refused?.code).toBe("unavailable");
    expect(refused?.message).toMatch(/^upstream "trouble" failed 3 times in a row; its breaker is open until /);

    // Once it expires, B's probe goes through: closed on B, and on A without a call of A's.
    await new Promise((r) => setTimeout(r, 1_600));
    expect((await b.call(trouble!, ACME, "ok", {})).isError).toBeFalsy();
    expect(b.breakers()).toEqual([expect.objectContaining({ state: "closed", consecutiveFailures: 0 })]);
    expect(await eventually("A to see the breaker closed", all(a, "closed"), SOON)).toEqual([expect.objectContaining({ consecutiveFailures: 0 })]);
    expect((await a.call(trouble!, ACME, "ok", {})).isError).toBeFalsy();
  }, 30_000);

  it("shows a breaker another replica opened even for an upstream this one never called, and keeps one opened again meanwhile", async () => {
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    const boards = await createRedisUpstreamBoards(redis, { prefix: uniquePrefix("breaker-board-2"), logger });
    const board = await boards.board("tenant:acme");
    const other = createUpstreamPool({ connect: { secrets: { env: {} }, workDir: join(ROOT, ".cache", "breaker-board-c"), version: "test" }, logger, board, perTenant: true });
    opened.push({ pool: other, boards, redis });
    const at = Date.now();
    await board.openBreaker({ upstream: "remote", scope: "acme", openUntil: at + 60_000, failures: 5, at });
    expect(await eventually("the breaker to show open", all(other, "open"), SOON)).toEqual([expect.objectContaining({ upstream: "remote", scope: "acme", consecutiveFailures: 5 })]);
    // A close naming an older opening leaves the newer one open.
    await board.closeBreaker("remote", "acme", at - 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(board.breakers().get(breakerKey("remote", "acme"))?.at).toBe(at);
    await board.closeBreaker("remote", "acme", at);
    expect(await eventually("the breaker to show closed", all(other, "closed"), SOON)).toEqual([expect.objectContaining({ upstream: "remote" })]);
  });
});
