/**
 * Policy + executor overhead per step (issue 3), heuristic provider, in one run so the numbers sit
 * side by side, interleaved over several rounds and reported as medians of the rounds:
 *  (a) direct: a no-op capability's handler called directly;
 *  (b) in-process: `executeStep` of the same no-op capability, policy (SQL store on a fresh
 *      Postgres database) through an in-process client, in-memory audit and approval sinks;
 *  (b') in-process, `cognition.generate_text` (heuristic, no network) the same way, for (c);
 *  (c) across processes: `Execute` with one explicit `cognition.generate_text` step over gRPC to a
 *      cognition main, which asks a policy main over gRPC. The no-op capability cannot be
 *      registered in the built main, so (c) uses that built-in, the cheapest one that touches
 *      neither the network nor memory; (b') is its in-process twin.
 *
 * Run: npx tsx scripts/bench/executor-step.ts   (after `npm run build`; needs Postgres)
 * Options (env): BENCH_STEPS (per kind per round, 2000), BENCH_ROUNDS (3), TEST_DATABASE_URL.
 * Prints one JSON line per kind and a summary on stdout.
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { ContextSigner, createGrpcClient, type CallContext } from "@chaos-core/kit";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
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
import { startServiceMain, stopProcess } from "../../test/support/processes.js";


/** Latency of one kind of step call, medians over the rounds. */
export interface StepKindResult {
  kind: "direct" | "in-process" | "in-process-generate-text" | "grpc-generate-text";
  capability: string;
  steps: number;
  p50Ms: number;
  p99Ms: number;
}

export interface ExecutorStepBenchResult {
  rounds: number;
  stepsPerRound: number;
  kinds: StepKindResult[];
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

async function time(steps: number, warmup: number, run: (i: number) => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < warmup; i++) await run(i);
  const samples: number[] = [];
  for (let i = 0; i < steps; i++) {
    const t0 = performance.now();
    await run(i);
    samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
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
    const policy = await startServiceMain("policy", common);
    procs.push(policy.proc);
    const memory = await startServiceMain("memory", common);
    procs.push(memory.proc);
    const cognition = await startServiceMain("cognition", {
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      CHAOS_CORE_PROVIDER: "heuristic",
      REDIS_URL: "",
    });
    procs.push(cognition.proc);
    const grpc = createGrpcClient(CognitionService, cognition.address, new ContextSigner(key));

    const generate = { id: "s1", capability: "cognition.generate_text", input: { prompt: "bench" } };
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
    ];
    // Every kind must succeed before it is timed.
    for (const k of kinds.slice(1, 3)) {
      const r = (await k.run(0)) as { status: string };
      if (r.status !== "executed") throw new Error(`${k.kind}: the bench step did not execute: ${JSON.stringify(r)}`);
    }

    const perKind = new Map<string, { p50: number[]; p99: number[] }>();
    for (let r = 0; r < rounds; r++) {
      for (const k of kinds) {
        const t = await time(steps, warmup, k.run);
        const acc = perKind.get(k.kind) ?? { p50: [], p99: [] };
        acc.p50.push(t.p50);
        acc.p99.push(t.p99);
        perKind.set(k.kind, acc);
      }
    }
    grpc.close();
    const result: ExecutorStepBenchResult = {
      rounds,
      stepsPerRound: steps,
      kinds: kinds.map((k) => {
        const acc = perKind.get(k.kind)!;
        return { kind: k.kind, capability: k.capability, steps: steps * rounds, p50Ms: round3(median(acc.p50)), p99Ms: round3(median(acc.p99)) };
      }),
    };
    for (const k of result.kinds) options.onLine?.(JSON.stringify({ bench: "executor-step", ...k }));
    return result;
  } finally {
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
      result.kinds.map((k) => `${k.kind} ${k.p50Ms}/${k.p99Ms}`).join("; "),
  );
}
