import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPgliteDb, createPostgresDb, type Db } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingLogger } from "../../../../test/support/logger.js";
import { createTestDatabase, type TestDatabase } from "../../../../test/support/postgres.js";
import { defaultPolicyDocument, validatePolicyDocument } from "../domain/policy-document.js";
import { policyStoreContract, rejection } from "./policy-store.contract.js";
import { createSqlPolicyStore, migratePolicy } from "./sql-store.js";

function newTenant(): string {
  return `t${randomBytes(5).toString("hex")}`;
}

interface Backend {
  name: "postgres" | "pglite";
  open(): Promise<{ db: Db; dispose(): Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: "postgres",
    async open() {
      const database: TestDatabase = await createTestDatabase("chaoscore_policy");
      const db = createPostgresDb({ connectionString: database.url });
      return {
        db,
        async dispose() {
          await db.close();
          await database.drop();
        },
      };
    },
  },
  {
    name: "pglite",
    async open() {
      const dir = await mkdtemp(join(tmpdir(), "chaoscore-policy-pglite-"));
      const db = await createPgliteDb({ dataDir: dir });
      return {
        db,
        async dispose() {
          await db.close();
          await rm(dir, { recursive: true, force: true });
        },
      };
    },
  },
];

const DENY_SHELL = validatePolicyDocument({ deniedCapabilities: ["shell.exec"] }, "test");

describe.each(backends)("SQL policy store on $name", (backend) => {
  let db: Db;
  let dispose: () => Promise<void>;

  beforeAll(async () => {
    ({ db, dispose } = await backend.open());
    expect(await migratePolicy(db)).toEqual(["0001_document_versions", "0002_tenant_registry", "0003_tenant_upstreams", "0004_upstream_approvals"]);
  });

  afterAll(async () => {
    await dispose?.();
  });

  policyStoreContract(
    async () => {
      const store = createSqlPolicyStore(db, { pollMs: 25 });
      return { store, tenant: newTenant(), otherTenant: newTenant(), close: () => store.close() };
    },
    { tenants: "many" },
  );

  it("migrates once: a second run applies nothing", async () => {
    expect(await migratePolicy(db)).toEqual([]);
  });

  it("serves the default at version 0 without writing a row", async () => {
    const tenant = newTenant();
    const store = createSqlPolicyStore(db);
    const snap = await store.get(tenant);
    expect(snap).toMatchObject({ version: 0, source: backend.name, document: defaultPolicyDocument() });
    expect(snap.updatedAt.getTime()).toBe(0);
    const { rows } = await db.adminTx((q) =>
      q.query<{ n: number }>("SELECT count(*)::int AS n FROM policy.document_versions WHERE tenant_id = $1", [tenant]),
    );
    expect(rows[0]?.n).toBe(0);
  });

  it("row-level security refuses a row for another tenant and hides other tenants' rows", async () => {
    const a = newTenant();
    const b = newTenant();
    const store = createSqlPolicyStore(db);
    await store.put(a, DENY_SHELL);

    await expect(
      db.tenantTx(b, (q) =>
        q.query("INSERT INTO policy.document_versions (tenant_id, version, document) VALUES ($1, 99, '{}')", [a]),
      ),
    ).rejects.toThrow(/row-level security/);

    const seen = await db.tenantTx(b, (q) =>
      q.query("SELECT version FROM policy.document_versions WHERE tenant_id = $1", [a]),
    );
    expect(seen.rows).toEqual([]);
    expect((await store.get(b)).document).toEqual(defaultPolicyDocument());
    expect((await store.get(a)).document).toEqual(DENY_SHELL);
  });

  it("keeps the history immutable: the application role may not update or delete versions", async () => {
    const tenant = newTenant();
    const store = createSqlPolicyStore(db);
    await store.put(tenant, DENY_SHELL);
    await expect(
      db.tenantTx(tenant, (q) => q.query("UPDATE policy.document_versions SET document = '{}'")),
    ).rejects.toThrow(/permission denied/);
    await expect(db.tenantTx(tenant, (q) => q.query("DELETE FROM policy.document_versions"))).rejects.toThrow(
      /permission denied/,
    );
    expect((await store.get(tenant)).document).toEqual(DENY_SHELL);
  });

  it("numbers concurrent puts consecutively, with no gaps and no duplicates", async () => {
    const tenant = newTenant();
    const store = createSqlPolicyStore(db);
    const versions = await Promise.all(Array.from({ length: 8 }, () => store.put(tenant, DENY_SHELL)));
    expect([...versions].sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it("lets exactly one of several puts expecting the same version win", async () => {
    const tenant = newTenant();
    const store = createSqlPolicyStore(db);
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => store.put(tenant, DENY_SHELL, 0)));
    const won = results.filter((r) => r.status === "fulfilled");
    expect(won).toEqual([{ status: "fulfilled", value: 1 }]);
    for (const r of results.filter((x) => x.status === "rejected")) {
      expect((r as PromiseRejectedResult).reason).toMatchObject({ code: "conflict" });
    }
  });

  it("fails closed on a stored document that no longer validates, and a put still repairs it", async () => {
    const tenant = newTenant();
    const store = createSqlPolicyStore(db);
    await store.put(tenant, DENY_SHELL);
    await db.adminTx((q) =>
      q.query(
        `INSERT INTO policy.document_versions (tenant_id, version, document) VALUES ($1, 2, '{"deniedCapabilities": "shell.exec"}')`,
        [tenant],
      ),
    );
    const err = await rejection(store.get(tenant));
    expect(err.code).toBe("failed_precondition");
    expect(err.message).toContain(`tenant "${tenant}" version 2: deniedCapabilities: expected array`);
    expect(await store.put(tenant, DENY_SHELL, 2)).toBe(3);
    expect((await store.get(tenant)).version).toBe(3);
  });

  it("reads a version stored before approvalChannels existed with the default channels", async () => {
    const tenant = newTenant();
    const store = createSqlPolicyStore(db);
    await db.adminTx((q) =>
      q.query(
        `INSERT INTO policy.document_versions (tenant_id, version, document) VALUES ($1, 1, '{"deniedCapabilities": ["shell.exec"]}')`,
        [tenant],
      ),
    );
    expect((await store.get(tenant)).document).toEqual(DENY_SHELL);
    expect(DENY_SHELL.approvalChannels).toEqual(defaultPolicyDocument().approvalChannels);
  });

  it("logs once, as a warning, a stored version that lets client_elicitation approve a spend", async () => {
    const tenant = newTenant();
    const { logger, lines } = recordingLogger();
    const store = createSqlPolicyStore(db, { logger });
    const optIn = validatePolicyDocument({ approvalChannels: { spend: { policies: { wire: ["client_elicitation"] } } } }, "test");
    expect(await store.put(tenant, optIn)).toBe(1);
    await store.get(tenant);
    const warned = lines.filter((l) => l["level"] === 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ tenant, version: 1 });
    expect(String((warned[0]?.["warnings"] as string[])[0])).toMatch(/^approvalChannels\.spend\.policies\.wire lists client_elicitation/);
    await store.put(tenant, DENY_SHELL);
    expect(lines.filter((l) => l["level"] === 40)).toHaveLength(1);
  });
});
