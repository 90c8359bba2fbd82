import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { entryDigest, upstreamContracts, upstreamToolEntryText } from "@chaos-core/contracts";
import { ContextSigner, createGrpcClient, createLogger, createMemoryTenantGenerations, createPgliteDb, type Db, type GrpcClient } from "@chaos-core/kit";
import { UpstreamApprovalService } from "@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSqlPolicyStore, migratePolicy } from "../adapters/sql-store.js";
import { createSqlTenantRegistry } from "../adapters/tenant-registry.js";
import { createSqlUpstreamApprovals } from "../adapters/upstream-approvals.js";
import { createPolicyServer, type RunningPolicyServer } from "../server.js";

const KEY = "k".repeat(32);
const operator = (tenant = "default") => ({ ctx: { tenant, principal: "operator" } });

function echo(required: string[]) {
  const contract = upstreamContracts("changing", [{ name: "echo", inputSchema: { type: "object", properties: { message: { type: "string" }, to: { type: "string" } }, required } }]).tools.echo!;
  return { entry: upstreamToolEntryText("changing", "echo", contract), digest: entryDigest(contract) };
}
const pinned = echo(["message"]);
const approved = echo(["message", "to"]);
const request = (over: Record<string, string> = {}) => ({ tenant: "default", upstream: "changing", tool: "echo", entry: approved.entry, replacesDigest: pinned.digest, approvedBy: "alice", ...over });

async function refused(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a refusal");
}

/**
 * UpstreamApprovalService as the policy service serves it, over gRPC: whole on the admin port,
 * ListApprovals only on the main port (RecordApproval refused there), operator-only recording,
 * and every refusal naming its field.
 */
describe("UpstreamApprovalService on the policy service's two ports", () => {
  let db: Db;
  let dir: string;
  let server: RunningPolicyServer;
  let admin: GrpcClient<typeof UpstreamApprovalService>;
  let main: GrpcClient<typeof UpstreamApprovalService>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "chaoscore-approval-handlers-"));
    db = await createPgliteDb({ dataDir: dir });
    await migratePolicy(db);
    const generations = createMemoryTenantGenerations();
    const registry = createSqlTenantRegistry(db, { generations });
    await registry.createTenant({ id: "default" });
    await registry.createTenant({ id: "bravo" });
    const signer = new ContextSigner(KEY);
    server = await createPolicyServer({
      host: "127.0.0.1",
      port: 0,
      adminPort: 0,
      signer,
      store: createSqlPolicyStore(db),
      registry,
      approvals: createSqlUpstreamApprovals(db, { generations }),
      logger: createLogger("approval-handlers-test", "silent"),
    }).start();
    admin = createGrpcClient(UpstreamApprovalService, `127.0.0.1:${server.admin.port}`, signer);
    main = createGrpcClient(UpstreamApprovalService, `127.0.0.1:${server.port}`, signer);
  }, 60_000);
  afterAll(async () => {
    admin?.close();
    main?.close();
    await server?.shutdown(0);
    await db?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("records the operator's approval on the admin port; ListApprovals answers the context's tenant on either port", async () => {
    const { approval, generation } = await admin.client.recordApproval(request(), operator());
    expect(approval).toMatchObject({ tenant: "default", upstream: "changing", tool: "echo", entry: approved.entry, replacesDigest: pinned.digest, digest: approved.digest, approvedBy: "alice" });
    expect(generation).toBeGreaterThan(1n);
    for (const port of [admin, main]) {
      const listed = await port.client.listApprovals({}, { ctx: { tenant: "default", principal: "chaos-core" } });
      expect(listed.approvals.map((a) => [a.upstream, a.tool, a.digest])).toEqual([["changing", "echo", approved.digest]]);
      expect(listed.generation).toBe(generation);
    }
    // Another tenant's context sees none of them.
    expect((await main.client.listApprovals({}, { ctx: { tenant: "bravo", principal: "chaos-core" } })).approvals).toEqual([]);
  });

  it("refuses RecordApproval on the main port, and to anyone but the operator", async () => {
    const onMain = await refused(main.client.recordApproval(request(), operator()));
    expect(onMain.message).toMatch(/RecordApproval is answered on the policy service's admin port only/);
    const notOperator = await refused(admin.client.recordApproval(request(), { ctx: { tenant: "default", principal: "ann" } }));
    expect(notOperator.message).toMatch(/RecordApproval answers only the operator, not "ann"/);
  });

  it("names the field of each refusal, re-verifying the contract's digests", async () => {
    const tampered = JSON.parse(approved.entry) as { behavior: { readOnly: boolean } };
    tampered.behavior.readOnly = !tampered.behavior.readOnly;
    const noSurface = JSON.parse(approved.entry) as Record<string, unknown>;
    delete noSurface.surface;
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ tenant: "" }, /^tenant: required/],
      [{ upstream: "Not A Name" }, /^upstream: "Not A Name" is not an upstream name/],
      [{ tool: "" }, /^tool: required/],
      [{ approvedBy: " " }, /^approved_by: required/],
      [{ replacesDigest: "sha1:abc" }, /^replaces_digest: must be empty .* or sha256:<64 hex digits>/],
      [{ replacesDigest: approved.digest }, /^replaces_digest: is the approved contract's own digest/],
      [{ entry: "" }, /^entry: required/],
      [{ entry: "not json" }, /^entry: not JSON/],
      [{ entry: JSON.stringify(tampered) }, /^entry: its digests do not match its contracts/],
      [{ entry: JSON.stringify(noSurface) }, /^entry\.surface: must be an object/],
      [{ tool: "ping" }, /^entry\.surface\.name: must be "ping"/],
      [{ tenant: "ghost" }, /^tenant: "ghost" is not registered/],
    ];
    for (const [over, message] of cases) {
      const err = await refused(admin.client.recordApproval(request(over), operator()));
      expect(err.message, JSON.stringify(over)).toMatch(message);
    }
    // Nothing refused was kept.
    expect((await admin.client.listApprovals({}, operator())).approvals.map((a) => a.approvedBy)).toEqual(["alice"]);
  });
});
