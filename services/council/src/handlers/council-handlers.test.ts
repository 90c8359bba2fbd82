import { toJson } from "@bufbuild/protobuf";
import {
  ChaosError,
  ContextSigner,
  createGrpcClient,
  createInProcessClient,
  createLogger,
  createPostgresDb,
  register,
  startGrpcServer,
  type CallContext,
  type Db,
  type GrpcClient,
  type RunningGrpcServer,
  type ServiceClient,
} from "@chaos-core/kit";
import {
  ApplyRetentionResponseSchema,
  ContinueResponseSchema,
  CouncilService,
  GetBriefResponseSchema,
  InitResponseSchema,
  RecallResponseSchema,
  SaveResponseSchema,
  ScoreResponseSchema,
  VerifyResponseSchema,
} from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../../test/support/postgres.js";
import { migrateCouncil } from "../adapters/migrations.js";
import { createSqlCouncilStore } from "../adapters/sql-store.js";
import { MIGRATION_OUTPUTS, MIGRATION_TASK, MIGRATION_TITLE } from "../domain/examples.js";
import type { CouncilSessionStore } from "../session-store.js";
import { createCouncilHandlers, type CouncilHandlerOptions } from "./council-handlers.js";

type Client = ServiceClient<typeof CouncilService>;

const KEY = "council-handlers-test-key-0123456789abcdef";
const NOW = new Date("2031-05-06T07:08:09.123Z");
const PHASE_ORDER = ["decompile", "design", "critique", "synthesis", "verify"] as const;

let database: TestDatabase;
let db: Db;
let store: CouncilSessionStore;
let server: RunningGrpcServer;
let grpc: GrpcClient<typeof CouncilService>;
let inProcess: Client;
let tenants = 0;

/** Ids issued in order, so both transports can produce identical sessions. */
function sequentialIds(): () => string {
  let n = 0;
  return () => `00000000-0000-4000-8000-${String(++n).padStart(12, "0")}`;
}

function handlers(options: CouncilHandlerOptions = {}) {
  return createCouncilHandlers(store, { now: () => NOW, ...options });
}

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_council_handlers");
  db = createPostgresDb({ connectionString: database.url });
  await migrateCouncil(db);
  store = createSqlCouncilStore(db, { now: () => NOW });
  const signer = new ContextSigner(KEY);
  inProcess = createInProcessClient(CouncilService, handlers({ newId: sequentialIds() }));
  server = await startGrpcServer({
    host: "127.0.0.1",
    port: 0,
    signer,
    logger: createLogger("council-test", "silent"),
    registrations: [register(CouncilService, handlers({ newId: sequentialIds() }))],
  });
  grpc = createGrpcClient(CouncilService, `127.0.0.1:${server.port}`, signer);
});

afterAll(async () => {
  grpc?.close();
  await server?.shutdown(1000);
  await db?.close();
  await database?.drop();
});

const ctx = (tenant: string): { ctx: CallContext } => ({ ctx: { tenant, principal: "tester" } });
const freshTenant = () => `tenant-${++tenants}`;

async function failure(promise: Promise<unknown>): Promise<ChaosError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "expected the call to fail").toBeInstanceOf(ChaosError);
  return err as ChaosError;
}

/** A whole session as a client drives it; returns every response as proto JSON. */
async function scenario(client: Client, tenant: string): Promise<unknown[]> {
  const o = ctx(tenant);
  const out: unknown[] = [];
  const init = await client.init({ task: MIGRATION_TASK, title: MIGRATION_TITLE }, o);
  out.push(toJson(InitResponseSchema, init));
  const sessionId = init.sessionId;
  out.push(toJson(GetBriefResponseSchema, await client.getBrief({ sessionId }, o)));
  for (const phase of PHASE_ORDER) {
    out.push(toJson(SaveResponseSchema, await client.save({ sessionId, phase, output: MIGRATION_OUTPUTS[phase] as never }, o)));
  }
  for (const format of ["full", "summary", "decisions"]) {
    out.push(toJson(RecallResponseSchema, await client.recall({ sessionId, format }, o)));
  }
  out.push(
    toJson(
      VerifyResponseSchema,
      await client.verify(
        {
          sessionId,
          claims: [
            { text: "JSON columns are mapped to jsonb", source: "design" },
            { text: "Downtime of 2 hours is acceptable", source: "" },
          ],
          mode: "all",
        },
        o,
      ),
    ),
  );
  out.push(toJson(ContinueResponseSchema, await client.continue({ sessionId }, o)));
  out.push(toJson(ScoreResponseSchema, await client.score({ sessionId }, o)));
  return out;
}

describe("council handlers", () => {
  it("answer a whole session identically in process and over gRPC", async () => {
    const viaInProcess = await scenario(inProcess, freshTenant());
    const viaGrpc = await scenario(grpc.client, freshTenant());
    expect(viaGrpc).toEqual(viaInProcess);
    // And the scenario says what a client relies on.
    const [init, brief, ...rest] = viaInProcess as Array<Record<string, unknown>>;
    expect(init).toMatchObject({
      sessionId: "00000000-0000-4000-8000-000000000001",
      phase: "decompile",
      persona: "Systems Analyst",
      complexityLevel: "moderate",
      pipelineDepth: "standard",
      pipeline: [...PHASE_ORDER],
    });
    expect(brief).toMatchObject({ brief: { phase: "decompile", name: "Systems Analyst" }, task: MIGRATION_TASK });
    const saves = rest.slice(0, 5);
    expect(saves.map((s) => [s.phase, s.verdict, s.canProceed ?? false, s.nextPhase ?? ""])).toEqual([
      ["decompile", "excellent", true, "design"],
      ["design", "excellent", true, "critique"],
      ["critique", "excellent", true, "synthesis"],
      ["synthesis", "excellent", true, "verify"],
      ["verify", "excellent", false, ""],
    ]);
    expect(saves[4]).toMatchObject({ sessionComplete: true });
    const score = rest[rest.length - 1] as Record<string, unknown>;
    expect(score).toMatchObject({ verdict: "excellent" });
    expect(score.score).toBeGreaterThanOrEqual(90);
  });

  it("refuses skipping, saving out of order and re-saving a locked phase, and stores nothing for them", async () => {
    const tenant = freshTenant();
    const o = ctx(tenant);
    const { sessionId } = await inProcess.init({ task: MIGRATION_TASK }, o);
    const skipped = await failure(inProcess.save({ sessionId, phase: "design", output: MIGRATION_OUTPUTS.design as never }, o));
    expect(skipped.code).toBe("failed_precondition");
    expect(skipped.message).toMatch(/cannot save design: the active phase is decompile \(Systems Analyst\)/);
    await inProcess.save({ sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, o);
    const outOfOrder = await failure(inProcess.save({ sessionId, phase: "verify", output: MIGRATION_OUTPUTS.verify as never }, o));
    expect(outOfOrder.message).toMatch(/cannot save verify: the active phase is design/);
    const locked = await failure(inProcess.save({ sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, o));
    expect(locked.code).toBe("failed_precondition");
    expect(locked.message).toMatch(/cannot save decompile: .*locked/);
    const stored = await store.get(tenant, sessionId);
    expect(stored?.version).toBe(2);
  });

  it("names the field of a malformed output and leaves the session as it was", async () => {
    const tenant = freshTenant();
    const o = ctx(tenant);
    const { sessionId } = await inProcess.init({ task: MIGRATION_TASK }, o);
    const bad = { ...MIGRATION_OUTPUTS.decompile, confidence: "very", constraints: undefined };
    const err = await failure(grpc.client.save({ sessionId, phase: "decompile", output: JSON.parse(JSON.stringify(bad)) }, o));
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toMatch(/confidence/);
    expect(err.message).toMatch(/constraints/);
    const missing = await failure(grpc.client.save({ sessionId, phase: "decompile" }, o));
    expect(missing.code).toBe("invalid_argument");
    expect((await store.get(tenant, sessionId))?.version).toBe(1);
  });

  it("lets exactly one of several concurrent saves of a phase win; the others are refused as locked, not as conflicts", async () => {
    const tenant = freshTenant();
    const o = ctx(tenant);
    const { sessionId } = await grpc.client.init({ task: MIGRATION_TASK }, o);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 6 }, () => grpc.client.save({ sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, o)),
    );
    expect(outcomes.filter((x) => x.status === "fulfilled")).toHaveLength(1);
    for (const x of outcomes) {
      if (x.status === "rejected") {
        expect((x.reason as ChaosError).code).toBe("failed_precondition");
        expect((x.reason as ChaosError).message).toMatch(/locked/);
      }
    }
    const stored = await store.get(tenant, sessionId);
    expect(stored?.version).toBe(2);
    expect((stored?.state as { history: unknown[] }).history).toHaveLength(1);
  });

  it("saves in one tenant transaction, refused or not, and a read-only call reads in one", async () => {
    let transactions = 0;
    const counting: Db = {
      kind: db.kind,
      tenantTx(tenant, fn) {
        transactions += 1;
        return db.tenantTx(tenant, fn);
      },
      adminTx: (fn) => db.adminTx(fn),
      statement: (sql, params, options) => db.statement(sql, params, options),
      flush: () => db.flush(),
      close: () => db.close(),
    };
    const client = createInProcessClient(CouncilService, createCouncilHandlers(createSqlCouncilStore(counting), { now: () => NOW }));
    const tenant = freshTenant();
    const o = ctx(tenant);
    const { sessionId } = await client.init({ task: MIGRATION_TASK }, o);
    const count = async (call: () => Promise<unknown>): Promise<number> => {
      const before = transactions;
      await call().catch(() => undefined);
      return transactions - before;
    };
    expect(await count(() => client.save({ sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, o))).toBe(1);
    expect(await count(() => client.save({ sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, o))).toBe(1);
    expect(await count(() => client.save({ sessionId: "00000000-0000-4000-8000-0000000000fe", phase: "design", output: {} }, o))).toBe(1);
    expect(await count(() => client.recall({ sessionId }, o))).toBe(1);
    expect((await store.get(tenant, sessionId))?.version).toBe(2);
  });

  it("keeps sessions in the store: new handlers (a restarted service) continue where the old ones stopped", async () => {
    const tenant = freshTenant();
    const o = ctx(tenant);
    const { sessionId } = await inProcess.init({ task: MIGRATION_TASK }, o);
    await inProcess.save({ sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, o);
    const restarted = createInProcessClient(CouncilService, createCouncilHandlers(createSqlCouncilStore(db)));
    const cont = await restarted.continue({ sessionId }, o);
    expect(cont).toMatchObject({ status: "active", currentPhase: "design", persona: "Solution Architect" });
    const saved = await restarted.save({ sessionId, phase: "design", output: MIGRATION_OUTPUTS.design as never }, o);
    expect(saved.nextPhase).toBe("critique");
  });

  it("shows another tenant's session as not found on every call, exactly like an unknown id", async () => {
    const owner = ctx(freshTenant());
    const other = ctx(freshTenant());
    const { sessionId } = await grpc.client.init({ task: MIGRATION_TASK }, owner);
    const unknown = "00000000-0000-4000-8000-0000000000ff";
    const calls: Array<(id: string) => Promise<unknown>> = [
      (id) => grpc.client.save({ sessionId: id, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, other),
      (id) => grpc.client.recall({ sessionId: id }, other),
      (id) => grpc.client.verify({ sessionId: id, claims: [{ text: "anything at all", source: "" }] }, other),
      (id) => grpc.client.continue({ sessionId: id }, other),
      (id) => grpc.client.score({ sessionId: id }, other),
      (id) => grpc.client.getBrief({ sessionId: id }, other),
    ];
    for (const call of calls) {
      const theirs = await failure(call(sessionId));
      const missing = await failure(call(unknown));
      expect(theirs.code).toBe("not_found");
      expect(theirs.message).toBe(missing.message.replace(unknown, sessionId));
    }
    // Nothing the other tenant tried reached the owner's session.
    expect((await grpc.client.continue({ sessionId }, owner)).currentPhase).toBe("decompile");
  });

  it("lists the caller's tenant's sessions by id prefix, in process and over gRPC alike, never another tenant's", async () => {
    for (const client of [inProcess, grpc.client]) {
      const owner = ctx(freshTenant());
      const other = ctx(freshTenant());
      const first = await client.init({ task: MIGRATION_TASK, title: MIGRATION_TITLE }, owner);
      const second = await client.init({ task: "Pick a queue for the billing events" }, owner);
      await client.save({ sessionId: second.sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, owner);
      const theirs = await client.init({ task: MIGRATION_TASK }, other);

      const secondPhase = (await client.continue({ sessionId: second.sessionId }, owner)).currentPhase;
      expect(secondPhase).not.toBe("decompile");
      const listed = await client.listSessions({}, owner);
      // One clock: equal times, so by id.
      expect(listed.sessions.map((s) => ({ ...s }))).toEqual(
        [
          { $typeName: "chaoscore.council.v1.SessionSummary", sessionId: first.sessionId, title: MIGRATION_TITLE, phase: "decompile", updatedAt: NOW.toISOString() },
          {
            $typeName: "chaoscore.council.v1.SessionSummary",
            sessionId: second.sessionId,
            title: expect.any(String) as unknown as string,
            phase: secondPhase,
            updatedAt: NOW.toISOString(),
          },
        ].sort((a, b) => a.sessionId.localeCompare(b.sessionId)),
      );
      expect((await client.listSessions({ prefix: second.sessionId }, owner)).sessions.map((s) => s.sessionId)).toEqual([second.sessionId]);
      expect((await client.listSessions({ limit: 1 }, owner)).sessions).toHaveLength(1);
      expect((await client.listSessions({ prefix: theirs.sessionId }, owner)).sessions.map((s) => s.sessionId)).not.toContain(theirs.sessionId);
      expect((await client.listSessions({}, other)).sessions.map((s) => s.sessionId)).toEqual([theirs.sessionId]);
      expect((await failure(client.listSessions({ prefix: "%" }, owner))).message).toMatch(/^prefix must be the start of a session id/);
      expect((await failure(client.listSessions({ limit: 101 }, owner))).message).toMatch(/^limit must be at most 100/);
    }
  });

  describe.each([
    ["in-process", () => inProcess],
    ["gRPC", () => grpc.client],
  ])("tenant data over the %s transport", (_name, client) => {
    const DAY_BEFORE = new Date(NOW.getTime() - 86_400_000);

    async function exportOf(tenant: string): Promise<string[]> {
      const lines: string[] = [];
      for await (const res of client().exportData({}, ctx(tenant))) lines.push(res.line);
      return lines;
    }

    it("exports, applies retention to and deletes only the caller's tenant", async () => {
      const mine = freshTenant();
      const theirs = freshTenant();
      // The same database written a day before NOW: what retention finds old.
      const yesterday = createInProcessClient(CouncilService, createCouncilHandlers(createSqlCouncilStore(db, { now: () => DAY_BEFORE }), { now: () => DAY_BEFORE }));
      const old = await yesterday.init({ task: MIGRATION_TASK, title: "old" }, ctx(mine));
      const fresh = await client().init({ task: MIGRATION_TASK, title: "fresh" }, ctx(mine));
      await client().save({ sessionId: fresh.sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, ctx(mine));
      const theirsOld = await yesterday.init({ task: MIGRATION_TASK }, ctx(theirs));

      const lines = await exportOf(mine);
      expect(lines[0]).toBe(`{"type":"header","format":"chaos-core-council/1","tenant":"${mine}"}\n`);
      const sessions = lines.slice(1).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(sessions.map((s) => s.id)).toEqual([old.sessionId, fresh.sessionId].sort());
      const exportedFresh = sessions.find((s) => s.id === fresh.sessionId)!;
      expect(exportedFresh).toMatchObject({
        type: "council.session",
        tenant: mine,
        version: 2,
        created_at: NOW.toISOString(),
        updated_at: NOW.toISOString(),
        state: { id: fresh.sessionId, title: "fresh", task: MIGRATION_TASK },
      });
      // The whole stored state: what a recall of the session is computed from.
      const stored = await store.get(mine, fresh.sessionId);
      expect(exportedFresh.state).toEqual(stored?.state);
      expect(sessions.find((s) => s.id === old.sessionId)).toMatchObject({ version: 1, updated_at: DAY_BEFORE.toISOString() });
      expect((await exportOf(theirs)).slice(1).map((l) => JSON.parse(l).id)).toEqual([theirsOld.sessionId]);

      // An hour's retention: yesterday's session goes, today's stays; the other tenant's old one stays.
      const retention = await client().applyRetention({ maxAgeSeconds: 3600 }, ctx(mine));
      expect(toJson(ApplyRetentionResponseSchema, retention)).toEqual({ deleted: "1", cutoff: new Date(NOW.getTime() - 3_600_000).toISOString() });
      expect((await failure(client().recall({ sessionId: old.sessionId }, ctx(mine)))).code).toBe("not_found");
      expect((await client().listSessions({}, ctx(mine))).sessions.map((s) => s.sessionId)).toEqual([fresh.sessionId]);
      expect((await client().listSessions({}, ctx(theirs))).sessions.map((s) => s.sessionId)).toEqual([theirsOld.sessionId]);

      expect((await client().deleteData({}, ctx(mine))).sessions).toBe(1n);
      expect(await exportOf(mine)).toEqual([lines[0]]);
      expect((await client().listSessions({}, ctx(theirs))).sessions.map((s) => s.sessionId)).toEqual([theirsOld.sessionId]);
      expect((await client().deleteData({}, ctx(mine))).sessions).toBe(0n);
    });

    it("exports a session at the 4 MiB state limit", async () => {
      const tenant = freshTenant();
      // {"blob":"…"} is 11 bytes around the string: exactly SESSION_STATE_MAX_BYTES of JSON.
      const id = "00000000-0000-4000-8000-000000000042";
      await store.create(tenant, id, { blob: "x".repeat(4 * 1024 * 1024 - 11) });
      const lines = await exportOf(tenant);
      expect(lines).toHaveLength(2);
      expect((JSON.parse(lines[1]!).state.blob as string).length).toBe(4 * 1024 * 1024 - 11);
    });

    it("refuses a retention age of 0, naming max_age_seconds, and deletes nothing", async () => {
      const tenant = freshTenant();
      const { sessionId } = await client().init({ task: MIGRATION_TASK }, ctx(tenant));
      const err = await failure(client().applyRetention({ maxAgeSeconds: 0 }, ctx(tenant)));
      expect(err.code).toBe("invalid_argument");
      expect(err.message).toBe("max_age_seconds must be a whole number of seconds from 1 to 4294967295 (sessions last updated longer ago are deleted); got 0");
      expect((await client().continue({ sessionId }, ctx(tenant))).sessionId).toBe(sessionId);
    });
  });

  it("refuses bad ids, formats, modes and phases, naming the field", async () => {
    const o = ctx(freshTenant());
    const { sessionId } = await inProcess.init({ task: MIGRATION_TASK }, o);
    for (const bad of ["", "nope", "ABCDEF00-0000-4000-8000-00000000000A", `${sessionId}x`]) {
      const err = await failure(inProcess.continue({ sessionId: bad }, o));
      expect(err.code).toBe("invalid_argument");
      expect(err.message).toMatch(/^sessionId must be a session id issued by council_init/);
    }
    expect((await failure(inProcess.recall({ sessionId, format: "everything" }, o))).message).toMatch(/^format must be one of full, summary, decisions/);
    expect((await failure(inProcess.verify({ sessionId, claims: [{ text: "x y z", source: "" }], mode: "toString" }, o))).message).toMatch(
      /^mode must be one of contradiction, grounding, all/,
    );
    expect((await failure(inProcess.verify({ sessionId, claims: [] }, o))).message).toMatch(/claims/);
    expect((await failure(inProcess.getBrief({ phase: "implement" }, o))).message).toMatch(/^phase must be one of decompile/);
    expect((await failure(inProcess.save({ sessionId, phase: "deploy", output: {} }, o))).message).toMatch(/^phase: must be one of/);
    expect((await failure(inProcess.init({ task: "   " }, o))).message).toMatch(/^task: must not be empty/);
  });

  it("gives each phase's brief, and a session's active brief until it is complete", async () => {
    const o = ctx(freshTenant());
    const briefs = await Promise.all(PHASE_ORDER.map((phase) => grpc.client.getBrief({ phase }, o)));
    expect(briefs.map((b) => b.brief?.name)).toEqual([
      "Systems Analyst",
      "Solution Architect",
      "Security & Quality Auditor",
      "Implementation Engineer",
      "Quality Assurance",
    ]);
    for (const b of briefs) {
      expect(b.brief?.authority.length).toBeGreaterThan(0);
      expect(b.brief?.notAuthority.length).toBeGreaterThan(0);
      expect(b.brief?.instructions.length).toBeGreaterThan(40);
      expect(b.sessionId).toBe("");
    }
    const { sessionId } = await grpc.client.init({ task: MIGRATION_TASK }, o);
    for (const phase of PHASE_ORDER) {
      const active = await grpc.client.getBrief({ sessionId }, o);
      expect(active).toMatchObject({ sessionId, task: MIGRATION_TASK, sessionComplete: false, brief: { phase } });
      await grpc.client.save({ sessionId, phase, output: MIGRATION_OUTPUTS[phase] as never }, o);
    }
    expect(await grpc.client.getBrief({ sessionId }, o)).toMatchObject({ sessionComplete: true, brief: { phase: "verify" } });
  });

  it("resumes a session stored when knowledgeBoundary.whatNeedsVerification was called needsVerification", async () => {
    const tenant = freshTenant();
    const o = ctx(tenant);
    const { sessionId } = await inProcess.init({ task: MIGRATION_TASK }, o);
    await inProcess.save({ sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile as never }, o);
    // The row as an earlier version of this service wrote it.
    await store.modify(tenant, sessionId, (state) => ({
      state: JSON.parse(JSON.stringify(state).replaceAll('"whatNeedsVerification"', '"needsVerification"')) as typeof state,
      result: null,
    }));
    const resumed = await inProcess.continue({ sessionId }, o);
    expect(toJson(ContinueResponseSchema, resumed)).toMatchObject({
      result: { handoff: { handshake: { unresolved: expect.arrayContaining(["JSON function usage, from the slow-query log"]) } } },
    });
    const design = await inProcess.save({ sessionId, phase: "design", output: MIGRATION_OUTPUTS.design as never }, o);
    expect(design).toMatchObject({ verdict: "excellent", nextPhase: "critique" });
    const recalled = toJson(RecallResponseSchema, await inProcess.recall({ sessionId, format: "full" }, o)) as { result: { phases: Array<{ output: { knowledgeBoundary: object } }> } };
    expect(recalled.result.phases[0]?.output.knowledgeBoundary).toMatchObject({ whatNeedsVerification: ["JSON function usage, from the slow-query log"] });
    expect(recalled.result.phases[0]?.output.knowledgeBoundary).not.toHaveProperty("needsVerification");
  });
});
