import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInProcessClient, createLogger, type Db } from "@chaos-core/kit";
import { createCouncilHandlers, createSqlCouncilStore, migrateCouncil } from "@chaos-core/council";
import { createMemoryHandlers, createSqlMemoryStore, migrateMemory } from "@chaos-core/memory";
import { createPolicyHandlers, createSqlPolicyStore, createSqlTenantRegistry, createTenantAdminHandlers, migratePolicy } from "@chaos-core/policy";
import { TenantAdminService } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openEmbeddedDb } from "./data-dir-layout.js";
import { startRetentionSweeps, type TenantDataServices } from "./tenant-data.js";

let dir: string;
let db: Db;
let services: TenantDataServices;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "chaoscore-retention-"));
  db = await openEmbeddedDb(dir, { create: true });
  for (const migrate of [migrateMemory, migrateCouncil, migratePolicy]) await migrate(db);
  services = {
    admin: createInProcessClient(TenantAdminService, createTenantAdminHandlers(createSqlTenantRegistry(db))),
    memory: createInProcessClient(MemoryService, createMemoryHandlers(createSqlMemoryStore(db))),
    council: createInProcessClient(CouncilService, createCouncilHandlers(createSqlCouncilStore(db))),
    policy: createInProcessClient(PolicyService, createPolicyHandlers(createSqlPolicyStore(db))),
    // Retention never touches the ledger (append-only).
    ledger: {} as TenantDataServices["ledger"],
  };
}, 60_000);

afterAll(async () => {
  await db?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("the standalone's retention sweeps", () => {
  it("remove, per the registry's settings, what a tenant has not written for longer, and nothing else", async () => {
    const op = (tenant: string) => ({ ctx: { tenant, principal: "operator" } });
    await services.admin.createTenant({ id: "keeps-30", settings: { memoryRetentionDays: 30 } }, op("default"));
    await services.admin.createTenant({ id: "keeps-all" }, op("default"));
    for (const tenant of ["keeps-30", "keeps-all"]) {
      await services.memory.remember({ key: "old", value: { kind: { case: "stringValue", value: "old" } } }, op(tenant));
      await services.memory.remember({ key: "new", value: { kind: { case: "stringValue", value: "new" } } }, op(tenant));
    }
    // Forty days ago, as far as the rows say.
    await db.adminTx((q) => q.query("UPDATE memory.items SET updated_at = now() - interval '40 days', created_at = now() - interval '40 days' WHERE key = 'old'"));
    const sweeps = startRetentionSweeps(services, createLogger("test", "silent"), { firstAfterMs: 10, everyMs: 60_000 });
    try {
      const keys = async (tenant: string) => (await services.memory.search({ query: "" }, op(tenant))).items.map((i) => i.key).sort();
      await expect.poll(() => keys("keeps-30"), { timeout: 10_000 }).toEqual(["new"]);
      expect(await keys("keeps-all")).toEqual(["new", "old"]);
    } finally {
      sweeps.stop();
    }
  });
});
