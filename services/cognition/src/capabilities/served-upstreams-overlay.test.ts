import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { entryDigest, serializeUpstreamsLock, upstreamContracts, upstreamToolEntryText } from "@chaos-core/contracts";
import { ChaosError, createInProcessClient, createLogger, createMemoryTenantGenerations, createPgliteDb, type Db, type ServiceClient, type TenantGenerations } from "@chaos-core/kit";
import { checkApproval, createSqlTenantRegistry, createSqlUpstreamApprovals, createUpstreamApprovalHandlers, migratePolicy, type UpstreamApprovals } from "@chaos-core/policy";
import { UpstreamApprovalService } from "@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { upstreamSecretsOf } from "../upstreams/config.js";
import { serveUpstreams, type ServedUpstreams } from "./served-upstreams.js";
import { eventually } from "../../../../test/support/eventually.js";

/** What the serving process reaches within a moment. */
const SOON = { timeoutMs: 5_000, intervalMs: 25 };

const defs = (required: string[]) => [
  { name: "echo", inputSchema: { type: "object", properties: { message: { type: "string" }, to: { type: "string" } }, required }, annotations: { readOnlyHint: true } },
  { name: "ping", inputSchema: { type: "object" }, annotations: { readOnlyHint: true } },
];
const lockOf = (required: string[]) => serializeUpstreamsLock(new Map([["changing", upstreamContracts("changing", defs(required))]]));
const echo = (required: string[]) => upstreamContracts("changing", defs(required)).tools.echo!;

/**
 * serveUpstreams with the registry's approvals (docs/federation.md §4): read at start and when
 * tenant default's published generation moves — not while it holds —, merged over the lock while
 * the lock pins what each replaced, and kept as they were when the registry cannot be read.
 */
describe("the operator's upstreams served with the registry's approvals", () => {
  let dir: string;
  let db: Db;
  let store: UpstreamApprovals;
  let generations: TenantGenerations;
  let served: ServedUpstreams;
  let reads = 0;
  let down = false;

  const required = () => (served.capabilities.find((c) => c.name === "changing.echo")?.upstream?.inputSchema as { required?: string[] } | undefined)?.required;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "chaoscore-served-overlay-"));
    db = await createPgliteDb({ dataDir: join(dir, "db") });
    await migratePolicy(db);
    generations = createMemoryTenantGenerations();
    await createSqlTenantRegistry(db, { generations }).createTenant({ id: "default" });
    store = createSqlUpstreamApprovals(db, { generations });
    const handlers = createUpstreamApprovalHandlers(store, { record: false });
    const client: ServiceClient<typeof UpstreamApprovalService> = createInProcessClient(UpstreamApprovalService, {
      ...handlers,
      listApprovals: async (req, ctx) => {
        reads++;
        if (down) throw new ChaosError("unavailable", "policy is down");
        expect(ctx.call.tenant).toBe("default");
        return handlers.listApprovals(req, ctx);
      },
    });
    await writeFile(join(dir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "changing", command: process.execPath, args: ["-e", ""] }] }));
    await writeFile(join(dir, "upstreams.lock"), lockOf(["message"]));
    const config = { file: join(dir, "upstreams.json"), fileChosen: true, lock: join(dir, "upstreams.lock"), secrets: upstreamSecretsOf({}), workDir: join(dir, "work") };
    served = await serveUpstreams(config, "test", createLogger("served-overlay-test", "silent"), undefined, undefined, { client, generations, pollMs: 50 });
  }, 60_000);
  afterAll(async () => {
    await served?.close();
    await db?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("serves the lock's pin while there is no approval, reading the registry once while the generation holds", async () => {
    expect(required()).toEqual(["message"]);
    const after = reads;
    await new Promise((r) => setTimeout(r, 300));
    expect(reads).toBe(after);
  });

  it("serves an approval recorded since, when the generation moves: the new schema, told to listeners", async () => {
    let told = 0;
    served.onCapabilities(() => told++);
    await store.recordApproval(
      checkApproval({ tenant: "default", upstream: "changing", tool: "echo", entry: upstreamToolEntryText("changing", "echo", echo(["message", "to"])), replacesDigest: entryDigest(echo(["message"])), approvedBy: "alice" }),
    );
    await eventually("the approved schema", () => (required()?.length === 2 ? true : undefined), SOON);
    expect(required()).toEqual(["message", "to"]);
    expect(told).toBe(1);
  });

  it("keeps what it serves when the registry cannot be read", async () => {
    down = true;
    const after = reads;
    await generations.publish("default", 999);
    await eventually("a failed read", () => (reads > after ? true : undefined), SOON);
    await new Promise((r) => setTimeout(r, 150));
    expect(required()).toEqual(["message", "to"]);
    down = false;
  });

  it("stays served when the lock catches up (moot), and the lock wins once it pins something else", async () => {
    let told = 0;
    served.onCapabilities(() => told++);
    await writeFile(join(dir, "upstreams.lock"), lockOf(["message", "to"]));
    await new Promise((r) => setTimeout(r, 2_500));
    expect(required()).toEqual(["message", "to"]);
    expect(told).toBe(0);
    await writeFile(join(dir, "upstreams.lock"), lockOf(["to"]));
    await eventually("the lock's new pin", () => (required()?.length === 1 ? true : undefined), { ...SOON, timeoutMs: 10_000 });
    expect(required()).toEqual(["to"]);
  });
});
