/**
 * The benchmark of the foundation issue, all in one run so the numbers sit side by side:
 *  - tools/call over Streamable HTTP at 1 and 16 concurrent clients for (a) a bare MCP SDK
 *    server with a no-op tool, on SDK v2 as the edge (`bare-server-v2.ts`), (b) `chaos-core serve` answering `chaoscore_recall` by key, and
 *    (c) `chaos-core serve` answering `chaoscore_inspect {what: "sessions"}` (the edge alone, no
 *    policy or database call), interleaved over several rounds, with medians and ratios;
 *  - memory substring search p50/p99 over 100,000 items on Postgres;
 *  - stdio start-up on an existing data directory (scripts/bench/stdio-startup.ts).
 *
 *  - with BENCH_LEDGER=1, the ledger append benchmark (scripts/bench/ledger-append.ts) too;
 *    BENCH_ONLY=ledger runs only that one.
 *
 * Run: npm run bench   (options: BENCH_SECONDS, BENCH_ROUNDS, BENCH_SKIP_SEARCH=1,
 *                       BENCH_STARTUP_RUNS, BENCH_SKIP_STARTUP=1, BENCH_LEDGER=1, BENCH_ONLY=ledger,
 *                       BENCH_ONLY=edge-governance: scripts/bench/edge-governance.ts alone,
 *                       BENCH_SERVER_CPUS / BENCH_DRIVER_CPUS: scripts/bench/cpus.ts)
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { cpuPlacement, onServerCpus, pinDriver } from "./cpus.js";
import { benchLedgerAppend, formatLedgerBench, ledgerBenchOptionsFromEnv } from "./ledger-append.js";
import { runLoad, type LoadResult } from "./mcp-load.js";
import { benchMemorySearch } from "./memory-search.js";
import { benchStdioStartup, startupTable } from "./stdio-startup.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const root = new URL("../../", import.meta.url).pathname;

/** Starts a server process and resolves with the first http URL it prints on stdout. */
function startServer(command: string, commandArgs: string[], env: NodeJS.ProcessEnv): Promise<{ url: string; proc: ChildProcess }> {
  const [cmd, args] = onServerCpus(command, commandArgs);
  const proc = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: proc.stdout! });
    lines.on("line", (line) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(line);
      if (m) resolve({ url: m[1]!, proc });
    });
    process.stderr.write(`started ${args.join(" ")} as pid ${proc.pid}\n`);
  proc.once("exit", (code) => reject(new Error(`${cmd} exited with ${code} before listening`)));
  });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
}

interface Summary {
  p50: number;
  p99: number;
  throughput: number;
}

function summarise(results: LoadResult[]): Summary {
  return {
    p50: median(results.map((r) => r.p50)),
    p99: median(results.map((r) => r.p99)),
    throughput: median(results.map((r) => r.throughput)),
  };
}

if (process.env.BENCH_ONLY === "edge-governance") {
  await import("./edge-governance.js");
  process.exit(0);
}

if (process.env.BENCH_ONLY === "ledger") {
  const result = await benchLedgerAppend({ ...ledgerBenchOptionsFromEnv(process.env), log: (s) => process.stderr.write(`${s}\n`) });
  console.log(formatLedgerBench(result));
  process.exit(result.verify.ok ? 0 : 1);
}

pinDriver();
const dataDir = mkdtempSync(join(tmpdir(), "chaos-core-bench-"));
const bare = await startServer(process.execPath, ["--import", "tsx", "scripts/bench/bare-server-v2.ts"], {});
const chaos = await startServer(process.execPath, ["services/standalone/bin/chaos-core.js", "serve"], {
  PORT: "0",
  CHAOS_CORE_DATA_DIR: dataDir,
  LOG_LEVEL: "warn",
});

try {
  const seed = new Client({ name: "bench-seed", version: "0.0.0" });
  const seedTransport = new StreamableHTTPClientTransport(new URL(chaos.url));
  await seed.connect(seedTransport);
  await seed.callTool({ name: "chaoscore_remember", arguments: { key: "bench:key", value: { hello: "world" } } });
  await seedTransport.terminateSession();
  await seed.close();

  const series = [
    { name: "(a) bare SDK no-op", url: bare.url, tool: "noop", args: { key: "x" } },
    { name: "(b) chaoscore_recall by key (governed read: one step.read entry)", url: chaos.url, tool: "chaoscore_recall", args: { key: "bench:key" } },
    { name: "(c) chaoscore_inspect sessions (edge only)", url: chaos.url, tool: "chaoscore_inspect", args: { what: "sessions" } },
    { name: "(d) chaoscore_remember (governed write: decision, then outcome)", url: chaos.url, tool: "chaoscore_remember", args: { key: "bench:written", value: { n: 1 } } },
  ];
  const rows: string[] = [];
  for (const concurrency of [1, 16]) {
    const results: LoadResult[][] = series.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, s] of series.entries()) {
        results[i]!.push(await runLoad({ ...s, concurrency, seconds: SECONDS }));
      }
      process.stderr.write(`round ${round + 1}/${ROUNDS} at concurrency ${concurrency} done\n`);
    }
    const summaries = results.map(summarise);
    const bareRun = summaries[0]!;
    for (const [i, x] of summaries.entries()) {
      rows.push(
        `| ${concurrency} | ${series[i]!.name} | ${x.p50.toFixed(2)} / ${x.p99.toFixed(2)} | ${x.throughput.toFixed(0)} | ` +
          `${(x.p50 / bareRun.p50).toFixed(2)} | ${(x.throughput / bareRun.throughput).toFixed(2)} |`,
      );
    }
  }
  const store = process.env.DATABASE_URL ? `Postgres${process.env.REDIS_URL ? " + Redis" : ""}` : "embedded (PGlite)";
  const snapshots = process.env.CHAOS_CORE_POLICY_SNAPSHOTS === "off" ? "off" : "on";
  console.log(`tools/call over Streamable HTTP, ${store}, policy snapshots ${snapshots}; medians of ${ROUNDS} interleaved rounds of ${SECONDS}s; ${cpuPlacement()}`);
  console.log("| clients | series | p50 / p99 ms | calls/s | p50 ÷ bare | calls/s ÷ bare |");
  console.log("|---|---|---|---|---|---|");
  for (const r of rows) console.log(r);
} finally {
  bare.proc.kill("SIGTERM");
  chaos.proc.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 500));
  rmSync(dataDir, { recursive: true, force: true });
}

if (process.env.BENCH_SKIP_SEARCH !== "1") {
  const s = await benchMemorySearch({});
  console.log("\nmemory substring search over 100,000 items on Postgres");
  console.log(JSON.stringify(s));
}

if (process.env.BENCH_LEDGER === "1") {
  console.log(`\n${formatLedgerBench(await benchLedgerAppend({ ...ledgerBenchOptionsFromEnv(process.env), log: (s) => process.stderr.write(`${s}\n`) }))}`);
}

if (process.env.BENCH_SKIP_STARTUP !== "1") {
  const runs = Number(process.env.BENCH_STARTUP_RUNS ?? 7);
  console.log(`\n${startupTable(await benchStdioStartup({ runs }), runs)}`);
}
process.exit(0);
