/**
 * A/B of the governed call: `chaos-core serve` of this checkout (B) against the one of another
 * built checkout (A, `BENCH_AB_BASE`), with the bare SDK v2 no-op (`bare-server-v2.ts`) beside
 * them, all in one run: every round drives each series against the bare server, A and B in turn
 * (which goes first alternates by round), so the machine's load falls on all three alike. Medians of the rounds; ratios to the bare no-op
 * and B ÷ A.
 *
 *   git worktree add /tmp/base <commit> && (cd /tmp/base && npm ci && npm run build)
 *   BENCH_AB_BASE=/tmp/base npm run bench:ab
 *
 * The store is the embedded default, or Postgres + Redis with BENCH_AB_POSTGRES=1 (each server
 * gets a fresh database; both use this machine's Redis, as `chaos-core serve` does, under its
 * fixed prefix). Options: BENCH_SECONDS (5), BENCH_ROUNDS (3), BENCH_AB_SERIES (comma list of
 * recall, inspect, remember; default all), BENCH_AB_CLIENTS (comma list; default 1,16),
 * BENCH_SERVER_CPUS / BENCH_DRIVER_CPUS (scripts/bench/cpus.ts).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/postgres.js";
import { TEST_REDIS_URL } from "../../test/support/redis.js";
import { cpuPlacement, onServerCpus, pinDriver } from "./cpus.js";
import { runLoad, type LoadResult } from "./mcp-load.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const root = new URL("../../", import.meta.url).pathname;
const base = process.env.BENCH_AB_BASE ? resolve(process.env.BENCH_AB_BASE) : undefined;
if (!base || !existsSync(join(base, "services/standalone/dist/cli.js"))) {
  console.error("BENCH_AB_BASE must name a built checkout of the baseline (services/standalone/dist/cli.js missing)");
  process.exit(2);
}
const postgres = process.env.BENCH_AB_POSTGRES === "1";

const ALL_SERIES = {
  recall: { tool: "chaoscore_recall", args: { key: "bench:key" }, name: "`chaoscore_recall` (governed read)" },
  inspect: { tool: "chaoscore_inspect", args: { what: "sessions" }, name: "`chaoscore_inspect sessions` (edge only)" },
  remember: { tool: "chaoscore_remember", args: { key: "bench:written", value: { n: 1 } }, name: "`chaoscore_remember` (governed write)" },
} as const;
const seriesNames = (process.env.BENCH_AB_SERIES ?? "recall,inspect,remember").split(",").map((s) => s.trim()) as (keyof typeof ALL_SERIES)[];
for (const s of seriesNames) if (!(s in ALL_SERIES)) throw new Error(`BENCH_AB_SERIES: unknown series "${s}"`);
const clientCounts = (process.env.BENCH_AB_CLIENTS ?? "1,16").split(",").map(Number);

function startServer(cwd: string, nodeArgs: string[], env: NodeJS.ProcessEnv): Promise<{ url: string; proc: ChildProcess }> {
  const [cmd, args] = onServerCpus(process.execPath, nodeArgs);
  const proc = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolveUrl, reject) => {
    createInterface({ input: proc.stdout! }).on("line", (line) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(line);
      if (m) resolveUrl({ url: m[1]!, proc });
    });
    proc.once("exit", (code) => reject(new Error(`${args.join(" ")} in ${cwd} exited with ${code} before listening`)));
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const summary = (rs: LoadResult[]) => ({ p50: median(rs.map((r) => r.p50)), throughput: median(rs.map((r) => r.throughput)) });

const dirs: string[] = [];
const databases: TestDatabase[] = [];
async function chaosServe(checkout: string): Promise<{ url: string; proc: ChildProcess }> {
  const dataDir = mkdtempSync(join(tmpdir(), "chaos-core-ab-"));
  dirs.push(dataDir);
  const env: NodeJS.ProcessEnv = { PORT: "0", CHAOS_CORE_DATA_DIR: dataDir, LOG_LEVEL: "warn" };
  if (postgres) {
    const db = await createTestDatabase("chaoscore_bench_ab");
    databases.push(db);
    Object.assign(env, { DATABASE_URL: db.url, REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_MIGRATE: "auto" });
  }
  const server = await startServer(checkout, ["services/standalone/bin/chaos-core.js", "serve"], env);
  const seed = new Client({ name: "bench-seed", version: "0.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(server.url));
  await seed.connect(transport);
  await seed.callTool({ name: "chaoscore_remember", arguments: { key: "bench:key", value: { hello: "world" } } });
  await transport.terminateSession();
  await seed.close();
  return server;
}

pinDriver();
const bare = await startServer(root, ["--import", "tsx", "scripts/bench/bare-server-v2.ts"], {});
const servers = { A: await chaosServe(base), B: await chaosServe(root) };
try {
  const rows: string[] = [];
  for (const concurrency of clientCounts) {
    const bareRuns: LoadResult[] = [];
    const runs = new Map<string, LoadResult[]>();
    for (let round = 0; round < ROUNDS; round++) {
      bareRuns.push(await runLoad({ url: bare.url, tool: "noop", args: { key: "x" }, concurrency, seconds: SECONDS }));
      for (const s of seriesNames) {
        // Which side goes first alternates by round: the one after the other ran on a machine
        // (and, on Postgres, a database server) the first had just warmed or loaded — an order
        // bias of up to 5 % seen with A always first.
        for (const side of round % 2 === 0 ? (["A", "B"] as const) : (["B", "A"] as const)) {
          const k = `${s}:${side}`;
          if (!runs.has(k)) runs.set(k, []);
          runs.get(k)!.push(await runLoad({ url: servers[side].url, ...ALL_SERIES[s], concurrency, seconds: SECONDS }));
        }
      }
      process.stderr.write(`round ${round + 1}/${ROUNDS} at ${concurrency} client(s) done\n`);
    }
    const b = summary(bareRuns);
    rows.push(`| ${concurrency} | bare no-op | ${b.p50.toFixed(2)} / ${b.throughput.toFixed(0)} | | | |`);
    for (const s of seriesNames) {
      const a = summary(runs.get(`${s}:A`)!);
      const x = summary(runs.get(`${s}:B`)!);
      rows.push(
        `| ${concurrency} | ${ALL_SERIES[s].name} | ${a.p50.toFixed(2)} / ${a.throughput.toFixed(0)} | ${x.p50.toFixed(2)} / ${x.throughput.toFixed(0)} | ` +
          `${(a.throughput / b.throughput).toFixed(2)} → ${(x.throughput / b.throughput).toFixed(2)} | ${(x.throughput / a.throughput).toFixed(2)} |`,
      );
    }
  }
  console.log(`A/B on ${postgres ? "Postgres + Redis" : "the embedded store"}: A = ${base}, B = ${root}; medians of ${ROUNDS} interleaved rounds of ${SECONDS} s; ${cpuPlacement()}`);
  console.log("| clients | series | A p50 ms / calls/s | B p50 ms / calls/s | calls/s ÷ bare, A → B | B ÷ A calls/s |");
  console.log("|---|---|---|---|---|---|");
  for (const r of rows) console.log(r);
} finally {
  for (const p of [bare.proc, servers.A.proc, servers.B.proc]) p.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 1000));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const db of databases) await db.drop().catch(() => undefined);
}
