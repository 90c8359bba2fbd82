/**
 * Policy + executor overhead per step (issue 3), heuristic provider, in one run so the numbers sit
 * side by side, interleaved over several rounds and reported as medians of the rounds:
 *  (a) direct: a no-op capability's handler called directly;
 *  (b) in-process: `executeStep` of the same no-op capability, policy (SQL store on a fresh
 *      Postgres database) through an in-process client, in-memory audit and approval sinks;
 *  (b') in-process, `cognition.generate_text` (heuristic, no network) the same way, for (c);
 *  (c) across processes: `Execute` with one explicit `cognition.generate_text` step over gRPC to a
 *      cognition main, which decides from its policy snapshot (fed by a policy main's watch) and
 *      appends a decision and an outcome entry to a ledger main. The no-op capability cannot be
 *      registered in the built main, so (c) uses that built-in, the cheapest one that touches
 *      neither the network nor memory; (b') is its in-process twin.
 *  (d) across processes, issue 14's governed read: `Execute` of one `memory.recall` step — the
 *      snapshot's decision, the read from a memory main, one durable `step.read` entry in the
 *      ledger main — beside, in the same rounds, what it cannot avoid:
 *  (h) the hops: a gRPC health check to cognition, then to memory, then to the ledger, on
 *      connections kept open, as (d) crosses them (caller → cognition → memory, ledger);
 *  (m), (l) the two calls cognition makes for (d), made straight from here: a `Recall` of the same
 *      key from the memory main and an `Append` of a small entry to the ledger main;
 *  (k) a bare commit: one autocommit INSERT into a scratch table on the same Postgres.
 *      (d) − (h) − (k) is what a step costs beyond them; issue 14's goal is < 1 ms p50.
 * Beside the latencies, on Linux, the CPU time (user + system, from /proc) each process spent per
 * step of each kind: the four mains, this process (the caller) and Postgres (all its processes),
 * medians of the rounds — where a step's work is done, which its latency alone does not say.
 *
 * Run: npx tsx scripts/bench/executor-step.ts   (after `npm run build`; needs Postgres)
 * Options (env): BENCH_STEPS (per kind per round, 2000), BENCH_ROUNDS (3), TEST_DATABASE_URL.
 * Prints one JSON line per kind and a summary on stdout.
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { credentials, makeGenericClientConstructor, type Client as GrpcClient, type ServiceError } from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import pg from "pg";
import { ContextSigner, createGrpcClient, type CallContext } from "@chaos-core/kit";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import {
  BUILT_IN_CAPABILITIES,
  createCapabilityRegistry,
  createMemoryApprovalStore,
  createInMemoryAuditSink,
  defineCapability,
  executeStep,
  HeuristicProvider,
  type CapabilityContext,
  type ExecutorDeps,
} from "../../services/cognition/src/index.js";
import { startRealServices } from "../../test/support/real-services.js";
import { createTestDatabase } from "../../test/support/postgres.js";
import { createLedgerKeys } from "../../test/support/ledger.js";
import { startServiceMain, stopProcess } from "../../test/support/processes.js";


/** Latency of one kind of step call, medians over the rounds. */
export interface StepKindResult {
  kind:
    | "direct"
    | "in-process"
    | "in-process-generate-text"
    | "grpc-generate-text"
    | "grpc-recall"
    | "hops"
    | "memory-recall"
    | "ledger-append"
    | "commit";
  capability: string;
  steps: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU µs per step by process (median of the rounds); absent where /proc cannot be read. */
  cpuUsPerStep?: Record<string, number>;
}

export interface ExecutorStepBenchResult {
  rounds: number;
  stepsPerRound: number;
  kinds: StepKindResult[];
  /** (d) − (h) − (k) at p50: what a governed read step costs beyond its hops and its commit. */
  recallBeyondHopsAndCommitMs: number;
}

/** A `grpc.health.v1.Health/Check` client on one kept connection: the cheapest call a service answers. */
function healthClient(address: string): { check(): Promise<void>; close(): void } {
  const Ctor = makeGenericClientConstructor(healthService, "grpc.health.v1.Health");
  const client: GrpcClient = new Ctor(address, credentials.createInsecure());
  const check = (client as unknown as Record<string, (req: { service: string }, cb: (err: ServiceError | null) => void) => void>)["check"]!;
  return {
    check: () => new Promise<void>((resolve, reject) => check.call(client, { service: "" }, (err) => (err ? reject(err) : resolve()))),
    close: () => client.close(),
  };
}

const noop = defineCapability({
  name: "bench.noop",
  description: "Does nothing; measures the executor and policy around a handler.",
  risk: "low",
  inputSchema: z.object({ n: z.number().int() }),
  outputSchema: z.object({ n: z.number().int() }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  handler: (input) => Promise.resolve({ n: input.n }),
});

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const median = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
const round3 = (x: number) => Math.round(x * 1000) / 1000;

// The kernel's USER_HZ, 100 wherever Linux runs; /proc counts CPU time in these ticks.
const CLOCK_TICKS = 100;

/** User + system CPU time of a process in µs (/proc/<pid>/stat), undefined when it cannot be read. */
function cpuUs(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

function postgresPids(): number[] {
  try {
    return readdirSync("/proc")
      .filter((d) => /^\d+$/.test(d))
      .filter((d) => {
        try {
          return readFileSync(`/proc/${d}/comm`, "utf8").startsWith("postgres");
        } catch {
          return false;
        }
      })
      .map(Number);
  } catch {
    return [];
  }
}

/** CPU time so far of each named process, Postgres summed over its processes; undefined off Linux. */
function cpuSnapshot(pids: Record<string, number>): Record<string, number> | undefined {
  const out: Record<string, number> = {};
  for (const [name, pid] of Object.entries(pids)) {
    const us = cpuUs(pid);
    if (us === undefined) return undefined;
    out[name] = us;
  }
  out.postgres = postgresPids().reduce((sum, pid) => sum + (cpuUs(pid) ?? 0), 0);
  return out;
}

async function time(
  steps: number,
  warmup: number,
  run: (i: number) => Promise<unknown>,
  pids: Record<string, number>,
): Promise<{ p50: number; p99: number; cpu?: Record<string, number> }> {
  for (let i = 0; i < warmup; i++) await run(i);
  const samples: number[] = [];
  const before = cpuSnapshot(pids);
  for (let i = 0; i < steps; i++) {
    const t0 = performance.now();
    await run(i);
    samples.push(performance.now() - t0);
  }
  const after = cpuSnapshot(pids);
  samples.sort((a, b) => a - b);
  const cpu = before && after ? Object.fromEntries(Object.keys(after).map((k) => [k, (after[k]! - before[k]!) / steps])) : undefined;
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), ...(cpu ? { cpu } : {}) };
}

export async function benchExecutorStep(options: { steps?: number; rounds?: number; onLine?: (line: string) => void } = {}): Promise<ExecutorStepBenchResult> {
  const steps = options.steps ?? 2000;
  const rounds = options.rounds ?? 3;
  const warmup = Math.max(50, Math.floor(steps / 10));
  const tenant = "bench";
  const call: CallContext = { tenant, principal: "bench", sessionId: "bench-session" };

  const services = await startRealServices("chaoscore_bench_executor");
  const database = await createTestDatabase("chaoscore_bench_executor_procs");
  const procs: ChildProcess[] = [];
  const cleanups: (() => unknown)[] = [];
  try {
    const provider = new HeuristicProvider();
    const deps: ExecutorDeps = {
      registry: createCapabilityRegistry([...BUILT_IN_CAPABILITIES, noop]),
      policy: services.policy,
      memory: services.memory,
      provider,
      audit: createInMemoryAuditSink(),
      approvals: createMemoryApprovalStore(),
      call,
    };
    const handlerCtx: CapabilityContext = { call, signal: new AbortController().signal, provider, memory: services.memory, policy: services.policy };

    const key = randomBytes(32).toString("hex");
    const common = { DATABASE_URL: database.url, CHAOS_CORE_CONTEXT_KEY: key };
    const ledgerKeys = await createLedgerKeys();
    cleanups.push(() => ledgerKeys.remove());
    const policy = await startServiceMain("policy", common);
    procs.push(policy.proc);
    const memory = await startServiceMain("memory", common);
    procs.push(memory.proc);
    const ledger = await startServiceMain("ledger", { ...common, ...ledgerKeys.env, POLICY_ADDR: policy.address });
    procs.push(ledger.proc);
    const cognition = await startServiceMain("cognition", {
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      LEDGER_ADDR: ledger.address,
      CHAOS_CORE_PROVIDER: "heuristic",
      REDIS_URL: "",
    });
    procs.push(cognition.proc);
    const signer = new ContextSigner(key);
    const grpc = createGrpcClient(CognitionService, cognition.address, signer);
    const memoryClient = createGrpcClient(MemoryService, memory.address, signer);
    const ledgerClient = createGrpcClient(LedgerService, ledger.address, signer);
    cleanups.push(() => {
      memoryClient.close();
      ledgerClient.close();
    });
    const hops = [cognition.address, memory.address, ledger.address].map(healthClient);
    cleanups.push(() => hops.forEach((h) => h.close()));
    const commits = new pg.Client({ connectionString: database.url });
    await commits.connect();
    cleanups.push(() => commits.end());
    await commits.query("CREATE TABLE bench_commit (n bigint)");
    // The item the governed read finds, written once through the same cognition (a governed write).
    const remembered = await grpc.client.execute(
      { target: { case: "steps", value: { steps: [{ id: "w", capability: "memory.remember", input: { key: "bench:key", value: { hello: "world" } } }] } } },
      { ctx: call },
    );
    if (remembered.results[0]?.status !== "executed") throw new Error(`the bench could not remember its item: ${JSON.stringify(remembered.results[0])}`);

    const generate = { id: "s1", capability: "cognition.generate_text", input: { prompt: "bench" } };
    const recall = { id: "r1", capability: "memory.recall", input: { key: "bench:key" } };
    const kinds: Array<{ kind: StepKindResult["kind"]; capability: string; run: (i: number) => Promise<unknown> }> = [
      { kind: "direct", capability: noop.name, run: (i) => noop.handler({ n: i }, handlerCtx) },
      { kind: "in-process", capability: noop.name, run: (i) => executeStep({ id: "s1", capability: noop.name, input: { n: i } }, deps) },
      { kind: "in-process-generate-text", capability: generate.capability, run: () => executeStep(generate, deps) },
      {
        kind: "grpc-generate-text",
        capability: generate.capability,
        run: async () => {
          const res = await grpc.client.execute({ target: { case: "steps", value: { steps: [generate] } } }, { ctx: call });
          if (res.results[0]?.status !== "executed") throw new Error(`the bench step did not execute: ${JSON.stringify(res.results[0])}`);
        },
      },
      {
        kind: "grpc-recall",
        capability: "memory.recall",
        run: async () => {
          const res = await grpc.client.execute({ target: { case: "steps", value: { steps: [recall] } } }, { ctx: call });
          if (res.results[0]?.status !== "executed") throw new Error(`the bench read did not execute: ${JSON.stringify(res.results[0])}`);
        },
      },
      {
        kind: "hops",
        capability: "grpc.health.v1.Health/Check",
        run: async () => {
          for (const h of hops) await h.check();
        },
      },
      {
        kind: "memory-recall",
        capability: "chaoscore.memory.v1.MemoryService/Recall",
        run: async () => {
          const res = await memoryClient.client.recall({ key: "bench:key" }, { ctx: call });
          if (!res.item) throw new Error("the bench's item was not found");
        },
      },
      {
        kind: "ledger-append",
        capability: "chaoscore.ledger.v1.LedgerService/Append",
        run: (i) => ledgerClient.client.append({ event: { type: "bench.append", n: i } }, { ctx: call }),
      },
      { kind: "commit", capability: "INSERT (autocommit)", run: (i) => commits.query("INSERT INTO bench_commit VALUES ($1)", [i]) },
    ];
    // Every kind must succeed before it is timed.
    for (const k of kinds.slice(1, 3)) {
      const r = (await k.run(0)) as { status: string };
      if (r.status !== "executed") throw new Error(`${k.kind}: the bench step did not execute: ${JSON.stringify(r)}`);
    }

    const pids = { cognition: cognition.proc.pid!, memory: memory.proc.pid!, ledger: ledger.proc.pid!, policy: policy.proc.pid!, caller: process.pid };
    const perKind = new Map<string, { p50: number[]; p99: number[]; cpu: Record<string, number>[] }>();
    for (let r = 0; r < rounds; r++) {
      for (const k of kinds) {
        const t = await time(steps, warmup, k.run, pids);
        const acc = perKind.get(k.kind) ?? { p50: [], p99: [], cpu: [] };
        acc.p50.push(t.p50);
        acc.p99.push(t.p99);
        if (t.cpu) acc.cpu.push(t.cpu);
        perKind.set(k.kind, acc);
      }
    }
    grpc.close();
    const results = kinds.map((k): StepKindResult => {
      const acc = perKind.get(k.kind)!;
      const cpu = acc.cpu.length === rounds ? Object.fromEntries(Object.keys(acc.cpu[0]!).map((p) => [p, Math.round(median(acc.cpu.map((c) => c[p]!)))])) : undefined;
      return { kind: k.kind, capability: k.capability, steps: steps * rounds, p50Ms: round3(median(acc.p50)), p99Ms: round3(median(acc.p99)), ...(cpu ? { cpuUsPerStep: cpu } : {}) };
    });
    const p50 = (kind: StepKindResult["kind"]) => results.find((r) => r.kind === kind)!.p50Ms;
    const result: ExecutorStepBenchResult = {
      rounds,
      stepsPerRound: steps,
      kinds: results,
      recallBeyondHopsAndCommitMs: round3(p50("grpc-recall") - p50("hops") - p50("commit")),
    };
    for (const k of result.kinds) options.onLine?.(JSON.stringify({ bench: "executor-step", ...k }));
    return result;
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
    for (const p of procs.reverse()) await stopProcess(p);
    await database.drop();
    await services.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await benchExecutorStep({
    ...(process.env.BENCH_STEPS ? { steps: Number(process.env.BENCH_STEPS) } : {}),
    ...(process.env.BENCH_ROUNDS ? { rounds: Number(process.env.BENCH_ROUNDS) } : {}),
    onLine: (line) => console.log(line),
  });
  console.log(
    `per step, p50/p99 ms (medians of ${result.rounds} rounds × ${result.stepsPerRound}): ` +
      result.kinds.map((k) => `${k.kind} ${k.p50Ms}/${k.p99Ms}`).join("; ") +
      `\ngoverned read across processes beyond its hops and its commit, p50: ${result.recallBeyondHopsAndCommitMs} ms (issue 14's goal: < 1 ms)`,
  );
  const withCpu = result.kinds.filter((k) => k.cpuUsPerStep);
  if (withCpu.length > 0) {
    console.log("CPU µs per step, by process (user + system, medians of the rounds):");
    for (const k of withCpu) console.log(`  ${k.kind}: ${Object.entries(k.cpuUsPerStep!).map(([p, us]) => `${p} ${us}`).join(", ")}`);
  }
}
