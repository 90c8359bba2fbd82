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

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_memory_handlers");
  db = createPostgresDb({ connectionString: database.url });
  await migrateMemory(db);
  // A frozen clock: both transports then produce byte-identical timestamps.
  const store = createSqlMemoryStore(db, { now: () => NOW });
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

  it("refuses a gRPC call signed with another key", async () => {
    const stranger = createGrpcClient(MemoryService, `127.0.0.1:${server.port}`, new ContextSigner("x".repeat(40)));
    try {
      expect((await codeOf(stranger.client.stats({}, ctx("alpha")))).code).toBe("unauthenticated");
    } finally {
      stranger.close();
    }
  });
});
