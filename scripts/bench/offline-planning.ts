/**
 * Offline planning latency (issue 16): `plan()` with the heuristic provider over the built-in
 * registry, for everyday objectives in English and German (the parser reads each), plus the
 * parser alone. Pure CPU: no store, no network. Interleaved rounds, medians of the rounds.
 *
 * Run: npx tsx scripts/bench/offline-planning.ts
 * Options (env): BENCH_ITERATIONS (per objective per round, 2000), BENCH_ROUNDS (3).
 * Prints one JSON line per kind and a summary on stdout.
 */
import { performance } from "node:perf_hooks";
import { BUILT_IN_CAPABILITIES, createCapabilityRegistry, HeuristicProvider, parseObjective } from "../../services/cognition/src/index.js";
import { plan } from "../../services/cognition/src/brain/planner.js";

const OBJECTIVES = [
  "remember that the deploy window is friday",
  "what is the deploy window?",
  "store my favourite colour: blue",
  "Remember: the on-call engineer this week is Dana",
  "find notes mentioning friday",
  "list what you remember",
  "recall everything tagged ops",
  "check https://status.example.com and remember the result",
  "forget the deploy window",
  "write a haiku about gRPC",
  "Merke dir, dass das Deploy-Fenster Freitag ist",
  "Hole https://example.com/status und merke es dir als status",
];

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

async function main(): Promise<void> {
  const iterations = Number(process.env.BENCH_ITERATIONS ?? 2000);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const deps = { provider: new HeuristicProvider(), registry: createCapabilityRegistry(BUILT_IN_CAPABILITIES) };
  const kinds = {
    "parse": async (o: string) => void parseObjective(o),
    "plan": async (o: string) => void (await plan(o, undefined, deps)),
  };
  const results: Record<string, { p50: number[]; p99: number[] }> = { parse: { p50: [], p99: [] }, plan: { p50: [], p99: [] } };
  // Warm up the JIT on every objective before measuring.
  for (const o of OBJECTIVES) for (let i = 0; i < 200; i++) await plan(o, undefined, deps);
  for (let r = 0; r < rounds; r++) {
    for (const [kind, run] of Object.entries(kinds)) {
      const samples: number[] = [];
      for (let i = 0; i < iterations; i++) {
        for (const o of OBJECTIVES) {
          const t = performance.now();
          await run(o);
          samples.push(performance.now() - t);
        }
      }
      samples.sort((a, b) => a - b);
      results[kind]!.p50.push(percentile(samples, 50));
      results[kind]!.p99.push(percentile(samples, 99));
    }
  }
  for (const [kind, r] of Object.entries(results)) {
    console.log(JSON.stringify({ kind, objectives: OBJECTIVES.length, iterations, rounds, p50Ms: median(r.p50), p99Ms: median(r.p99) }));
  }
  console.log(
    `offline planning: plan p50 ${median(results.plan!.p50).toFixed(4)} ms, p99 ${median(results.plan!.p99).toFixed(4)} ms; ` +
      `parse alone p50 ${median(results.parse!.p50).toFixed(4)} ms (per objective, ${OBJECTIVES.length} objectives)`,
  );
}

await main();
