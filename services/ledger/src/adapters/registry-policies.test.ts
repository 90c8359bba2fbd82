import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChaosError, createInProcessClient, createLogger, createMemoryTenantGenerations, createPgliteDb, type Db, type TenantGenerations } from "@chaos-core/kit";
import { createSqlTenantRegistry, createTenantDirectoryHandlers, migratePolicy, type TenantRegistry } from "@chaos-core/policy";
import { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REFERENCE_SPEND_POLICIES } from "../domain/spend-policies.js";
import { parseOperatorPolicies } from "./operator-policies.js";
import { createRegistryOperatorPolicies } from "./registry-policies.js";

const logger = createLogger("test", "silent");
const FILE_TOOLS = { version: "file-tools-1", tools: { "stripe.create_charge": { risk: "high" as const, resources: ["acct_file"] } } };
const REGISTRY_TOOLS = { version: "registry-tools-1", tools: { "stripe.create_charge": { risk: "critical" as const, resources: ["acct_registry"] } } };
const TIGHT_WIRE = { ...REFERENCE_SPEND_POLICIES.wire, version: "wire-acme-2", max_notional: 100 };

describe("the tenant registry's ledger policies over the file's", () => {
  let dir: string;
  let db: Db;
  let registry: TenantRegistry;
  let generations: TenantGenerations;
  let reads = 0;
  const file = parseOperatorPolicies({ defaults: { tool_approval: FILE_TOOLS } }, "ledger-policy.json");

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "chaoscore-ledger-registry-"));
    db = await createPgliteDb({ dataDir: dir });
    await migratePolicy(db);
    generations = createMemoryTenantGenerations();
    registry = createSqlTenantRegistry(db, { generations });
  }, 60_000);
  afterAll(async () => {
    await db.close();
    await rm(dir, { recursive: true, force: true });
  });

  function policiesWith(options: { generations?: TenantGenerations } = {}) {
    const handlers = createTenantDirectoryHandlers(registry);
    const counting: typeof handlers = {
      ...handlers,
      getTenantState: (req, ctx) => {
        reads += 1;
        return handlers.getTenantState(req, ctx);
      },
    };
    return createRegistryOperatorPolicies(file, { client: createInProcessClient(TenantDirectoryService, counting), logger, ...options });
  }

  it("serves the file's policies to a tenant the registry holds none for, reading the registry once per generation", async () => {
    const policies = policiesWith({ generations });
    await registry.createTenant({ id: "plain" });
    reads = 0;
    for (const tenant of ["plain", "plain", "unregistered", "unregistered"]) {
      const p = await policies.forTenant(tenant);
      expect(p.spendPolicies).toEqual(REFERENCE_SPEND_POLICIES);
      expect(p.toolPolicy).toEqual(FILE_TOOLS);
    }
    expect(reads).toBe(2);
  });

  it("a tenant's registry section wins key by key, from its next call, and clearing it brings back the file's", async () => {
    const policies = policiesWith({ generations });
    const t = await registry.createTenant({ id: "acme" });
    expect((await policies.forTenant("acme")).toolPolicy).toEqual(FILE_TOOLS);

    await registry.updateSettings("acme", { ...t.settings, ledgerPolicy: { spend_policies: { wire: TIGHT_WIRE } } });
    let p = await policies.forTenant("acme");
    expect(p.spendPolicies).toEqual({ wire: TIGHT_WIRE });
    expect(p.toolPolicy).toEqual(FILE_TOOLS);

    await registry.updateSettings("acme", { ...t.settings, ledgerPolicy: { tool_approval: REGISTRY_TOOLS } });
    p = await policies.forTenant("acme");
    expect(p.spendPolicies).toEqual(REFERENCE_SPEND_POLICIES);
    expect(p.toolPolicy).toEqual(REGISTRY_TOOLS);
    // Another tenant is not touched by acme's section.
    expect((await policies.forTenant("plain")).toolPolicy).toEqual(FILE_TOOLS);

    await registry.updateSettings("acme", t.settings);
    expect((await policies.forTenant("acme")).toolPolicy).toEqual(FILE_TOOLS);
  });

  it("without published generations it reads the registry on every call", async () => {
    const policies = policiesWith();
    reads = 0;
    await policies.forTenant("acme");
    await policies.forTenant("acme");
    expect(reads).toBe(2);
  });

  it("fails closed, naming the registry, when the registry cannot be read", async () => {
    const down = createInProcessClient(TenantDirectoryService, {
      ...createTenantDirectoryHandlers(registry),
      getTenantState: () => Promise.reject(new ChaosError("unavailable", "connect ECONNREFUSED")),
    });
    const policies = createRegistryOperatorPolicies(file, { client: down, logger, generations });
    const err = await policies.forTenant("acme").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChaosError);
    expect(err).toMatchObject({ code: "unavailable", message: expect.stringMatching(/tenant registry .* "acme".*nothing is decided/) });
  });
});
