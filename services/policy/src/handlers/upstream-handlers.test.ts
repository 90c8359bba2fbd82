import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serializeLock, upstreamContracts } from "@chaos-core/contracts";
import type { JsonObject } from "@bufbuild/protobuf";
import { createInProcessClient, createPgliteDb, createPostgresDb, type Db, type ServiceClient } from "@chaos-core/kit";
import { TenantAdminService, UpstreamStatus } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../../test/support/postgres.js";
import { operatorUpstreamNames } from "../adapters/operator-upstreams.js";
import { migratePolicy } from "../adapters/sql-store.js";
import { createSqlTenantRegistry } from "../adapters/tenant-registry.js";
import { createUpstreamUrlCheck } from "../adapters/upstream-address.js";
import { createTenantAdminHandlers, createTenantDirectoryHandlers } from "./tenant-handlers.js";

const backends = {
  async postgres() {
    const database = await createTestDatabase("chaoscore_upstream_admin");
    const db = createPostgresDb({ connectionString: database.url, max: 2 });
    return { db, dispose: async () => (await db.close(), await database.drop()) };
  },
  async pglite() {
    const dir = await mkdtemp(join(tmpdir(), "chaoscore-upstream-admin-"));
    const db = await createPgliteDb({ dataDir: dir });
    return { db, dispose: async () => (await db.close(), await rm(dir, { recursive: true, force: true })) };
  },
};

const operator = (tenant = "acme") => ({ ctx: { tenant, principal: "operator" } });
// The public name the upstream is registered under, as DNS would answer it.
const lookup = async () => [{ address: "93.184.215.14", family: 4 }];
const pinOf = (name: string) => serializeLock(upstreamContracts(name, [{ name: "echo", inputSchema: { type: "object" }, annotations: { readOnlyHint: true } }]), name);
const pinWith = (name: string, schema: Record<string, unknown>) => serializeLock(upstreamContracts(name, [{ name: "echo", inputSchema: schema, annotations: { readOnlyHint: true } }]), name);
const digestOf = (pin: string) => (JSON.parse(pin) as { integrityDigest: string }).integrityDigest;
const decl = (over: Record<string, unknown> = {}): JsonObject => ({ name: "wiki", url: "https://wiki.example.com/mcp", headers: { Authorization: { env: "CHAOS_CORE_UPSTREAM_SECRET_WIKI", prefix: "Bearer " } }, ...over });

async function refused(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a refusal");
}

describe.each(Object.keys(backends) as Array<keyof typeof backends>)("the upstream admin API on %s", (backend) => {
  let db: Db;
  let dispose: () => Promise<unknown>;
  let dir: string;
  let admin: ServiceClient<typeof TenantAdminService>;
  let directory: ServiceClient<typeof TenantDirectoryService>;

  beforeAll(async () => {
    ({ db, dispose } = await backends[backend]());
    await migratePolicy(db);
    dir = await mkdtemp(join(tmpdir(), "chaoscore-operator-upstreams-"));
    await writeFile(join(dir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "files", command: "npx", args: ["server-filesystem"] }] }));
    const registry = createSqlTenantRegistry(db);
    const checks = { operatorUpstreams: operatorUpstreamNames(join(dir, "upstreams.json")), checkUrl: createUpstreamUrlCheck({ lookup }) };
    admin = createInProcessClient(TenantAdminService, createTenantAdminHandlers(registry, checks));
    directory = createInProcessClient(TenantDirectoryService, createTenantDirectoryHandlers(registry));
    await admin.createTenant({ id: "acme" }, operator());
    await admin.createTenant({ id: "bravo" }, operator());
  }, 60_000);
  afterAll(async () => {
    await dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it("answers only the operator, as the tenant and key RPCs do", async () => {
    for (const call of [
      () => admin.listUpstreams({ tenant: "acme" }, { ctx: { tenant: "acme", principal: "ann" } }),
      () => admin.addUpstream({ tenant: "acme", declaration: decl(), pin: pinOf("wiki") }, { ctx: { tenant: "acme", principal: "ann" } }),
      () => admin.removeUpstream({ tenant: "acme", name: "wiki" }, { ctx: { tenant: "acme", principal: "ann" } }),
      () => admin.repinUpstream({ tenant: "acme", name: "wiki", pin: pinOf("wiki"), replaces: digestOf(pinOf("wiki")) }, { ctx: { tenant: "acme", principal: "ann" } }),
    ]) {
      expect((await refused(call())).message).toMatch(/permission_denied|answers only the operator/);
    }
  });

  it("refuses a bad upstream naming the field at its depth, the header's value never echoed", async () => {
    const add = (declaration: JsonObject, pin = pinOf(String(declaration.name))) => refused(admin.addUpstream({ tenant: "acme", declaration, pin }, operator()));
    expect((await add({ name: "files", command: "npx", args: ["x"] })).message).toMatch(/declaration\.command: the tenant registry takes Streamable HTTP upstreams only/);
    const literal = await add(decl({ headers: { Authorization: "Bearer sk-live-abcdef" } }));
    expect(literal.message).toMatch(/declaration\.headers\.Authorization: a literal value would be readable back/);
    expect(literal.message).not.toContain("sk-live-abcdef");
    expect((await add(decl({ name: "Wiki" }))).message).toMatch(/declaration\.name: must be 1-32 characters/);
    expect((await add(decl({ name: "chaoscore" }))).message).toMatch(/declaration\.name: is reserved/);
    expect((await add(decl({ name: "files" }))).message).toMatch(/declaration\.name: "files" is an upstream of the operator's upstreams file/);
    expect((await add(decl({ url: "http://169.254.169.254/" }))).message).toMatch(/declaration\.url: 169\.254\.169\.254 is link-local/);
    expect((await add(decl({ url: "http://127.0.0.1:9/mcp" }))).message).toMatch(/declaration\.url: 127\.0\.0\.1 is loopback/);
    expect((await add(decl({ url: "http://10.0.0.8/mcp" }))).message).toMatch(/declaration\.url: 10\.0\.0\.8 is private/);
    expect((await add(decl(), pinOf("other"))).message).toMatch(/pin\.serverName: must be "wiki"/);
    expect((await admin.listUpstreams({ tenant: "acme" }, operator())).upstreams).toEqual([]);
  });

  it("adds, lists, shows, disables, enables and removes; the directory answers the context's tenant its enabled ones", async () => {
    const added = (await admin.addUpstream({ tenant: "acme", declaration: decl(), pin: pinOf("wiki") }, operator())).upstream!;
    expect(added).toMatchObject({ tenant: "acme", name: "wiki", status: UpstreamStatus.ENABLED, pinnedTools: 1 });
    expect(added.declaration).toEqual({ name: "wiki", url: "https://wiki.example.com/mcp", headers: { Authorization: { env: "CHAOS_CORE_UPSTREAM_SECRET_WIKI", prefix: "Bearer " } }, timeoutMs: 30000, trustAnnotations: true });
    expect((await admin.getUpstream({ tenant: "acme", name: "wiki" }, operator())).pin).toBe(pinOf("wiki"));
    expect((await admin.listUpstreams({ tenant: "acme" }, operator())).upstreams.map((u) => u.name)).toEqual(["wiki"]);

    const served = await directory.listTenantUpstreams({}, { ctx: { tenant: "acme", principal: "edge" } });
    expect(served.upstreams.map((u) => [u.declaration?.name, u.pin])).toEqual([["wiki", pinOf("wiki")]]);
    expect(served.generation).toBeGreaterThan(1n);
    // Tenant B sees none of A's, through either API.
    expect((await directory.listTenantUpstreams({}, { ctx: { tenant: "bravo", principal: "edge" } })).upstreams).toEqual([]);
    expect((await refused(admin.getUpstream({ tenant: "bravo", name: "wiki" }, operator("bravo")))).message).toMatch(/not_found|has no upstream "wiki"/);
    expect((await refused(admin.removeUpstream({ tenant: "bravo", name: "wiki" }, operator("bravo")))).message).toMatch(/has no upstream "wiki"/);

    expect((await admin.setUpstreamStatus({ tenant: "acme", name: "wiki", status: UpstreamStatus.DISABLED }, operator())).upstream?.status).toBe(UpstreamStatus.DISABLED);
    expect((await directory.listTenantUpstreams({}, { ctx: { tenant: "acme", principal: "edge" } })).upstreams).toEqual([]);
    expect((await admin.setUpstreamStatus({ tenant: "acme", name: "wiki", status: UpstreamStatus.ENABLED }, operator())).upstream?.status).toBe(UpstreamStatus.ENABLED);
    expect((await refused(admin.setUpstreamStatus({ tenant: "acme", name: "wiki", status: UpstreamStatus.UNSPECIFIED }, operator()))).message).toMatch(/status: must be ENABLED or DISABLED/);

    expect((await admin.removeUpstream({ tenant: "acme", name: "wiki" }, operator())).upstream?.name).toBe("wiki");
    expect((await admin.listUpstreams({ tenant: "acme" }, operator())).upstreams).toEqual([]);
  });

  it("re-pins an upstream for the operator: the field named on a refusal, the directory serves the new pin at a new generation, another tenant's untouched", async () => {
    await admin.addUpstream({ tenant: "acme", declaration: decl({ name: "drifty" }), pin: pinOf("drifty") }, operator());
    await admin.addUpstream({ tenant: "bravo", declaration: decl({ name: "drifty" }), pin: pinOf("drifty") }, operator("bravo"));
    const before = await directory.listTenantUpstreams({}, { ctx: { tenant: "acme", principal: "edge" } });
    const next = pinWith("drifty", { type: "object", properties: { message: { type: "string" } }, required: ["message"] });
    const repin = (over: Record<string, string> = {}) => admin.repinUpstream({ tenant: "acme", name: "drifty", pin: next, replaces: digestOf(pinOf("drifty")), ...over }, operator());

    expect((await refused(repin({ tenant: "" }))).message).toMatch(/tenant: required/);
    expect((await refused(repin({ name: "Drifty" }))).message).toMatch(/name: "Drifty" is not an upstream name/);
    expect((await refused(repin({ name: "files" }))).message).toMatch(/name: "files" is an upstream of the operator's upstreams file/);
    expect((await refused(repin({ pin: "" }))).message).toMatch(/pin: required/);
    expect((await refused(repin({ pin: pinOf("wiki") }))).message).toMatch(/pin\.serverName: must be "drifty"/);
    const forged = JSON.stringify({ ...(JSON.parse(next) as Record<string, unknown>), integrityDigest: digestOf(pinOf("drifty")) });
    expect((await refused(repin({ pin: forged }))).message).toMatch(/pin: its digests do not match its contracts|integrityDigest/);
    expect((await refused(repin({ replaces: "" }))).message).toMatch(/replaces: required/);
    expect((await refused(repin({ replaces: digestOf(next) }))).message).toMatch(/replaces: the pin of upstream "drifty" of tenant "acme" is sha256:/);
    // Acme's own upstream, by its name, in bravo's call: bravo has none such (row-level security).
    await admin.addUpstream({ tenant: "acme", declaration: decl({ name: "solo" }), pin: pinOf("solo") }, operator());
    const bravos = { tenant: "bravo", name: "solo", pin: pinWith("solo", { type: "object" }), replaces: digestOf(pinOf("solo")) };
    expect((await refused(admin.repinUpstream(bravos, operator("bravo")))).message).toMatch(/tenant "bravo" has no upstream "solo"/);
    expect((await admin.getUpstream({ tenant: "acme", name: "solo" }, operator())).pin).toBe(pinOf("solo"));
    await admin.removeUpstream({ tenant: "acme", name: "solo" }, operator());
    expect((await admin.getUpstream({ tenant: "acme", name: "drifty" }, operator())).pin).toBe(pinOf("drifty"));

    const done = await repin();
    expect(done.changed).toBe(true);
    expect(done.upstream).toMatchObject({ tenant: "acme", name: "drifty", pinnedTools: 1, status: UpstreamStatus.ENABLED });
    const after = await directory.listTenantUpstreams({}, { ctx: { tenant: "acme", principal: "edge" } });
    expect(after.generation).toBeGreaterThan(before.generation);
    expect(after.upstreams.find((u) => u.declaration?.name === "drifty")?.pin).toBe(next);
    // Again (a retry): answered as it is, nothing changed, the generation kept.
    expect((await repin()).changed).toBe(false);
    expect((await directory.listTenantUpstreams({}, { ctx: { tenant: "acme", principal: "edge" } })).generation).toBe(after.generation);
    // Bravo's upstream of the same name keeps its own pin.
    expect((await admin.getUpstream({ tenant: "bravo", name: "drifty" }, operator("bravo"))).pin).toBe(pinOf("drifty"));
    await admin.removeUpstream({ tenant: "acme", name: "drifty" }, operator());
    await admin.removeUpstream({ tenant: "bravo", name: "drifty" }, operator("bravo"));
  });
});
