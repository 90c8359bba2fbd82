import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { entryDigest, serializeLock, upstreamContracts } from "@chaos-core/contracts";
import { Redis } from "ioredis";
import { ContextSigner, createGrpcClient, createInProcessClient, createLogger, createMemoryTenantGenerations, createPgliteDb, type Db, type ServiceClient, type TenantGenerations } from "@chaos-core/kit";
import { createSqlTenantRegistry, createTenantAdminHandlers, createTenantDirectoryHandlers, createUpstreamUrlCheck, migratePolicy } from "@chaos-core/policy";
import { TenantAdminService, UpstreamStatus } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { CapabilityContext } from "./capability.js";
import { BUILT_IN_CAPABILITIES } from "./index.js";
import { createCapabilityRegistry } from "./registry.js";
import { createTenantUpstreams, type TenantUpstreams, type TenantUpstreamsOptions } from "./tenant-upstreams.js";
import { createRedisUpstreamBoards } from "../upstreams/upstream-board.js";
import { TEST_REDIS_URL, uniquePrefix } from "../../../../test/support/redis.js";

/**
 * The tenant-upstreams source against the real tenant registry (policy's SQL registry on PGlite,
 * its directory and admin handlers in process): cached by the generation the policy side
 * publishes, read again when it moves, failing closed when the registry cannot be read.
 */

const logger = createLogger("test", "silent");
const operator = (tenant: string) => ({ ctx: { tenant, principal: "operator" } });
const acme = { tenant: "acme", principal: "alice" };
const bravo = { tenant: "bravo", principal: "bob" };
const pinOf = (name: string) => serializeLock(upstreamContracts(name, [{ name: "echo", inputSchema: { type: "object" }, annotations: { readOnlyHint: true } }]), name);

describe("each tenant's registry upstreams, as cognition serves them", () => {
  let dir: string;
  let db: Db;
  let admin: ServiceClient<typeof TenantAdminService>;
  let directory: ServiceClient<typeof TenantDirectoryService>;
  let generations: TenantGenerations;
  let reads: number;
  let counted: ServiceClient<typeof TenantDirectoryService>;
  let served: TenantUpstreams | undefined;
  const serve = (over: Partial<TenantUpstreamsOptions> = {}) =>
    (served = createTenantUpstreams({ directory: counted, generations, allowedAddresses: [], secrets: { env: {} }, version: "test", logger, ...over }));

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "chaoscore-tenant-upstreams-"));
    db = await createPgliteDb({ dataDir: dir });
    await migratePolicy(db);
    generations = createMemoryTenantGenerations();
    const registry = createSqlTenantRegistry(db, { generations });
    // The registry allows the loopback address here, so that only cognition's own checks stand between a tenant and it.
    admin = createInProcessClient(TenantAdminService, createTenantAdminHandlers(registry, { operatorUpstreams: () => [], checkUrl: createUpstreamUrlCheck({ allowedAddresses: ["127.0.0.1"] }) }));
    directory = createInProcessClient(TenantDirectoryService, createTenantDirectoryHandlers(registry));
    for (const id of ["acme", "bravo"]) await admin.createTenant({ id, displayName: id }, operator(id));
    const declaration: JsonObject = { name: "wiki", url: "http://127.0.0.1:9/mcp", exposure: [{ tenants: ["*"] }] };
    await admin.addUpstream({ tenant: "acme", declaration, pin: pinOf("wiki") }, operator("acme"));
  });

  beforeEach(() => {
    reads = 0;
    counted = {
      ...directory,
      listTenantUpstreams: (req, opts) => {
        reads += 1;
        return directory.listTenantUpstreams(req, opts);
      },
    };
  });

  afterEach(async () => {
    await served?.close();
    served = undefined;
  });

  afterAll(async () => {
    await db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("offers acme its upstream's tools, confined to acme whatever exposure it declared, and bravo nothing", async () => {
    const source = serve();
    const own = await source.forCall(acme);
    expect(own.unavailable).toBeUndefined();
    expect(own.capabilities.map((c) => c.name)).toEqual(["wiki.echo"]);
    expect(own.capabilities[0]!.upstream?.grants).toEqual([{ tenants: ["acme"] }]);
    expect((await source.forCall(bravo)).capabilities).toEqual([]);

    const registry = createCapabilityRegistry(BUILT_IN_CAPABILITIES);
    expect(registry.forCaller(acme, own).get("wiki.echo")?.name).toBe("wiki.echo");
    expect(registry.forCaller(acme, own).descriptors().map((d) => d.name)).toContain("wiki.echo");
    // Handed to another tenant's view by mistake, they are still not there for it.
    expect(registry.forCaller(bravo, own).get("wiki.echo")).toBeUndefined();
    expect(registry.forCaller(bravo, own).list().map((c) => c.name)).not.toContain("wiki.echo");
  });

  it("reads the registry once while the published generation holds, and again as soon as it moves", async () => {
    const source = serve();
    const first = await source.forCall(acme);
    expect((await source.forCall(acme)).capabilities).toBe(first.capabilities);
    expect(reads).toBe(1);

    await admin.setUpstreamStatus({ tenant: "acme", name: "wiki", status: UpstreamStatus.DISABLED }, operator("acme"));
    expect((await source.forCall(acme)).capabilities).toEqual([]);
    expect(reads).toBe(2);
    await admin.setUpstreamStatus({ tenant: "acme", name: "wiki", status: UpstreamStatus.ENABLED }, operator("acme"));
    expect((await source.forCall(acme)).capabilities.map((c) => c.name)).toEqual(["wiki.echo"]);
    expect(reads).toBe(3);
  });

  it("takes the generation a call carries (the edge read it) instead of reading it: no read while it holds, the registry again when it moved", async () => {
    // The real in-process generations the registry publishes to, counting the reads.
    let gets = 0;
    const counting: TenantGenerations = { ...generations, get: (tenant) => ((gets += 1), generations.get(tenant)) };
    const source = serve({ generations: counting });
    const at = (await generations.get("acme"))!;
    const first = await source.forCall({ ...acme, tenantGeneration: at });
    expect(first.capabilities.map((c) => c.name)).toEqual(["wiki.echo"]);
    expect([reads, gets]).toEqual([1, 0]);
    expect((await source.forCall({ ...acme, tenantGeneration: at })).capabilities).toBe(first.capabilities);
    expect([reads, gets]).toEqual([1, 0]);
    // A call without one (cognition's own, stdio, the console) reads it, as before.
    expect((await source.forCall(acme)).capabilities).toBe(first.capabilities);
    expect([reads, gets]).toEqual([1, 1]);

    await admin.setUpstreamStatus({ tenant: "acme", name: "wiki", status: UpstreamStatus.DISABLED }, operator("acme"));
    const moved = (await generations.get("acme"))!;
    expect(moved).not.toBe(at);
    gets = 0;
    expect((await source.forCall({ ...acme, tenantGeneration: moved })).capabilities).toEqual([]);
    expect([reads, gets]).toEqual([2, 0]);
    await admin.setUpstreamStatus({ tenant: "acme", name: "wiki", status: UpstreamStatus.ENABLED }, operator("acme"));
    expect((await source.forCall({ ...acme, tenantGeneration: (await generations.get("acme"))! })).capabilities.map((c) => c.name)).toEqual(["wiki.echo"]);
    expect([reads, gets]).toEqual([3, 0]);
  });

  it("reads again after the maximum age, and without published generations on every call, rebuilding nothing that did not change", async () => {
    let clock = 1_000_000;
    const aging = serve({ now: () => clock });
    const first = await aging.forCall(acme);
    clock += 59_000;
    await aging.forCall(acme);
    expect(reads).toBe(1);
    clock += 2_000;
    expect((await aging.forCall(acme)).capabilities).toBe(first.capabilities);
    expect(reads).toBe(2);
    await aging.close();

    const unpublished = serve({ generations: undefined });
    const once = await unpublished.forCall(acme);
    expect((await unpublished.forCall(acme)).capabilities).toBe(once.capabilities);
    expect(reads).toBe(4);
  });

  it("fails closed: a registry that cannot be read offers none of the tenant's upstreams, and says so naming the registry", async () => {
    // A policy service that is not there: the real gRPC client's failure.
    const gone = createGrpcClient(TenantDirectoryService, "127.0.0.1:1", new ContextSigner("k".repeat(32)));
    let failing = false;
    const source = serve({
      directory: {
        ...directory,
        listTenantUpstreams: (req, opts) => (failing ? gone.client : directory).listTenantUpstreams(req, opts),
      },
    });
    expect((await source.forCall(acme)).capabilities).toHaveLength(1);
    failing = true;
    // The generation moves (or the cache ages): what was cached is not served past a failed read.
    await generations.publish("acme", Number.MAX_SAFE_INTEGER);
    const own = await source.forCall(acme);
    expect(own.capabilities).toEqual([]);
    expect(own.unavailable?.code).toBe("unavailable");
    expect(own.unavailable?.message).toMatch(/^the tenant registry could not be read for tenant "acme", so its own upstreams are not offered now: .*(unavailable|ECONNREFUSED|No connection)/i);

    const view = createCapabilityRegistry(BUILT_IN_CAPABILITIES).forCaller(acme, own);
    expect(view.get("wiki.echo")).toBeUndefined();
    expect(view.unresolved("wiki.echo")?.code).toBe("unavailable");
    // A capability of the registry itself is served as ever.
    expect(view.get("memory.recall")?.name).toBe("memory.recall");
    expect(view.unresolved("memory.recall")).toBeUndefined();
    failing = false;
    gone.close();
    // Read again on the next call once the registry answers.
    expect((await source.forCall(acme)).capabilities.map((c) => c.name)).toEqual(["wiki.echo"]);
  });

  it("does not serve a tenant's upstream whose name the operator's upstreams now use", async () => {
    const source = serve({ operatorNames: new Set(["wiki"]) });
    expect((await source.forCall(acme)).capabilities).toEqual([]);
  });

  it("connects only through the address checks: loopback is refused unless the operator allows it, naming the upstream and its tenant", async () => {
    const [echo] = (await serve().forCall(acme)).capabilities;
    const ctx = { call: acme, signal: AbortSignal.timeout(10_000) } as unknown as CapabilityContext;
    await expect(echo!.handler({}, ctx)).rejects.toThrow(/upstream "wiki" of tenant "acme".*127\.0\.0\.1 is loopback/);
  });

  it("refuses a tool another replica found drifted, from the tenant's own board in Redis, before reading the upstream itself", async () => {
    const prefix = uniquePrefix("tenant-upstreams-board");
    const connections = [0, 1].map(() => new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 }));
    const [finder, replica] = await Promise.all(connections.map((r) => createRedisUpstreamBoards(r, { prefix, logger })));
    try {
      // What the replica that read the upstream put on acme's board: echo drifted from its pin.
      const pinned = entryDigest(upstreamContracts("wiki", [{ name: "echo", inputSchema: { type: "object" }, annotations: { readOnlyHint: true } }]).tools["echo"]!);
      const why = "upstreams/wiki/echo (surface): BREAKING";
      await (await finder!.board("tenant:acme")).put({ upstream: "wiki", tool: "echo", why, pinnedDigest: pinned, at: Date.now() });
      const [echo] = (await serve({ boards: replica! }).forCall(acme)).capabilities;
      expect(echo!.upstream?.drift?.()).toBe(why);
      // Another tenant's board holds none of it.
      expect((await replica!.board("tenant:bravo")).current().size).toBe(0);
    } finally {
      await Promise.all([finder!.close(), replica!.close()]);
      for (const r of connections) r.disconnect();
    }
  });
});
