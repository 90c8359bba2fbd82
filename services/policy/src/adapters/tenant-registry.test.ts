import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChaosError, createMemoryTenantGenerations, createPgliteDb, createPostgresDb, hashApiKey, issuedKeyId, type Db, type TenantGenerations } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../../test/support/postgres.js";
import type { TenantRegistry } from "../domain/tenants.js";
import { migratePolicy } from "./sql-store.js";
import { createSqlTenantRegistry } from "./tenant-registry.js";

const backends = {
  async postgres() {
    const database = await createTestDatabase("chaoscore_tenants");
    const db = createPostgresDb({ connectionString: database.url, max: 2 });
    return { db, dispose: async () => (await db.close(), await database.drop()) };
  },
  async pglite() {
    const dir = await mkdtemp(join(tmpdir(), "chaoscore-tenants-"));
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

describe.each(Object.keys(backends) as Array<keyof typeof backends>)("tenant registry on %s", (backend) => {
  let db: Db;
  let dispose: () => Promise<unknown>;
  let registry: TenantRegistry;
  let generations: TenantGenerations;

  beforeAll(async () => {
    ({ db, dispose } = await backends[backend]());
    await migratePolicy(db);
    generations = createMemoryTenantGenerations();
    registry = createSqlTenantRegistry(db, { generations });
  }, 60_000);
  afterAll(async () => dispose());

  it("creates, lists and shows tenants; a second create of one id is refused", async () => {
    const a = await registry.createTenant({ id: "acme", displayName: "Acme", settings: { memoryRetentionDays: 30 } });
    expect(a).toMatchObject({ id: "acme", displayName: "Acme", status: "enabled", generation: 1 });
    expect(a.settings).toEqual({ councilRetentionDays: 0, memoryRetentionDays: 30, toolsets: [] });
    await registry.createTenant({ id: "bravo" });
    expect((await registry.listTenants()).map((t) => t.id)).toEqual(expect.arrayContaining(["acme", "bravo"]));
    expect(await registry.getTenant("acme")).toMatchObject({ id: "acme", displayName: "Acme" });
    expect(await registry.getTenant("nobody")).toBeUndefined();
    expect((await refusal(registry.createTenant({ id: "acme" }))).code).toBe("already_exists");
    expect(await generations.get("acme")).toBe(1);
  });

  it("refuses bad input naming the field", async () => {
    expect((await refusal(registry.createTenant({ id: "Bad Id" }))).message).toMatch(/^id: /);
    expect((await refusal(registry.createTenant({ id: "x1", settings: { toolsets: ["core", "nope"] } }))).message).toMatch(
      /^settings\.toolsets\[1\]: "nope" is not a toolset/,
    );
    expect((await refusal(registry.createTenant({ id: "x2", settings: { memoryRetentionDays: -1 } }))).message).toMatch(/^settings\.memoryRetentionDays: /);
    expect((await refusal(registry.createKey({ tenant: "acme", principal: "operator" }))).message).toMatch(/^principal: "operator" is reserved/);
    expect((await refusal(registry.createKey({ tenant: "acme", principal: "ann", roles: ["support", "Admin"] }))).message).toMatch(/^roles\[1\]: "Admin" is not a role name: a role name is a lowercase letter/);
    expect((await refusal(registry.createKey({ tenant: "acme", principal: "ann", roles: ["support", "support"] }))).message).toMatch(/^roles\[1\]: "support" is listed twice/);
    expect((await refusal(registry.createKey({ tenant: "acme", principal: "ann", roles: Array.from({ length: 33 }, (_, i) => `r${i}`) }))).message).toMatch(/^roles: holds 33 roles; at most 32/);
    expect((await refusal(registry.createKey({ tenant: "acme", principal: "ann", expiresAt: new Date(Date.now() - 1000) }))).message).toMatch(/^expires_at: /);
    expect((await refusal(registry.createKey({ tenant: "ghost", principal: "ann" }))).code).toBe("not_found");
    expect((await refusal(registry.revokeKey("acme", "NOT-AN-ID"))).message).toMatch(/^key_id: /);
  });

  it("keeps a tenant's ledger policy, checked field by field, and answers it with the tenant's state", async () => {
    const wire = { version: "wire-acme-2", max_notional: 5000, daily_cap: 9000, hitl_threshold: 0, min_confidence: 0.8, allowed_actions: [], per_asset_limits: {} };
    const tools = { version: "acme-tools-1", tools: { "stripe.create_charge": { risk: "high" as const, resources: ["acct_1"] } } };
    const bad = (ledgerPolicy: unknown) => refusal(registry.createTenant({ id: "lp-bad", settings: { ledgerPolicy: ledgerPolicy as never } }));
    expect((await bad({ spend_policies: { wire: { ...wire, daily_cap: -1 } } })).message).toMatch(/^settings\.ledgerPolicy\.spend_policies\.wire\.daily_cap: /);
    expect((await bad({ spend_policies: { wire: { ...wire, max_notionl: 1 } } })).message).toMatch(/^settings\.ledgerPolicy\.spend_policies\.wire: .*max_notionl/);
    expect((await bad({ tool_approval: { ...tools, tools: { "stripe.*": { risk: "high", resources: ["acct_1"] } } } })).message).toMatch(
      /^settings\.ledgerPolicy\.tool_approval: .*wildcard/,
    );
    expect((await bad({ spend: {} })).message).toMatch(/^settings\.ledgerPolicy: .*spend/);
    expect(await registry.getTenant("lp-bad")).toBeUndefined();

    const t = await registry.createTenant({ id: "lp", settings: { ledgerPolicy: { spend_policies: { wire } } } });
    expect(t.settings.ledgerPolicy).toEqual({ spend_policies: { wire } });
    const changed = await registry.updateSettings("lp", { ...t.settings, ledgerPolicy: { tool_approval: tools } });
    expect(changed.generation).toBe(t.generation + 1);
    expect(await registry.tenantState("lp")).toMatchObject({ generation: changed.generation, ledgerPolicy: { tool_approval: tools } });
    const { ledgerPolicy: _cleared, ...without } = changed.settings;
    expect((await registry.updateSettings("lp", without)).settings.ledgerPolicy).toBeUndefined();
    expect((await registry.tenantState("lp")).ledgerPolicy).toBeUndefined();
  });

  it("issues a key shown once: only its digest is stored, and the digest resolves it", async () => {
    const { key, secret } = await registry.createKey({ tenant: "acme", principal: "ann", roles: ["approver"] });
    expect(secret).toMatch(/^cc_[a-z2-7]{8}_[A-Za-z0-9_-]{43}$/);
    expect(issuedKeyId(secret)).toBe(key.keyId);
    expect(key).toMatchObject({ tenant: "acme", principal: "ann", roles: ["approver"] });
    const stored = await db.adminTx((q) => q.query<Record<string, unknown>>("SELECT * FROM policy.api_keys WHERE key_id = $1", [key.keyId]));
    expect(JSON.stringify(stored.rows)).not.toContain(secret.slice(12));
    const resolved = await registry.resolveKey(hashApiKey(secret));
    expect(resolved).toMatchObject({ status: "active", tenantStatus: "enabled", key: { keyId: key.keyId, tenant: "acme", principal: "ann" } });
    expect(resolved!.key.lastUsedAt).toBeInstanceOf(Date);
    expect(await registry.resolveKey(hashApiKey(`${secret}x`))).toBeUndefined();
    // Creating the key raised the tenant's generation, and the published one with it.
    expect(resolved!.generation).toBe(await generations.get("acme"));
  });

  it("a revoke, a disable and an expiry each show in the next resolve, with a new generation", async () => {
    const { key, secret } = await registry.createKey({ tenant: "bravo", principal: "bob" });
    const digest = hashApiKey(secret);
    const before = (await registry.resolveKey(digest))!.generation;
    await registry.setStatus("bravo", "disabled");
    expect(await registry.resolveKey(digest)).toMatchObject({ status: "active", tenantStatus: "disabled" });
    expect((await registry.tenantState("bravo")).status).toBe("disabled");
    await registry.setStatus("bravo", "enabled");
    const revoked = await registry.revokeKey("bravo", key.keyId);
    expect(revoked.revokedAt).toBeInstanceOf(Date);
    const after = (await registry.resolveKey(digest))!;
    expect(after.status).toBe("revoked");
    expect(after.generation).toBe(before + 3);
    expect(await generations.get("bravo")).toBe(before + 3);

    const soon = await registry.createKey({ tenant: "bravo", principal: "bob", expiresAt: new Date(Date.now() + 1500) });
    expect((await registry.resolveKey(hashApiKey(soon.secret)))!.status).toBe("active");
    await new Promise((r) => setTimeout(r, 1600));
    expect((await registry.resolveKey(hashApiKey(soon.secret)))!.status).toBe("expired");
  });

  it("keys of one tenant are not listed or revoked through another", async () => {
    const { key } = await registry.createKey({ tenant: "acme", principal: "carl" });
    expect((await registry.listKeys("bravo")).map((k) => k.keyId)).not.toContain(key.keyId);
    expect((await refusal(registry.revokeKey("bravo", key.keyId))).code).toBe("not_found");
    // Row-level security, not only the WHERE clause: bravo's transaction sees no row of acme's keys.
    const seen = await db.tenantTx("bravo", (q) => q.query("SELECT key_id FROM policy.api_keys WHERE tenant_id = 'acme'"));
    expect(seen.rows).toEqual([]);
  });

  it("an unregistered tenant is served at generation 0; a deleted one never again, its keys revoked", async () => {
    expect(await registry.tenantState("walk-in")).toEqual({ registered: false, status: "enabled", generation: 0, toolsets: [] });
    await registry.createTenant({ id: "narrow", settings: { toolsets: ["core"] } });
    expect(await registry.tenantState("narrow")).toMatchObject({ registered: true, toolsets: ["core"] });
    await registry.createTenant({ id: "doomed" });
    const { secret } = await registry.createKey({ tenant: "doomed", principal: "dan" });
    const { tenant, revokedKeys } = await registry.markDeleted("doomed");
    expect(tenant.status).toBe("deleted");
    expect(revokedKeys).toBe(1);
    expect(await registry.resolveKey(hashApiKey(secret))).toMatchObject({ status: "revoked", tenantStatus: "deleted" });
    expect((await refusal(registry.setStatus("doomed", "enabled"))).code).toBe("failed_precondition");
  });

  it("a change whose generation cannot be published is not made, nor announced", async () => {
    const memory = createMemoryTenantGenerations();
    const heard: string[] = [];
    await memory.watch({ changed: (tenant) => void heard.push(tenant) });
    const failing = createSqlTenantRegistry(db, {
      generations: {
        ...memory,
        publish: async () => {
          throw new ChaosError("unavailable", "Redis is unavailable");
        },
      },
    });
    expect((await refusal(failing.setStatus("acme", "disabled"))).code).toBe("unavailable");
    expect((await registry.getTenant("acme"))!.status).toBe("enabled");
    expect(heard).toEqual([]);
  });

  it("announces each change once it committed: a watcher reading the tenant when told reads the change", async () => {
    const read: Array<Promise<string | undefined>> = [];
    const stop = await generations.watch({ changed: (tenant, generation) => void read.push(registry.getTenant(tenant).then((t) => `${t?.status}@${t?.generation}/${generation}`)) });
    try {
      await registry.createTenant({ id: "told" });
      const disabled = await registry.setStatus("told", "disabled");
      await registry.createKey({ tenant: "told", principal: "tia" });
      expect(await Promise.all(read)).toEqual(["enabled@1/1", `disabled@${disabled.generation}/${disabled.generation}`, `disabled@3/3`]);
    } finally {
      await stop();
    }
  });
});
