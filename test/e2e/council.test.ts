import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { generateMrtrKeyringFile, hashApiKey } from "@chaos-core/edge";
import { MIGRATION_OUTPUTS, MIGRATION_TASK, SEED_STYLE_OUTPUTS } from "../../services/council/src/domain/examples.js";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { bothTransports } from "../support/both-transports.js";
import { httpClient, removeDir, startServiceMain, stopProcess, tempDir } from "../support/processes.js";

// The council through real MCP clients against real processes: the standalone command over
// stdio and Streamable HTTP, and the services run alone (the Kubernetes shape) on Postgres,
// behind an edge that authenticates two tenants by API key.

const PHASES = ["decompile", "design", "critique", "synthesis", "verify"] as const;

function ok(res: unknown): Record<string, unknown> {
  const r = res as CallToolResult;
  expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
  return r.structuredContent as Record<string, unknown>;
}

function refused(res: unknown): { code: string; message: string } {
  const r = res as CallToolResult;
  expect(r.isError, JSON.stringify(r.structuredContent)).toBe(true);
  return (r.structuredContent as { error: { code: string; message: string } }).error;
}

function text(res: unknown): string {
  return (res as CallToolResult).content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

const call = (client: Client, name: string, args: Record<string, unknown>) => client.callTool({ name, arguments: args });

/** What a client sees of a whole session: each save's verdict and handoff, then the final score. */
async function wholeSession(client: Client): Promise<{ sessionId: string; trail: string[]; score: Record<string, unknown> }> {
  const init = ok(await call(client, "council_init", { task: MIGRATION_TASK }));
  const sessionId = init.sessionId as string;
  const trail = [`init: ${init.phase} as ${init.persona} (${init.complexityLevel}, ${init.pipelineDepth})`];
  for (const phase of PHASES) {
    const saved = ok(await call(client, "council_save", { sessionId, phase, output: MIGRATION_OUTPUTS[phase] }));
    const h = saved.handoff as { personaTransition: { fromPersona: string; toPersona: string } } | undefined;
    trail.push(
      `${phase}: ${saved.verdict} ${saved.canProceed ? "→" : "■"} ${saved.nextPhase ?? "complete"}` +
        (h ? ` (${h.personaTransition.fromPersona} hands over to ${h.personaTransition.toPersona})` : ""),
    );
  }
  const score = ok(await call(client, "council_score", { sessionId }));
  return { sessionId, trail, score };
}

const EXPECTED_TRAIL = [
  "init: decompile as Systems Analyst (moderate, standard)",
  "decompile: excellent → design (Systems Analyst hands over to Solution Architect)",
  "design: excellent → critique (Solution Architect hands over to Security & Quality Auditor)",
  "critique: excellent → synthesis (Security & Quality Auditor hands over to Implementation Engineer)",
  "synthesis: excellent → verify (Implementation Engineer hands over to Quality Assurance)",
  "verify: excellent ■ complete",
];

/**
 * A session as a model that follows the council seed writes it (its field names, plain strings in
 * lists of objects, APPROVED and upper-case levels), then verify in the seed's mode words, recall and score.
 */
async function seedStyleSession(client: Client) {
  const { sessionId } = ok(await call(client, "council_init", { task: MIGRATION_TASK })) as { sessionId: string };
  const trail: string[] = [];
  for (const phase of PHASES) {
    const saved = ok(await call(client, "council_save", { sessionId, phase, output: SEED_STYLE_OUTPUTS[phase] }));
    trail.push(`${phase}: ${saved.canProceed ? "→" : "■"} ${saved.nextPhase ?? "complete"}`);
  }
  const claims = ["The dataset is about 2GB", { text: "Downtime of 3 hours is planned", source: "a rumour" }];
  const verified = ok(await call(client, "council_verify", { sessionId, claims, mode: "all" }));
  const byDefault = ok(await call(client, "council_verify", { sessionId, claims }));
  const recalled = ok(await call(client, "council_recall", { sessionId, format: "full" }));
  const score = ok(await call(client, "council_score", { sessionId }));
  return { sessionId, trail, verified, byDefault, recalled, score };
}

describe("the council over stdio and Streamable HTTP (chaos-core on embedded stores)", () => {
  const both = bothTransports();
  beforeAll(() => both.start());
  afterAll(() => both.close());

  it("runs the migration session to an excellent score with the same verdicts and handoffs on both", async () => {
    const [http, stdio] = await Promise.all([wholeSession(both.overHttp), wholeSession(both.overStdio)]);
    expect(http.trail).toEqual(EXPECTED_TRAIL);
    expect(stdio.trail).toEqual(EXPECTED_TRAIL);
    for (const { score, sessionId } of [http, stdio]) {
      expect(score).toMatchObject({ sessionId, verdict: "excellent", status: "complete", outcome: "approved" });
      expect(score.phaseScores).toEqual(
        Object.fromEntries(PHASES.map((p) => [p, expect.objectContaining({ verdict: "excellent", locked: true })])),
      );
    }
  });

  it("completes all five phases of a session written with the seed's field names, plain-string list items and words", async () => {
    const runs = await Promise.all([seedStyleSession(both.overHttp), seedStyleSession(both.overStdio)]);
    for (const { sessionId, trail, verified, byDefault, recalled, score } of runs) {
      expect(trail).toEqual(["decompile: → design", "design: → critique", "critique: → synthesis", "synthesis: → verify", "verify: ■ complete"]);
      expect(score).toMatchObject({ sessionId, status: "complete", outcome: "approved", progress: "5/5" });
      // Stored normalised: the seed's boundary name, objects for the strings, lower-case words.
      const outputs = Object.fromEntries((recalled.phases as Array<{ name: string; output: Record<string, unknown> }>).map((p) => [p.name, p.output]));
      expect(outputs.decompile?.knowledgeBoundary).toMatchObject({ whatNeedsVerification: ["JSON function usage, from the slow-query log"] });
      expect(outputs.design?.approaches).toEqual([
        { name: "Bulk copy with binlog change data capture", description: "Bulk copy with binlog change data capture", pros: [], cons: [] },
        { name: "Offline dump and restore", description: "Offline dump and restore", pros: [], cons: [] },
      ]);
      expect(outputs.critique).toMatchObject({ riskLevel: "high", vulnerabilities: Array(3).fill(expect.objectContaining({ severity: "high" })) });
      expect(outputs.verify).toMatchObject({ decision: "approve", checks: Array(5).fill(expect.objectContaining({ passed: true })) });
      // council_verify answers in the seed's word, asked for or by default, and takes plain-string claims.
      for (const v of [verified, byDefault]) expect(v).toMatchObject({ mode: "all", total: 2, passed: 1, failed: 1 });
    }
  });

  it("serves the persona prompts, identical on both transports", async () => {
    const [a, b] = await Promise.all([both.overStdio.listPrompts(), both.overHttp.listPrompts()]);
    expect(b.prompts).toEqual(a.prompts);
    expect(a.prompts.map((p) => p.name)).toEqual([...PHASES.map((p) => `council_brief_${p}`), "council_phase_brief"]);
    const verify = await both.overStdio.getPrompt({ name: "council_brief_verify" });
    expect(verify.messages[0]?.role).toBe("user");
    expect((verify.messages[0]?.content as { text: string }).text).toMatch(/you are the Quality Assurance[\s\S]*## Instructions/);

    const { sessionId } = ok(await call(both.overHttp, "council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    ok(await call(both.overHttp, "council_save", { sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile }));
    const active = await both.overHttp.getPrompt({ name: "council_phase_brief", arguments: { sessionId } });
    expect((active.messages[0]?.content as { text: string }).text).toMatch(/^# Council phase "design": you are the Solution Architect/);
  });
});

describe("the council run alone on Postgres, behind an edge with two tenants", () => {
  let db: TestDatabase;
  let ledgerKeys: LedgerKeys;
  const dir = tempDir();
  const procs: ChildProcess[] = [];
  let common: Record<string, string>;
  let councilProc: ChildProcess;
  let councilPort: string;
  let edgeUrl: string;
  let acme: Client;
  let globex: Client;
  const keys = { acme: randomBytes(24).toString("hex"), globex: randomBytes(24).toString("hex") };

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_council_e2e");
    common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: randomBytes(32).toString("hex") };
    const keysFile = join(dir, "api-keys.json");
    writeFileSync(
      keysFile,
      JSON.stringify([
        { tenant: "acme", principal: "acme-agent", sha256: hashApiKey(keys.acme) },
        { tenant: "globex", principal: "globex-agent", sha256: hashApiKey(keys.globex) },
      ]),
    );
    const policy = await startServiceMain("policy", common);
    const memory = await startServiceMain("memory", common);
    const council = await startServiceMain("council", common);
    ledgerKeys = await createLedgerKeys();
    const ledger = await startServiceMain("ledger", { ...common, ...ledgerKeys.env, POLICY_ADDR: policy.address });
    procs.push(policy.proc, memory.proc, ledger.proc);
    councilProc = council.proc;
    councilPort = council.address.split(":")[1]!;
    const cognition = await startServiceMain("cognition", {
      CHAOS_CORE_CONTEXT_KEY: common.CHAOS_CORE_CONTEXT_KEY!,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      LEDGER_ADDR: ledger.address,
      CHAOS_CORE_PROVIDER: "heuristic",
    });
    procs.push(cognition.proc);
    const mrtrKeysFile = join(dir, "mrtr-keyring.json");
    await generateMrtrKeyringFile(mrtrKeysFile);
    const edge = await startServiceMain("edge", {
      CHAOS_CORE_MRTR_KEYS_FILE: mrtrKeysFile,
      CHAOS_CORE_CONTEXT_KEY: common.CHAOS_CORE_CONTEXT_KEY!,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      COGNITION_ADDR: cognition.address,
      COUNCIL_ADDR: council.address,
      LEDGER_ADDR: ledger.address,
      CHAOS_CORE_API_KEYS_FILE: keysFile,
    });
    procs.push(edge.proc);
    edgeUrl = edge.address;
    acme = await httpClient(edgeUrl, { authorization: `Bearer ${keys.acme}` });
    globex = await httpClient(edgeUrl, { authorization: `Bearer ${keys.globex}` });
  });

  afterAll(async () => {
    await acme?.close();
    await globex?.close();
    if (councilProc) await stopProcess(councilProc);
    for (const p of procs.reverse()) await stopProcess(p);
    await db?.drop();
    await ledgerKeys?.remove();
    removeDir(dir);
  });

  it("refuses skipping a phase, saving out of order and re-saving a locked phase, saying which phase is active", async () => {
    const { sessionId } = ok(await call(acme, "council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    const skip = refused(await call(acme, "council_save", { sessionId, phase: "design", output: MIGRATION_OUTPUTS.design }));
    expect(skip.code).toBe("failed_precondition");
    expect(skip.message).toMatch(/cannot save design: the active phase is decompile \(Systems Analyst\)\. Phases run in order/);
    ok(await call(acme, "council_save", { sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile }));
    const outOfOrder = refused(await call(acme, "council_save", { sessionId, phase: "synthesis", output: MIGRATION_OUTPUTS.synthesis }));
    expect(outOfOrder.message).toMatch(/cannot save synthesis: the active phase is design \(Solution Architect\)/);
    const locked = refused(await call(acme, "council_save", { sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile }));
    expect(locked.message).toMatch(/cannot save decompile: it was saved with a passing score \(100\) and is locked/);
  });

  it("names the field of a malformed output: wrong types and missing fields from the council, oversized text at the edge", async () => {
    const { sessionId } = ok(await call(acme, "council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    const { criticalQuestions: _dropped, ...missing } = MIGRATION_OUTPUTS.decompile;
    const wrong = refused(
      await call(acme, "council_save", { sessionId, phase: "decompile", output: { ...missing, confidence: "high", constraints: "none" } }),
    );
    expect(wrong.code).toBe("invalid_argument");
    expect(wrong.message).toMatch(/invalid decompile output: /);
    for (const field of ["criticalQuestions", "confidence", "constraints"]) expect(wrong.message).toContain(field);

    const huge = await call(acme, "council_save", { sessionId, phase: "decompile", output: { ...MIGRATION_OUTPUTS.decompile, summary: "x".repeat(200_001) } });
    expect((huge as CallToolResult).isError).toBe(true);
    expect(text(huge)).toMatch(/output/);
    expect(text(huge)).toMatch(/the limit is 200000/);

    const long = refused(
      await call(acme, "council_save", { sessionId, phase: "decompile", output: { ...MIGRATION_OUTPUTS.decompile, summary: "y".repeat(20_001) } }),
    );
    expect(long.code).toBe("invalid_argument");
    expect(long.message).toMatch(/summary/);
    // None of it reached the session.
    expect(ok(await call(acme, "council_continue", { sessionId }))).toMatchObject({ activePhase: "decompile", needed: { lastAttempt: null } });
  });

  it("keeps a session through a restart of the council process, and shows it to no other tenant", async () => {
    const init = ok(await call(acme, "council_init", { task: MIGRATION_TASK }));
    const sessionId = init.sessionId as string;
    for (const phase of PHASES.slice(0, 2)) ok(await call(acme, "council_save", { sessionId, phase, output: MIGRATION_OUTPUTS[phase] }));

    // Another tenant, through the same edge: the id is simply not found, on every tool.
    for (const [name, args] of [
      ["council_recall", { sessionId }],
      ["council_continue", { sessionId }],
      ["council_score", { sessionId }],
      ["council_verify", { sessionId, claims: [{ text: "JSON columns become jsonb" }] }],
      ["council_save", { sessionId, phase: "critique", output: MIGRATION_OUTPUTS.critique }],
    ] as const) {
      expect(refused(await call(globex, name, args))).toEqual({ code: "not_found", message: `session ${sessionId} was not found` });
    }
    const prompt = await globex.getPrompt({ name: "council_phase_brief", arguments: { sessionId } }).catch((e: unknown) => e);
    expect(prompt).toBeInstanceOf(McpError);
    expect((prompt as McpError).message).toMatch(/not_found/);

    // The council process goes away and comes back on the same address; the edge stays up.
    await stopProcess(councilProc);
    const down = refused(await call(acme, "council_continue", { sessionId }));
    expect(down.code).toBe("unavailable");
    councilProc = (await startServiceMain("council", { ...common, PORT: councilPort })).proc;
    const resumed = await untilServed(() => call(acme, "council_continue", { sessionId }));
    expect(ok(resumed)).toMatchObject({ sessionId, status: "active", activePhase: "critique", activePersona: "Security & Quality Auditor" });

    for (const phase of PHASES.slice(2)) ok(await call(acme, "council_save", { sessionId, phase, output: MIGRATION_OUTPUTS[phase] }));
    const score = ok(await call(acme, "council_score", { sessionId }));
    expect(score).toMatchObject({ verdict: "excellent", status: "complete", progress: "5/5" });
    expect(refused(await call(globex, "council_score", { sessionId })).code).toBe("not_found");
    // The other tenant's own sessions are its own.
    const theirs = ok(await call(globex, "council_init", { task: "Rotate the TLS certificates of the internal services" }));
    expect(refused(await call(acme, "council_recall", { sessionId: theirs.sessionId as string })).code).toBe("not_found");
  });
});

/**
 * Calls until the answer is not `unavailable`: a gRPC channel whose server went away may fail
 * once more before it reconnects. Bounded by attempts, not by a clock.
 */
async function untilServed(fn: () => Promise<unknown>, attempts = 40): Promise<unknown> {
  for (let i = 0; ; i++) {
    const res = await fn();
    const code = ((res as CallToolResult).structuredContent as { error?: { code?: string } } | undefined)?.error?.code;
    if (code !== "unavailable" || i >= attempts) return res;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
