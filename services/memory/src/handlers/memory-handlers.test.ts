import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ChaosError,
  ContextSigner,
  createGrpcClient,
  createInProcessClient,
  createLogger,
  createPostgresDb,
  type CallContext,
  type Db,
  type GrpcClient,
  type RunningGrpcServer,
  type ServiceClient,
} from "@chaos-core/kit";
import {
  DeleteDataResponseSchema,
  ForgetResponseSchema,
  MemoryService,
  RecallResponseSchema,
  RememberResponseSchema,
  SearchResponseSchema,
  StatsResponseSchema,
} from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../../test/support/postgres.js";
import { migrateMemory } from "../adapters/migrations.js";
import { createSqlMemoryStore } from "../adapters/sql-store.js";
import type { MemoryStore } from "../domain/memory-store.js";
import { startMemoryServer } from "../server.js";
import { createMemoryHandlers } from "./memory-handlers.js";

type Client = ServiceClient<typeof MemoryService>;

const KEY = "memory-handlers-test-key-0123456789abcdef";
const NOW = new Date("2031-05-06T07:08:09.123Z");

let database: TestDatabase;
let db: Db;
let server: RunningGrpcServer;
let grpc: GrpcClient<typeof MemoryService>;
let inProcess: Client;
/** The same database written a day before NOW: what retention finds old. */
let dayOld: ReturnType<typeof createSqlMemoryStore>;
const DAY_BEFORE = new Date(NOW.getTime() - 86_400_000);

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_memory_handlers");
  db = createPostgresDb({ connectionString: database.url });
  await migrateMemory(db);
  // A frozen clock: both transports then produce byte-identical timestamps.
  const store = createSqlMemoryStore(db, { now: () => NOW });
  dayOld = createSqlMemoryStore(db, { now: () => DAY_BEFORE });
  const signer = new ContextSigner(KEY);
  inProcess = createInProcessClient(MemoryService, createMemoryHandlers(store));
  server = await startMemoryServer({ host: "127.0.0.1", port: 0, signer, store, logger: createLogger("memory-test", "silent") });
  grpc = createGrpcClient(MemoryService, `127.0.0.1:${server.port}`, signer);
});

afterAll(async () => {
  grpc?.close();
  await server?.shutdown(1000);
  await db?.close();
  await database?.drop();
});

const ctx = (tenant: string): { ctx: CallContext } => ({ ctx: { tenant, principal: "tester" } });

const v = (value: JsonValue) => fromJson(ValueSchema, value);

/** One session of calls a client would make; returns every response as proto JSON. */
async function scenario(client: Client, tenant: string): Promise<unknown[]> {
  const o = ctx(tenant);
  const out: unknown[] = [];
  out.push(toJson(RememberResponseSchema, await client.remember({ key: "doc/1", value: v({ title: "Alpha plan" }), tags: ["plan", "q3"] }, o)));
  for (let i = 2; i <= 5; i++) {
    const res = await client.remember({ key: `doc/${i}`, value: v([i, `alpha ${i}`]), tags: i % 2 ? ["plan"] : [], ttlSeconds: i * 60 }, o);
    out.push(toJson(RememberResponseSchema, res));
  }
  out.push(toJson(RememberResponseSchema, await client.remember({ key: "null", value: v(null) }, o)));
  out.push(toJson(RecallResponseSchema, await client.recall({ key: "doc/3" }, o)));
  out.push(toJson(RecallResponseSchema, await client.recall({ key: "missing" }, o)));
  const first = await client.search({ query: "ALPHA", limit: 3 }, o);
  out.push(toJson(SearchResponseSchema, first));
  out.push(toJson(SearchResponseSchema, await client.search({ query: "ALPHA", limit: 3, cursor: first.nextCursor }, o)));
  out.push(toJson(SearchResponseSchema, await client.search({ tags: ["plan"] }, o)));
  out.push(toJson(ForgetResponseSchema, await client.forget({ key: "doc/2" }, o)));
  out.push(toJson(ForgetResponseSchema, await client.forget({ key: "doc/2" }, o)));
  out.push(toJson(StatsResponseSchema, await client.stats({}, o)));
  return out;
}

async function codeOf(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ChaosError);
  return { code: (err as ChaosError).code, message: (err as ChaosError).message };
}

describe("memory handlers", () => {
  it("answer the same over the in-process and the gRPC transport", async () => {
    const local = await scenario(inProcess, "alpha");
    const remote = await scenario(grpc.client, "beta");
    expect(remote).toEqual(local);

    // And the answers are the right ones, not merely equal.
    const [remembered, , , , , , recalled, missing, page1, page2, byTag, forgot, forgotAgain, stats] = local as Array<Record<string, unknown>>;
    expect(remembered).toEqual({
      item: { key: "doc/1", value: { title: "Alpha plan" }, tags: ["plan", "q3"], createdAt: NOW.toISOString(), updatedAt: NOW.toISOString() },
    });
    expect(recalled).toMatchObject({ item: { key: "doc/3", value: [3, "alpha 3"], expiresAt: new Date(NOW.getTime() + 180_000).toISOString() } });
    expect(missing).toEqual({});
    expect((page1?.items as Array<{ key: string }>).map((i) => i.key)).toEqual(["doc/1", "doc/2", "doc/3"]);
    expect((page2?.items as Array<{ key: string }>).map((i) => i.key)).toEqual(["doc/4", "doc/5"]);
    expect(page2?.nextCursor).toBeUndefined();
    expect((byTag?.items as Array<{ key: string }>).map((i) => i.key)).toEqual(["doc/1", "doc/3", "doc/5"]);
    expect(forgot).toEqual({ deleted: true });
    expect(forgotAgain).toEqual({});
    expect(stats).toMatchObject({ items: "5", valueBytes: String(22 + 13 * 3 + 4), topTags: [{ tag: "plan", count: "3" }, { tag: "q3", count: "1" }] });
  });

  it("carries timestamps and counts that decode to the stored values", async () => {
    const stats = await grpc.client.stats({}, ctx("beta"));
    expect(stats.items).toBe(5n);
    expect(timestampDate(stats.oldestUpdate!)).toEqual(NOW);
  });

  it("keeps a ChaosError code and message across the gRPC hop", async () => {
    const cases: Array<(c: Client) => Promise<unknown>> = [
      (c) => c.remember({ key: "", value: v(1) }, ctx("alpha")),
      (c) => c.remember({ key: "k" }, ctx("alpha")),
      (c) => c.remember({ key: "k", value: { kind: { case: "numberValue", value: Number.NaN } } }, ctx("alpha")),
      (c) => c.search({ query: "x", cursor: "bogus" }, ctx("alpha")),
      (c) => c.recall({ key: "x".repeat(513) }, ctx("alpha")),
    ];
    for (const call of cases) {
      const local = await codeOf(call(inProcess));
      const remote = await codeOf(call(grpc.client));
      expect(local.code).toBe("invalid_argument");
      expect(remote).toEqual(local);
    }
    expect((await codeOf(cases[1]!(grpc.client))).message).toMatch(/value is required/);
    expect((await codeOf(cases[2]!(grpc.client))).message).toMatch(/value is not valid JSON/);
  });

  it("serves each caller its own tenant over gRPC", async () => {
    await grpc.client.remember({ key: "only-gamma", value: v(true) }, ctx("gamma"));
    expect((await grpc.client.recall({ key: "only-gamma" }, ctx("gamma"))).item?.key).toBe("only-gamma");
    expect((await grpc.client.recall({ key: "only-gamma" }, ctx("delta"))).item).toBeUndefined();
  });

  describe.each([
    ["in-process", () => inProcess],
    ["gRPC", () => grpc.client],
  ])("tenant data over the %s transport", (name, client) => {
    const mine = `${name === "gRPC" ? "grpc" : "local"}-mine`;
    const theirs = `${name === "gRPC" ? "grpc" : "local"}-theirs`;

    async function exportOf(tenant: string): Promise<string[]> {
      const lines: string[] = [];
      for await (const res of client().exportData({}, ctx(tenant))) lines.push(res.line);
      return lines;
    }

    it("exports, applies retention to and deletes only the caller's tenant", async () => {
      await dayOld.remember(mine, { key: "old-note", value: { text: "from yesterday" }, tags: ["t"] });
      await dayOld.remember(mine, { key: "episode:sig:1", value: { status: "ok" } });
      await client().remember({ key: "procedure:sig", value: v({ capabilities: ["memory.recall"] }) }, ctx(mine));
      await client().remember({ key: "new-note", value: v("today"), ttlSeconds: 60 }, ctx(mine));
      await dayOld.remember(theirs, { key: "old-note", value: "theirs, old" });
      await client().remember({ key: "their-note", value: v(1) }, ctx(theirs));

      const lines = await exportOf(mine);
      expect(lines).toEqual([
        `{"type":"header","format":"chaos-core-memory/1","tenant":"${mine}"}\n`,
        `{"type":"memory.item","tenant":"${mine}","key":"episode:sig:1","value":{"status":"ok"},"tags":[],"created_at":"${DAY_BEFORE.toISOString()}","updated_at":"${DAY_BEFORE.toISOString()}","expires_at":null}\n`,
        `{"type":"memory.item","tenant":"${mine}","key":"new-note","value":"today","tags":[],"created_at":"${NOW.toISOString()}","updated_at":"${NOW.toISOString()}","expires_at":"${new Date(NOW.getTime() + 60_000).toISOString()}"}\n`,
        `{"type":"memory.item","tenant":"${mine}","key":"old-note","value":{"text":"from yesterday"},"tags":["t"],"created_at":"${DAY_BEFORE.toISOString()}","updated_at":"${DAY_BEFORE.toISOString()}","expires_at":null}\n`,
        `{"type":"memory.item","tenant":"${mine}","key":"procedure:sig","value":{"capabilities":["memory.recall"]},"tags":[],"created_at":"${NOW.toISOString()}","updated_at":"${NOW.toISOString()}","expires_at":null}\n`,
      ]);
      expect((await exportOf(theirs)).map((l) => JSON.parse(l).key)).toEqual([undefined, "old-note", "their-note"]);

      // An hour's retention: yesterday's items go, today's stay; the other tenant's old item stays.
      const retention = await client().applyRetention({ maxAgeSeconds: 3600 }, ctx(mine));
      expect(retention.deleted).toBe(2n);
      expect(timestampDate(retention.cutoff!)).toEqual(new Date(NOW.getTime() - 3_600_000));
      expect((await exportOf(mine)).map((l) => JSON.parse(l).key)).toEqual([undefined, "new-note", "procedure:sig"]);
      expect((await exportOf(theirs)).map((l) => JSON.parse(l).key)).toEqual([undefined, "old-note", "their-note"]);

      await client().remember({ key: "episode:sig:2", value: v(2) }, ctx(mine));
      const deleted = await client().deleteData({}, ctx(mine));
      expect(toJson(DeleteDataResponseSchema, deleted)).toEqual({ items: "3", episodes: "1", procedures: "1" });
      expect(await exportOf(mine)).toEqual([`{"type":"header","format":"chaos-core-memory/1","tenant":"${mine}"}\n`]);
      expect((await exportOf(theirs)).map((l) => JSON.parse(l).key)).toEqual([undefined, "old-note", "their-note"]);
      expect(toJson(DeleteDataResponseSchema, await client().deleteData({}, ctx(mine)))).toEqual({});
    });

    it("streams an export of many pages whole and in order", async () => {
      const tenant = `${mine}-many`;
      // 1,234 rows: three pages of the store's 500.
      await db.tenantTx(tenant, (q) =>
        q.query(
          `INSERT INTO memory.items (tenant_id, key, value, created_at, updated_at)
           SELECT $1, 'item-' || lpad(i::text, 5, '0'), json_build_object('i', i), $2::timestamptz, $2::timestamptz
             FROM generate_series(1, 1234) AS i`,
          [tenant, NOW.toISOString()],
        ),
      );
      const lines = await exportOf(tenant);
      expect(lines).toHaveLength(1235);
      expect(lines.slice(1).map((l) => JSON.parse(l).value.i)).toEqual(Array.from({ length: 1234 }, (_, i) => i + 1));
      expect((await client().deleteData({}, ctx(tenant))).items).toBe(1234n);
    });

    it("refuses a retention age of 0, naming max_age_seconds, and deletes nothing", async () => {
      const tenant = `${mine}-bad`;
      await dayOld.remember(tenant, { key: "k", value: 1 });
      const err = await codeOf(client().applyRetention({ maxAgeSeconds: 0 }, ctx(tenant)));
      expect(err).toEqual({
        code: "invalid_argument",
        message: "max_age_seconds must be a whole number of seconds from 1 to 4294967295 (items last written longer ago are deleted); got 0",
      });
      expect((await client().recall({ key: "k" }, ctx(tenant))).item?.key).toBe("k");
    });
  });

  it("ends the export on the server when a gRPC client stops reading and cancels it", async () => {
    const tenant = "cancelling-reader";
    // About 10 MB: far more than the HTTP/2 windows and socket buffers hold, so the server is
    // waiting for the client to read when the client goes away.
    await db.tenantTx(tenant, (q) =>
      q.query(
        `INSERT INTO memory.items (tenant_id, key, value, created_at, updated_at)
         SELECT $1, 'item-' || lpad(i::text, 5, '0'), json_build_object('text', repeat('x', 2000)), $2::timestamptz, $2::timestamptz
           FROM generate_series(1, 5000) AS i`,
        [tenant, NOW.toISOString()],
      ),
    );
    const inner = createSqlMemoryStore(db);
    let ended = false;
    const watched: MemoryStore = {
      ...inner,
      exportItems: (t) =>
        (async function* () {
          try {
            yield* inner.exportItems(t);
          } finally {
            ended = true;
          }
        })(),
    };
    const signer = new ContextSigner(KEY);
    const own = await startMemoryServer({ host: "127.0.0.1", port: 0, signer, store: watched, logger: createLogger("memory-test", "silent") });
    const client = createGrpcClient(MemoryService, `127.0.0.1:${own.port}`, signer);
    try {
      let read = 0;
      for await (const _ of client.client.exportData({}, ctx(tenant))) if (++read === 10) break;
      const deadline = Date.now() + 5000;
      while (!ended && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(ended).toBe(true);
    } finally {
      client.close();
      await own.shutdown(1000);
      await db.tenantTx(tenant, (q) => q.query("DELETE FROM memory.items"));
    }
  });

  it("refuses a gRPC call signed with another key", async () => {
    const stranger = createGrpcClient(MemoryService, `127.0.0.1:${server.port}`, new ContextSigner("x".repeat(40)));
    try {
      expect((await codeOf(stranger.client.stats({}, ctx("alpha")))).code).toBe("unauthenticated");
    } finally {
      stranger.close();
    }
  });
});
