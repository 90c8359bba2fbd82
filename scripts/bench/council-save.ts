/**
 * `council_save` latency through the edge (issue 5), for the realistic MySQL → PostgreSQL phase
 * outputs (services/council/src/domain/examples.ts), on Postgres, with real MCP SDK clients over
 * Streamable HTTP, one client per target, calls one at a time. In one run, interleaved over
 * several rounds so the numbers sit side by side:
 *  (a) a bare MCP SDK server's no-op tool: the floor any tools/call pays;
 *  (b) `chaoscore_inspect {what: "sessions"}` on `chaos-core serve`: the edge alone, no service;
 *  (c) `council_save` on `chaos-core serve` with DATABASE_URL: edge → in-process council → Postgres;
 *  (d) `council_save` on the services run alone: edge → gRPC → council main → Postgres.
 * Every session is init → decompile → design → critique → synthesis → verify; each save is timed.
 *
 * Run: npx tsx scripts/bench/council-save.ts   (after `npm run build`; needs Postgres)
 * Options (env): BENCH_SESSIONS (per target per round, 40), BENCH_ROUNDS (3), BENCH_DISTRIBUTED (1; 0 skips d).
 * Prints one JSON line per series and a Markdown table on stdout.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { MIGRATION_OUTPUTS, MIGRATION_TASK } from "../../services/council/src/domain/examples.js";
import { createLedgerKeys } from "../../test/support/ledger.js";
import { createMrtrKeys } from "../../test/support/mrtr-keys.js";
import { createTestDatabase } from "../../test/support/postgres.js";
import { startServiceMain, stopProcess } from "../../test/support/processes.js";
import { percentile } from "./mcp-load.js";

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 40);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DISTRIBUTED = process.env.BENCH_DISTRIBUTED !== "0";
const PHASES = ["decompile", "design", "critique", "synthesis", "verify"] as const;
const root = new URL("../../", import.meta.url).pathname;

/** Starts a server process and resolves with the first MCP URL it prints on stdout. */
function startServer(args: string[], env: NodeJS.ProcessEnv): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  // Drained, not shown: the servers log every call at info, as they do in production.
  proc.stderr!.resume();
  return new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout! }).on("line", (line) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(line);
      if (m) resolve({ url: m[1]!, proc });
    });
    proc.once("exit", (code) => reject(new Error(`${args.join(" ")} exited with ${code} before listening`)));
  });
}

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: "bench-council", version: "0.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (res.isError) throw new Error(`${name} failed: ${JSON.stringify(res.content)}`);
  return res.structuredContent as Record<string, unknown>;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** One whole session; returns each save's latency by phase. */
async function session(client: Client): Promise<Array<[string, number]>> {
  const { sessionId } = (await call(client, "council_init", { task: MIGRATION_TASK })) as { sessionId: string };
  const out: Array<[string, number]> = [];
  for (const phase of PHASES) {
    out.push([phase, await timed(() => call(client, "council_save", { sessionId, phase, output: MIGRATION_OUTPUTS[phase] }))]);
  }
  return out;
}

interface Series {
  name: string;
  samples: number[];
  /** p50 of each round, to show the spread between rounds. */
  roundP50: number[];
  byPhase?: Record<string, number[]>;
}

function summary(s: Series) {
  const sorted = [...s.samples].sort((a, b) => a - b);
  const r3 = (x: number) => Math.round(x * 100) / 100;
  return {
    series: s.name,
    calls: sorted.length,
    p50Ms: r3(percentile(sorted, 50)),
    p99Ms: r3(percentile(sorted, 99)),
    roundP50Ms: s.roundP50.map(r3),
    ...(s.byPhase
      ? {
          p50ByPhaseMs: Object.fromEntries(
            Object.entries(s.byPhase).map(([p, xs]) => [p, r3(percentile([...xs].sort((a, b) => a - b), 50))]),
          ),
        }
      : {}),
  };
}

const database = await createTestDatabase("chaoscore_bench_council");
const dataDir = mkdtempSync(join(tmpdir(), "chaos-core-bench-council-"));
const procs: ChildProcess[] = [];
const keys = DISTRIBUTED ? await createLedgerKeys() : undefined;
const mrtrKeys = DISTRIBUTED ? await createMrtrKeys() : undefined;
try {
  const bare = await startServer(["--import", "tsx", "scripts/bench/bare-server-v2.ts"], {});
  procs.push(bare.proc);
  const serve = await startServer(["services/standalone/bin/chaos-core.js", "serve"], {
    PORT: "0",
    CHAOS_CORE_DATA_DIR: dataDir,
    DATABASE_URL: database.url,
    REDIS_URL: "",
    // info, the production default, as the services below: each tool call writes one log line.
    LOG_LEVEL: "info",
  });
  procs.push(serve.proc);

  let distributedUrl: string | undefined;
  if (DISTRIBUTED && keys && mrtrKeys) {
    // The services run alone, the Kubernetes shape (at LOG_LEVEL info, startServiceMain's default).
    const common = { DATABASE_URL: database.url, CHAOS_CORE_CONTEXT_KEY: randomBytes(32).toString("hex"), CHAOS_CORE_ADMIN_PORT: "0" };
    const start = async (name: string, env: Record<string, string>) => {
      const s = await startServiceMain(name, env);
      procs.push(s.proc);
      return s.address;
    };
    const policy = await start("policy", common);
    const memory = await start("memory", common);
    const council = await start("council", common);
    const ledger = await start("ledger", { ...common, ...keys.env, POLICY_ADDR: policy });
    const addrs = { CHAOS_CORE_CONTEXT_KEY: common.CHAOS_CORE_CONTEXT_KEY, POLICY_ADDR: policy, MEMORY_ADDR: memory, LEDGER_ADDR: ledger };
    const cognition = await start("cognition", { ...addrs, CHAOS_CORE_PROVIDER: "heuristic" });
    distributedUrl = await start("edge", { ...addrs, ...mrtrKeys.env, COGNITION_ADDR: cognition, COUNCIL_ADDR: council });
  }

  const bareClient = await connect(bare.url);
  const serveClient = await connect(serve.url);
  const distClient = distributedUrl ? await connect(distributedUrl) : undefined;

  const series: Record<string, Series> = {
    bare: { name: "(a) bare SDK no-op", samples: [], roundP50: [] },
    inspect: { name: "(b) chaoscore_inspect sessions (standalone)", samples: [], roundP50: [] },
    standalone: { name: "(c) council_save, standalone on Postgres", samples: [], roundP50: [], byPhase: {} },
    ...(distClient ? { distributed: { name: "(d) council_save, edge → gRPC → council main", samples: [], roundP50: [], byPhase: {} } } : {}),
  };

  const saves = async (s: Series, client: Client, n: number) => {
    const round: number[] = [];
    for (let i = 0; i < n; i++) {
      for (const [phase, ms] of await session(client)) {
        round.push(ms);
        (s.byPhase![phase] ??= []).push(ms);
      }
    }
    return round;
  };
  const repeat = async (n: number, fn: () => Promise<unknown>) => {
    const round: number[] = [];
    for (let i = 0; i < n; i++) round.push(await timed(fn));
    return round;
  };

  // Warm-up: JIT, connection pools, prepared plans; not recorded.
  await saves({ name: "warm-up", samples: [], roundP50: [], byPhase: {} }, serveClient, 5);
  if (distClient) await saves({ name: "warm-up", samples: [], roundP50: [], byPhase: {} }, distClient, 5);
  await repeat(100, () => call(bareClient, "noop", { key: "x" }));
  await repeat(100, () => call(serveClient, "chaoscore_inspect", { what: "sessions" }));

  const calls = SESSIONS * PHASES.length;
  for (let r = 0; r < ROUNDS; r++) {
    const rounds: Array<[Series, number[]]> = [
      [series.bare!, await repeat(calls, () => call(bareClient, "noop", { key: "x" }))],
      [series.inspect!, await repeat(calls, () => call(serveClient, "chaoscore_inspect", { what: "sessions" }))],
      [series.standalone!, await saves(series.standalone!, serveClient, SESSIONS)],
      ...(distClient ? [[series.distributed!, await saves(series.distributed!, distClient, SESSIONS)] as [Series, number[]]] : []),
    ];
    for (const [s, round] of rounds) {
      s.samples.push(...round);
      s.roundP50.push(percentile([...round].sort((a, b) => a - b), 50));
    }
    process.stderr.write(`round ${r + 1}/${ROUNDS} done\n`);
  }
  await Promise.all([bareClient.close(), serveClient.close(), distClient?.close()]);

  const results = Object.values(series).map(summary);
  for (const r of results) console.log(JSON.stringify(r));
  console.log(`\ncouncil_save through the edge over Streamable HTTP, one client, ${ROUNDS} rounds × ${calls} calls per series`);
  console.log("| series | calls | p50 ms | p99 ms | p50 per round ms |");
  console.log("|---|---|---|---|---|");
  for (const r of results) console.log(`| ${r.series} | ${r.calls} | ${r.p50Ms} | ${r.p99Ms} | ${r.roundP50Ms.join(", ")} |`);
} finally {
  for (const p of procs.reverse()) await stopProcess(p);
  rmSync(dataDir, { recursive: true, force: true });
  await keys?.remove();
  await mrtrKeys?.remove();
  await database.drop();
}
process.exit(0);
