import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ContextSigner,
  createInProcessClient,
  createLogger,
  createPostgresDb,
  register,
  startGrpcServer,
  type Db,
  type RunningGrpcServer,
} from "@chaos-core/kit";
import {
  BUILT_IN_CAPABILITIES,
  createCapabilityRegistry,
  createCognitionHandlers,
  createMemoryApprovalStore,
  createInMemoryAuditSink,
  createMemoryPlanStore,
  createProvider,
} from "@chaos-core/cognition";
import { createCouncilHandlers, createSqlCouncilStore, migrateCouncil } from "@chaos-core/council";
import { createMemoryHandlers, createSqlMemoryStore, migrateMemory } from "@chaos-core/memory";
import { createPolicyHandlers, createSqlPolicyStore, createSqlTenantRegistry, createTenantDirectoryHandlers, migratePolicy, type PolicyStore } from "@chaos-core/policy";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";
import { createMrtrKeys, type MrtrKeys } from "../../../test/support/mrtr-keys.js";
import { writeSignedLocks } from "../../../test/support/contract-lock.js";

// The edge alone, as its own process, in front of policy, memory, cognition and council served over real gRPC.

const EDGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const MAIN = fileURLToPath(new URL("./main.ts", import.meta.url));
const KEY = "edge-main-test-context-key-0123456789";

let database: TestDatabase;
let db: Db;
let policyStore: PolicyStore;
let grpc: RunningGrpcServer;
let mrtrKeys: MrtrKeys;

/** Only what the test sets: no DATABASE_URL, REDIS_URL or HOST leaking in from the shell. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: "info", ...extra };
}

function runMain(env: Record<string, string>) {
  const proc = spawn(process.execPath, ["--import", "tsx", MAIN], { cwd: EDGE_DIR, env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  return { proc, exited, stdout: () => stdout, stderr: () => stderr };
}

function listening(proc: ChildProcess, stderr: () => string): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`edge did not start:\n${stderr()}`)), 30_000);
    createInterface({ input: proc.stderr! }).on("line", (line) => {
      const entry = JSON.parse(line) as { msg?: string; url?: string };
      if (entry.msg === "edge listening" && entry.url) {
        clearTimeout(timer);
        resolve(entry.url);
      }
    });
    proc.once("exit", () => reject(new Error(`edge exited:\n${stderr()}`)));
  });
}

beforeAll(async () => {
  mrtrKeys = await createMrtrKeys();
  database = await createTestDatabase("chaoscore_edge_main");
  db = createPostgresDb({ connectionString: database.url });
  await migrateMemory(db);
  await migratePolicy(db);
  await migrateCouncil(db);
  policyStore = createSqlPolicyStore(db);
  const logger = createLogger("edge-main-test", "silent");
  const policyHandlers = createPolicyHandlers(policyStore);
  const memoryHandlers = createMemoryHandlers(createSqlMemoryStore(db));
  const cognitionHandlers = createCognitionHandlers({
    registry: createCapabilityRegistry(BUILT_IN_CAPABILITIES),
    provider: createProvider({ id: "heuristic", selection: "inferred" }),
    policy: createInProcessClient(PolicyService, policyHandlers),
    memory: createInProcessClient(MemoryService, memoryHandlers),
    plans: createMemoryPlanStore(),
    audit: createInMemoryAuditSink(),
    approvals: createMemoryApprovalStore(),
    logger,
  });
  grpc = await startGrpcServer({
    host: "127.0.0.1",
    port: 0,
    signer: new ContextSigner(KEY),
    logger,
    registrations: [
      register(PolicyService, policyHandlers),
      // The edge checks every request's tenant (and a registry key) with the policy service's directory.
      register(TenantDirectoryService, createTenantDirectoryHandlers(createSqlTenantRegistry(db))),
      register(MemoryService, memoryHandlers),
      register(CognitionService, cognitionHandlers),
      register(CouncilService, createCouncilHandlers(createSqlCouncilStore(db))),
    ],
  });
});

afterAll(async () => {
  await grpc?.shutdown(1000);
  await policyStore?.close();
  await db?.close();
  await database?.drop();
  await mrtrKeys?.remove();
});

describe("the edge main", () => {
  it("serves MCP over HTTP against services reached over gRPC, and writes nothing to stdout", async () => {
    const addr = `127.0.0.1:${grpc.port}`;
    const edge = runMain({ PORT: "0", POLICY_ADDR: addr, MEMORY_ADDR: addr, COGNITION_ADDR: addr, COUNCIL_ADDR: addr, CHAOS_CORE_CONTEXT_KEY: KEY, ...mrtrKeys.env });
    const url = await listening(edge.proc, edge.stderr);
    // The requestState key's kid is named, never its secret.
    expect(edge.stderr()).toContain(`"mrtrKey":"${mrtrKeys.kid}"`);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);

    const client = new Client({ name: "edge-main-test", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    const stored = await client.callTool({ name: "chaoscore_remember", arguments: { key: "over-grpc", value: { ok: 1 } } });
    expect(stored.isError, JSON.stringify(stored.content)).toBeFalsy();
    const recalled = await client.callTool({ name: "chaoscore_recall", arguments: { key: "over-grpc" } });
    expect((recalled.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value).toEqual({ ok: 1 });
    const inspected = await client.callTool({ name: "chaoscore_inspect", arguments: { what: "policy" } });
    expect(inspected.structuredContent).toMatchObject({ policy: { source: "postgres", version: 0 } });
    // The Achieve stream crosses gRPC: one progress notification per stage, then the trace.
    const stages: string[] = [];
    const achieved = await client.callTool(
      { name: "chaoscore_achieve", arguments: { objective: "remember that the release train is tuesday" } },
      undefined,
      { onprogress: (p) => stages.push(p.message ?? "") },
    );
    expect(achieved.isError, JSON.stringify(achieved.content)).toBeFalsy();
    expect(achieved.structuredContent).toMatchObject({ status: "succeeded" });
    expect(stages.length).toBeGreaterThanOrEqual(4);
    const ready = await fetch(url.replace(/\/mcp$/, "/readyz"));
    expect(ready.status).toBe(200);
    await client.close();

    edge.proc.kill("SIGTERM");
    expect(await edge.exited).toBe(0);
    expect(edge.stdout()).toBe("");
    expect(edge.stderr()).not.toContain(KEY);
  });

  it("refuses to start without its service addresses, naming them", async () => {
    const edge = runMain({ PORT: "0" });
    expect(await edge.exited).toBe(1);
    expect(edge.stderr()).toMatch(/POLICY_ADDR: required when the edge runs alone/);
    expect(edge.stderr()).toMatch(/COGNITION_ADDR: required when the edge runs alone/);
    expect(edge.stderr()).toMatch(/COUNCIL_ADDR: required when the edge runs alone/);
    expect(edge.stderr()).toMatch(/CHAOS_CORE_MRTR_KEYS_FILE: required when the edge runs alone: the keyring that seals multi-round-trip requestState \(there is no default key/);
    expect(edge.stdout()).toBe("");
  });

  it("refuses to start with a keyring file it cannot use, naming the file and the field", async () => {
    const addr = `127.0.0.1:${grpc.port}`;
    const env = { PORT: "0", POLICY_ADDR: addr, MEMORY_ADDR: addr, COGNITION_ADDR: addr, COUNCIL_ADDR: addr, CHAOS_CORE_CONTEXT_KEY: KEY };
    const missing = runMain({ ...env, CHAOS_CORE_MRTR_KEYS_FILE: `${mrtrKeys.env.CHAOS_CORE_MRTR_KEYS_FILE}.gone` });
    expect(await missing.exited).toBe(1);
    expect(missing.stderr()).toMatch(/mrtr keyring .*mrtr-keyring\.json\.gone: file not found/);
    const short = join(dirname(mrtrKeys.env.CHAOS_CORE_MRTR_KEYS_FILE), "short.json");
    writeFileSync(short, JSON.stringify({ active: "k1", keys: { k1: { secret: "c2hvcnQ" } } }));
    const weak = runMain({ ...env, CHAOS_CORE_MRTR_KEYS_FILE: short });
    expect(await weak.exited).toBe(1);
    expect(weak.stderr()).toMatch(/mrtr keyring .*short\.json: keys\.k1\.secret: must decode to at least 32 bytes/);
    expect(weak.stderr()).not.toContain("c2hvcnQ");
  });

  it("refuses to start with a tampered lockfile or a wrong signature, naming what drifted; starts attested with a good one", async () => {
    const addr = `127.0.0.1:${grpc.port}`;
    const locks = writeSignedLocks(join(dirname(mrtrKeys.env.CHAOS_CORE_MRTR_KEYS_FILE), "contracts"));
    const env = { PORT: "0", POLICY_ADDR: addr, MEMORY_ADDR: addr, COGNITION_ADDR: addr, COUNCIL_ADDR: addr, CHAOS_CORE_CONTEXT_KEY: KEY, ...mrtrKeys.env, CHAOS_CORE_CONTRACT_KEYS: locks.vkey };

    const tampered = runMain({ ...env, CHAOS_CORE_CONTRACT_LOCK_FILE: locks.tampered });
    expect(await tampered.exited).toBe(1);
    expect(tampered.stderr()).toMatch(/edge failed to start/);
    expect(tampered.stderr()).toMatch(/the lockfile was edited: tools\/chaoscore_remember \(surface\)/);

    const wrong = runMain({ ...env, CHAOS_CORE_CONTRACT_LOCK_FILE: locks.wrongSignature });
    expect(await wrong.exited).toBe(1);
    expect(wrong.stderr()).toMatch(/edge failed to start/);
    expect(wrong.stderr()).toContain(`${locks.wrongSignature}: the contracts signature does not verify`);

    const good = runMain({ ...env, CHAOS_CORE_CONTRACT_LOCK_FILE: locks.good });
    await listening(good.proc, good.stderr);
    expect(good.stderr()).toContain('"contracts":"attested by chaos-core-release"');
    good.proc.kill("SIGTERM");
    expect(await good.exited).toBe(0);
  });
});
