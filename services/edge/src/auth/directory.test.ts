import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChaosError, createInProcessClient, createLogger, createMemoryTenantGenerations, createPgliteDb, hashApiKey, type Db, type TenantGenerations } from "@chaos-core/kit";
import { createSqlTenantRegistry, createTenantDirectoryHandlers, migratePolicy, type TenantRegistry } from "@chaos-core/policy";
import { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCredentialDirectory, type TenantDirectoryClient } from "./directory.js";

const logger = createLogger("test", "silent");

let dir: string;
let db: Db;
let generations: TenantGenerations;
let registry: TenantRegistry;
/** The policy service's directory, in process, counting the lookups that reach it. */
let client: TenantDirectoryClient;
let lookups = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "chaoscore-directory-"));
  db = await createPgliteDb({ dataDir: dir });
  await migratePolicy(db);
  generations = createMemoryTenantGenerations();
  registry = createSqlTenantRegistry(db, { generations });
  const real = createInProcessClient(TenantDirectoryService, createTenantDirectoryHandlers(registry));
  client = {
    resolveApiKey: (req, opts) => (lookups++, real.resolveApiKey(req, opts)),
    getTenantState: (req, opts) => (lookups++, real.getTenantState(req, opts)),
    listTenantUpstreams: (req, opts) => real.listTenantUpstreams(req, opts),
  };
  for (const id of ["acme", "bravo", "carol", "dora"]) await registry.createTenant({ id });
}, 60_000);

afterAll(async () => {
  await db?.close();
  await rm(dir, { recursive: true, force: true });
});

/** How many lookups `fn` made. */
async function counted(fn: () => Promise<unknown>): Promise<number> {
  const before = lookups;
  await fn();
  return lookups - before;
}

describe("the edge's credential directory over the real registry", () => {
  it("answers from its cache while the tenant's generation holds, and asks again once a revoke moves it", async () => {
    const { secret, key } = await registry.createKey({ tenant: "acme", principal: "ann", roles: ["approver"] });
    const directory = createCredentialDirectory({ client, generations, logger });
    expect(await directory.resolveKey(secret)).toMatchObject({ kind: "identity", keyId: key.keyId, identity: { tenant: "acme", principal: "ann", roles: ["approver"] } });
    expect(await counted(() => Promise.all([directory.resolveKey(secret), directory.resolveKey(secret)]))).toBe(0);
    await registry.revokeKey("acme", key.keyId);
    expect(await directory.resolveKey(secret)).toMatchObject({ kind: "refused", refusal: { kind: "key_revoked" } });
  });

  it("refuses a disabled tenant by name and through its keys, and serves it again when enabled", async () => {
    const { secret } = await registry.createKey({ tenant: "bravo", principal: "bob" });
    const directory = createCredentialDirectory({ client, generations, logger });
    expect(await directory.tenantRefusal("bravo")).toBeUndefined();
    expect(await directory.resolveKey(secret)).toMatchObject({ kind: "identity" });
    expect(await counted(() => directory.tenantRefusal("bravo"))).toBe(0);
    await registry.setStatus("bravo", "disabled");
    expect(await directory.tenantRefusal("bravo")).toMatchObject({ kind: "tenant_disabled" });
    expect(await directory.resolveKey(secret)).toMatchObject({ kind: "refused", refusal: { kind: "tenant_disabled" } });
    await registry.setStatus("bravo", "enabled");
    expect(await directory.tenantRefusal("bravo")).toBeUndefined();
    // A tenant the registry does not hold is served (a bootstrap tenant of a keys file or an issuer).
    expect(await directory.tenantRefusal("walk-in")).toBeUndefined();
  });

  it("tells onTenantChange when a tenant read again has a new generation, and not while it holds", async () => {
    const changed: string[] = [];
    const directory = createCredentialDirectory({ client, generations, logger, onTenantChange: (t) => changed.push(t) });
    expect(await directory.tenantRefusal("dora")).toBeUndefined();
    expect(await directory.tenantRefusal("dora")).toBeUndefined();
    expect(changed).toEqual([]);
    await registry.setStatus("dora", "disabled");
    await registry.setStatus("dora", "enabled");
    expect(await directory.tenantRefusal("dora")).toBeUndefined();
    expect(changed).toEqual(["dora"]);
  });

  it("keeps a key's roles of the operator's naming, sorted, and the tenant generation it read, for the call context", async () => {
    const { secret } = await registry.createKey({ tenant: "carol", principal: "sue", roles: ["support", "approver"] });
    const directory = createCredentialDirectory({ client, generations, logger });
    expect(await directory.resolveKey(secret)).toMatchObject({ kind: "identity", identity: { tenant: "carol", principal: "sue", roles: ["approver", "support"] } });
    expect(directory.tenantGeneration("carol")).toBeUndefined();
    await directory.tenantRefusal("carol");
    expect(directory.tenantGeneration("carol")).toBe(await generations.get("carol"));
    await registry.setStatus("carol", "disabled");
    await registry.setStatus("carol", "enabled");
    await directory.tenantRefusal("carol");
    expect(directory.tenantGeneration("carol")).toBe(await generations.get("carol"));
  });

  it("caches nothing without published generations, or when they cannot be read", async () => {
    const { secret } = await registry.createKey({ tenant: "carol", principal: "cy" });
    const none = createCredentialDirectory({ client, logger });
    expect(await counted(() => none.resolveKey(secret).then(() => none.resolveKey(secret)))).toBe(2);
    const broken: TenantGenerations = {
      kind: "broken",
      get: async () => {
        throw new ChaosError("unavailable", "Redis is unavailable");
      },
      publish: async () => undefined,
      seed: async () => undefined,
      announce: async () => undefined,
      watch: async () => async () => undefined,
    };
    const unreadable = createCredentialDirectory({ client, generations: broken, logger });
    expect(await counted(() => unreadable.resolveKey(secret).then(() => unreadable.resolveKey(secret)))).toBe(2);
  });

  it("never caches a key past its expiry nor a made-up key for long, and looks up nothing that is not an issued key", async () => {
    const { secret } = await registry.createKey({ tenant: "dora", principal: "di", expiresAt: new Date(Date.now() + 5_000) });
    const directory = createCredentialDirectory({ client, generations, logger, unknownTtlMs: 50 });
    expect(await counted(() => directory.resolveKey(secret).then(() => directory.resolveKey(secret)))).toBe(2);
    const madeUp = `cc_aaaaaaaa_${"x".repeat(43)}`;
    expect(await directory.resolveKey(madeUp)).toEqual({ kind: "unknown" });
    expect(await counted(() => directory.resolveKey(madeUp))).toBe(0);
    await new Promise((r) => setTimeout(r, 60));
    expect(await counted(() => directory.resolveKey(madeUp))).toBe(1);
    expect(await counted(() => directory.resolveKey("a-file-key"))).toBe(0);
  });

  it("re-checks open streams' credentials with one read of the tenant's generation while nothing changed, and names what a change refused", async () => {
    await registry.createTenant({ id: "erin" });
    const keys = await Promise.all(["eve", "eli", "eda"].map((principal) => registry.createKey({ tenant: "erin", principal })));
    const digests = keys.map((k) => hashApiKey(k.secret));
    let reads = 0;
    const counting: TenantGenerations = { ...generations, get: (tenant) => (reads++, generations.get(tenant)) };
    const directory = createCredentialDirectory({ client, generations: counting, logger });
    expect(await directory.recheck("erin", digests)).toEqual({ tenant: undefined, keys: new Map() });
    reads = 0;
    expect(await counted(() => directory.recheck("erin", digests))).toBe(0);
    expect(reads).toBe(1);

    await registry.revokeKey("erin", keys[1]!.key.keyId);
    const revoked = await directory.recheck("erin", digests);
    expect(revoked.tenant).toBeUndefined();
    expect([...revoked.keys]).toEqual([[digests[1], expect.objectContaining({ kind: "key_revoked" })]]);
    // A digest the registry does not hold, or a key of another tenant, is not in force for this one.
    const stranger = hashApiKey((await registry.createKey({ tenant: "acme", principal: "al" })).secret);
    const unknown = "0".repeat(64);
    expect([...(await directory.recheck("erin", [stranger, unknown])).keys.values()].map((r) => r.kind)).toEqual(["key_revoked", "key_revoked"]);

    await registry.setStatus("erin", "disabled");
    const disabled = await directory.recheck("erin", digests);
    expect(disabled.tenant).toMatchObject({ kind: "tenant_disabled" });
    expect(disabled.keys.get(digests[0]!)).toMatchObject({ kind: "tenant_disabled" });
  });

  it("fails a request closed when the policy service cannot answer", async () => {
    const down = {
      resolveApiKey: async () => {
        throw new ChaosError("unavailable", "the policy service is unreachable");
      },
    } as unknown as TenantDirectoryClient;
    const directory = createCredentialDirectory({ client: down, logger });
    await expect(directory.resolveKey(`cc_bbbbbbbb_${"y".repeat(43)}`)).rejects.toThrow(/unreachable/);
  });
});
