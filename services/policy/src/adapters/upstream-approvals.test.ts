import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { entryDigest, upstreamContracts, upstreamToolEntryText } from "@chaos-core/contracts";
import { ChaosError, createMemoryTenantGenerations, createPgliteDb, createPostgresDb, type Db, type TenantGenerations } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../../test/support/postgres.js";
import type { TenantRegistry } from "../domain/tenants.js";
import { checkApproval, type UpstreamApprovals } from "../domain/upstream-approvals.js";
import { migratePolicy } from "./sql-store.js";
import { createSqlTenantRegistry } from "./tenant-registry.js";
import { createSqlUpstreamApprovals } from "./upstream-approvals.js";

const backends = {
  async postgres() {
    const database = await createTestDatabase("chaoscore_upstream_approvals");
    const db = createPostgresDb({ connectionString: database.url, max: 2 });
    return { db, dispose: async () => (await db.close(), await database.drop()) };
  },
  async pglite() {
    const dir = await mkdtemp(join(tmpdir(), "chaoscore-upstream-approvals-"));
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

/** The tool `echo` of upstream `changing` as its upstreams.lock entry, with `required` as given. */
function echo(required: string[]) {
  const set = upstreamContracts("changing", [{ name: "echo", description: "Echoes", inputSchema: { type: "object", properties: { message: { type: "string" }, to: { type: "string" } }, required } }]);
  const contract = set.tools.echo!;
  return { entry: upstreamToolEntryText("changing", "echo", contract), digest: entryDigest(contract) };
}

const pinned = echo(["message"]);
const approved = echo(["message", "to"]);
const approval = (tenant: string, by = "alice") => checkApproval({ tenant, upstream: "changing", tool: "echo", entry: approved.entry, replacesDigest: pinned.digest, approvedBy: by });

describe.each(Object.keys(backends) as Array<keyof typeof backends>)("upstream approvals on %s", (backend) => {
  let db: Db;
  let dispose: () => Promise<unknown>;
  let registry: TenantRegistry;
  let approvals: UpstreamApprovals;
  let generations: TenantGenerations;

  beforeAll(async () => {
    ({ db, dispose } = await backends[backend]());
    await migratePolicy(db);
    generations = createMemoryTenantGenerations();
    registry = createSqlTenantRegistry(db, { generations });
    approvals = createSqlUpstreamApprovals(db, { generations });
    await registry.createTenant({ id: "default" });
    await registry.createTenant({ id: "bravo" });
  }, 60_000);
  afterAll(async () => dispose());

  it("records an approval and lists it back, raising and publishing the tenant's generation; a second replaces the first", async () => {
    const before = (await registry.getTenant("default"))!.generation;
    const { approval: stored, generation } = await approvals.recordApproval(approval("default"));
    expect(stored).toMatchObject({ tenant: "default", upstream: "changing", tool: "echo", entry: approved.entry, replacesDigest: pinned.digest, digest: approved.digest, approvedBy: "alice" });
    expect(stored.approvedAt).toBeInstanceOf(Date);
    expect(generation).toBe(before + 1);
    expect(await generations.get("default")).toBe(before + 1);
    expect((await registry.getTenant("default"))!.generation).toBe(before + 1);

    const listed = await approvals.listApprovals("default");
    expect(listed.generation).toBe(before + 1);
    expect(listed.approvals).toEqual([stored]);

    // The same tool again (a later approval): one row, the newer one, and the generation raised again.
    await approvals.recordApproval(approval("default", "bob"));
    const again = await approvals.listApprovals("default");
    expect(again.approvals.map((a) => a.approvedBy)).toEqual(["bob"]);
    expect(again.generation).toBe(before + 2);
  });

  it("keeps tenants apart under row-level security", async () => {
    expect((await approvals.listApprovals("bravo")).approvals).toEqual([]);
    // Row-level security, not only the WHERE clause: B's transaction reads, changes and deletes none of A's rows.
    const seen = await db.tenantTx("bravo", (q) => q.query("SELECT tool FROM policy.upstream_approvals"));
    expect(seen.rows).toEqual([]);
    const deleted = await db.tenantTx("bravo", (q) => q.query("DELETE FROM policy.upstream_approvals WHERE tenant_id = 'default'"));
    expect(deleted.rowCount).toBe(0);
    const updated = await db.tenantTx("bravo", (q) => q.query("UPDATE policy.upstream_approvals SET approved_by = 'mallory'"));
    expect(updated.rowCount).toBe(0);
    // B cannot write a row for A either.
    const planted = await db
      .tenantTx("bravo", (q) =>
        q.query("INSERT INTO policy.upstream_approvals (tenant_id, upstream, tool, entry, replaces_digest, digest, approved_by) VALUES ('default', 'changing', 'ping', '{}', '', $1, 'mallory')", [approved.digest]),
      )
      .then(
        () => "inserted",
        (err: unknown) => (err as Error).message,
      );
    expect(planted).toMatch(/row-level security/);
    // B's own approval of the same tool is its own, and A's is untouched.
    await approvals.recordApproval(approval("bravo", "carol"));
    expect((await approvals.listApprovals("bravo")).approvals.map((a) => a.approvedBy)).toEqual(["carol"]);
    expect((await approvals.listApprovals("default")).approvals.map((a) => a.approvedBy)).toEqual(["bob"]);
  });

  it("refuses a tenant that is not registered or was deleted, and removes a deleted tenant's approvals", async () => {
    const ghost = await refusal(approvals.recordApproval(approval("ghost")));
    expect(ghost.code).toBe("not_found");
    expect(ghost.message).toMatch(/^tenant: "ghost" is not registered: create it with chaos-core tenants create ghost/);
    expect(await approvals.listApprovals("ghost")).toEqual({ approvals: [], generation: 0 });
    await registry.createTenant({ id: "gone" });
    await approvals.recordApproval(approval("gone"));
    await registry.markDeleted("gone");
    expect((await approvals.listApprovals("gone")).approvals).toEqual([]);
    expect((await refusal(approvals.recordApproval(approval("gone")))).code).toBe("failed_precondition");
  });

  it("an approval whose generation cannot be published is not recorded", async () => {
    const failing = createSqlUpstreamApprovals(db, {
      generations: { ...createMemoryTenantGenerations(), publish: async () => Promise.reject(new ChaosError("unavailable", "redis is down")) },
    });
    expect((await refusal(failing.recordApproval(approval("bravo", "dave")))).message).toMatch(/redis is down/);
    expect((await approvals.listApprovals("bravo")).approvals.map((a) => a.approvedBy)).toEqual(["carol"]);
  });
});
