import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serializeLock, upstreamContracts } from "@chaos-core/contracts";
import { ChaosError, createMemoryTenantGenerations, createPgliteDb, createPostgresDb, type Db, type TenantGenerations } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../../test/support/postgres.js";
import { checkPin, checkTenantUpstreamDeclaration } from "../domain/tenant-upstreams.js";
import type { TenantRegistry } from "../domain/tenants.js";
import { migratePolicy } from "./sql-store.js";
import { createSqlTenantRegistry } from "./tenant-registry.js";

const backends = {
  async postgres() {
    const database = await createTestDatabase("chaoscore_tenant_upstreams");
    const db = createPostgresDb({ connectionString: database.url, max: 2 });
    return { db, dispose: async () => (await db.close(), await database.drop()) };
  },
  async pglite() {
    const dir = await mkdtemp(join(tmpdir(), "chaoscore-tenant-upstreams-"));
    const db = await createPgliteDb({ dataDir: dir });
    return { db, dispose: async () => (await db.close(), await rm(dir, { recursive: true, force: true })) };
  },
};

async function refusal(p: Promise<unknown>): Promise<ChaosError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    return err as ChaosError;
  }
  throw new Error("expected a refusal");
}

/** A pin as `upstreams add --tenant` computes it from what the upstream lists. */
function pinOf(upstream: string, tools = ["echo", "add"]) {
  const defs = tools.map((name) => ({ name, description: `the ${name} tool`, inputSchema: { type: "object", properties: { x: { type: "string" } } }, annotations: { readOnlyHint: true } }));
  return checkPin(upstream, serializeLock(upstreamContracts(upstream, defs), upstream));
}

const declaration = (name: string) =>
  checkTenantUpstreamDeclaration(
    { name, url: "https://mcp.example.com/mcp", headers: { Authorization: { env: "CHAOS_CORE_UPSTREAM_SECRET_GH", prefix: "Bearer " } }, timeoutMs: 20_000, risk: { default: "high", tools: { echo: "low" } }, trustAnnotations: false },
    [],
  );

describe.each(Object.keys(backends) as Array<keyof typeof backends>)("tenant upstreams on %s", (backend) => {
  let db: Db;
  let dispose: () => Promise<unknown>;
  let registry: TenantRegistry;
  let generations: TenantGenerations;

  beforeAll(async () => {
    ({ db, dispose } = await backends[backend]());
    await migratePolicy(db);
    generations = createMemoryTenantGenerations();
    registry = createSqlTenantRegistry(db, { generations });
    await registry.createTenant({ id: "acme" });
    await registry.createTenant({ id: "bravo" });
  }, 60_000);
  afterAll(async () => dispose());

  it("adds, lists, shows, disables, enables and removes an upstream, raising the tenant's generation each time", async () => {
    const before = (await registry.getTenant("acme"))!.generation;
    const added = await registry.addUpstream("acme", declaration("github"), pinOf("github"));
    expect(added).toMatchObject({ tenant: "acme", status: "enabled", pinnedTools: 2 });
    expect(added.declaration).toEqual({
      name: "github",
      transport: "http",
      url: "https://mcp.example.com/mcp",
      headers: { Authorization: { env: "CHAOS_CORE_UPSTREAM_SECRET_GH", prefix: "Bearer " } },
      timeoutMs: 20_000,
      risk: { default: "high", tools: { echo: "low" } },
      trustAnnotations: false,
    });
    expect(added.pin).toBe(pinOf("github").text);
    expect(await generations.get("acme")).toBe(before + 1);

    expect((await registry.listUpstreams("acme")).map((u) => u.declaration.name)).toEqual(["github"]);
    expect((await registry.getUpstream("acme", "github"))?.pin).toBe(added.pin);
    expect(await registry.getUpstream("acme", "jira")).toBeUndefined();

    expect((await registry.setUpstreamStatus("acme", "github", "disabled")).status).toBe("disabled");
    expect((await registry.getUpstream("acme", "github"))?.status).toBe("disabled");
    expect((await registry.setUpstreamStatus("acme", "github", "enabled")).status).toBe("enabled");

    const removed = await registry.removeUpstream("acme", "github");
    expect(removed.declaration.name).toBe("github");
    expect(await registry.listUpstreams("acme")).toEqual([]);
    // Its pin went with it (row-level security would hide another tenant's; this is the tenant's own).
    const pins = await db.tenantTx("acme", (q) => q.query("SELECT upstream FROM policy.upstream_pins"));
    expect(pins.rows).toEqual([]);
    expect(await generations.get("acme")).toBe(before + 4);
  });

  it("refuses a second upstream of one name, and a tenant that is not registered", async () => {
    await registry.addUpstream("acme", declaration("jira"), pinOf("jira"));
    const again = await refusal(registry.addUpstream("acme", declaration("jira"), pinOf("jira")));
    expect(again.code).toBe("already_exists");
    expect(again.message).toMatch(/^declaration\.name: tenant "acme" already has an upstream "jira"/);
    expect((await refusal(registry.addUpstream("ghost", declaration("jira"), pinOf("jira")))).code).toBe("not_found");
    expect((await refusal(registry.removeUpstream("acme", "nothere"))).code).toBe("not_found");
    expect((await refusal(registry.removeUpstream("acme", "Not-A-Name"))).message).toMatch(/^name: /);
    await registry.removeUpstream("acme", "jira");
  });

  it("keeps tenants apart: B neither sees nor removes nor disables A's upstream, whatever its name", async () => {
    await registry.addUpstream("acme", declaration("wiki"), pinOf("wiki"));
    expect(await registry.listUpstreams("bravo")).toEqual([]);
    expect(await registry.getUpstream("bravo", "wiki")).toBeUndefined();
    expect((await refusal(registry.removeUpstream("bravo", "wiki"))).code).toBe("not_found");
    expect((await refusal(registry.setUpstreamStatus("bravo", "wiki", "disabled"))).code).toBe("not_found");
    // Row-level security, not only the WHERE clause: B's transaction reads none of A's rows.
    const seen = await db.tenantTx("bravo", async (q) => [
      ...(await q.query("SELECT name FROM policy.tenant_upstreams")).rows,
      ...(await q.query("SELECT upstream FROM policy.upstream_pins")).rows,
    ]);
    expect(seen).toEqual([]);
    const deleted = await db.tenantTx("bravo", (q) => q.query("DELETE FROM policy.tenant_upstreams WHERE tenant_id = 'acme'"));
    expect(deleted.rowCount).toBe(0);
    // B may have its own of the same name, and A's is untouched by it.
    await registry.addUpstream("bravo", declaration("wiki"), pinOf("wiki", ["search"]));
    expect((await registry.getUpstream("acme", "wiki"))?.pinnedTools).toBe(2);
    expect((await registry.getUpstream("bravo", "wiki"))?.pinnedTools).toBe(1);
    await registry.removeUpstream("bravo", "wiki");
    expect((await registry.getUpstream("acme", "wiki"))?.status).toBe("enabled");
  });

  it("re-pins an upstream only while its pin is the one replaced, raising the generation once per change", async () => {
    const added = await registry.addUpstream("acme", declaration("docs"), pinOf("docs"));
    const before = (await registry.getTenant("acme"))!.generation;
    const next = pinOf("docs", ["echo", "add", "search"]);
    const stale = pinOf("docs", ["other"]);

    const repinned = await registry.repinUpstream("acme", "docs", next, pinOf("docs").integrityDigest);
    expect(repinned.changed).toBe(true);
    expect(repinned.upstream).toMatchObject({ pinnedTools: 3, pin: next.text, createdAt: added.createdAt });
    expect(repinned.upstream.pinnedAt.getTime()).toBeGreaterThanOrEqual(added.pinnedAt.getTime());
    expect((await registry.getUpstream("acme", "docs"))?.pin).toBe(next.text);
    expect(await generations.get("acme")).toBe(before + 1);
    expect((await registry.getTenant("acme"))!.generation).toBe(before + 1);

    // The same pin again (a retried approval) changes nothing, the generation included.
    expect((await registry.repinUpstream("acme", "docs", next, pinOf("docs").integrityDigest)).changed).toBe(false);
    expect(await generations.get("acme")).toBe(before + 1);
    // Computed from a pin that is no longer stored: refused, naming the field and the pin in force.
    const raced = await refusal(registry.repinUpstream("acme", "docs", stale, pinOf("docs").integrityDigest));
    expect(raced.code).toBe("failed_precondition");
    expect(raced.message).toContain(`replaces: the pin of upstream "docs" of tenant "acme" is ${next.integrityDigest} now`);
    expect((await refusal(registry.repinUpstream("acme", "docs", stale, "latest"))).message).toMatch(/^replaces: required; pass the integrityDigest/);
    expect((await refusal(registry.repinUpstream("acme", "nothere", stale, next.integrityDigest))).code).toBe("not_found");
    expect((await registry.getUpstream("acme", "docs"))?.pin).toBe(next.text);
    expect(await generations.get("acme")).toBe(before + 1);
  });

  it("keeps tenants apart when re-pinning: B neither re-pins A's upstream nor reaches its pin's row", async () => {
    const pinned = (await registry.getUpstream("acme", "docs"))!;
    const digest = checkPin("docs", pinned.pin).integrityDigest;
    const bravoBefore = (await registry.getTenant("bravo"))!.generation;
    expect((await refusal(registry.repinUpstream("bravo", "docs", pinOf("docs", ["evil"]), digest))).code).toBe("not_found");
    const updated = await db.tenantTx("bravo", (q) => q.query("UPDATE policy.upstream_pins SET pin = 'x' WHERE tenant_id = 'acme'"));
    expect(updated.rowCount).toBe(0);
    expect((await registry.getUpstream("acme", "docs"))?.pin).toBe(pinned.pin);
    expect((await registry.getTenant("bravo"))!.generation).toBe(bravoBefore);
    await registry.removeUpstream("acme", "docs");
  });

  it("a deleted tenant's upstreams are removed with it", async () => {
    await registry.createTenant({ id: "gone" });
    await registry.addUpstream("gone", declaration("wiki"), pinOf("wiki"));
    await registry.markDeleted("gone");
    expect(await registry.listUpstreams("gone")).toEqual([]);
    expect((await refusal(registry.addUpstream("gone", declaration("wiki"), pinOf("wiki")))).code).toBe("failed_precondition");
  });

  it("announces each change once it committed: a watcher reading the tenant's upstreams when told reads the change", async () => {
    const read: Array<Promise<string>> = [];
    const stop = await generations.watch({
      changed: (tenant) => void read.push(registry.listUpstreams(tenant).then((ups) => ups.map((u) => `${u.declaration.name}:${u.status}`).join(",") || "none")),
    });
    try {
      await registry.addUpstream("bravo", declaration("told"), pinOf("told"));
      await registry.setUpstreamStatus("bravo", "told", "disabled");
      await registry.removeUpstream("bravo", "told");
      expect(await Promise.all(read)).toEqual(["told:enabled", "told:disabled", "none"]);
    } finally {
      await stop();
    }
  });

  it("a change whose generation cannot be published is not made", async () => {
    const failing = createSqlTenantRegistry(db, {
      generations: { ...createMemoryTenantGenerations(), publish: async () => Promise.reject(new ChaosError("unavailable", "redis is down")) },
    });
    expect((await refusal(failing.addUpstream("bravo", declaration("later"), pinOf("later")))).message).toMatch(/redis is down/);
    expect(await registry.getUpstream("bravo", "later")).toBeUndefined();
    await registry.addUpstream("bravo", declaration("kept"), pinOf("kept"));
    expect((await refusal(failing.repinUpstream("bravo", "kept", pinOf("kept", ["x"]), pinOf("kept").integrityDigest))).message).toMatch(/redis is down/);
    expect((await registry.getUpstream("bravo", "kept"))?.pin).toBe(pinOf("kept").text);
    await registry.removeUpstream("bravo", "kept");
  });
});
