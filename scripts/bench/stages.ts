/**
 * Where a governed call's time goes, by stage: `chaos-core serve` with tracing on, exporting to a
 * local OTLP receiver (test/support/otlp-receiver.ts), one client calling `chaoscore_recall` (a
 * governed read) and `chaoscore_remember` (a governed write) one after the other; for each span
 * name, the median over the calls of its total time within one call (a name a call has twice —
 * two Postgres statements, say — is summed within that call). Tracing costs time of its own, so
 * the totals sit above the untraced benchmark's; the shares are what this is for.
 *
 * Run: npm run bench:stages   (options: BENCH_STAGES_CALLS (200 per tool), BENCH_STAGES_POSTGRES=1
 * for Postgres + Redis instead of the embedded store, BENCH_STAGES_TOP (25 rows per tool))
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startOtlpReceiver, type ReceivedSpan } from "../../test/support/otlp-receiver.js";
import { createTestDatabase, type TestDatabase } from "../../test/support/postgres.js";
import { TEST_REDIS_URL } from "../../test/support/redis.js";

const CALLS = Number(process.env.BENCH_STAGES_CALLS ?? 200);
const TOP = Number(process.env.BENCH_STAGES_TOP ?? 25);
const postgres = process.env.BENCH_STAGES_POSTGRES === "1";
const root = new URL("../../", import.meta.url).pathname;

const receiver = await startOtlpReceiver();
const dataDir = mkdtempSync(join(tmpdir(), "chaos-core-stages-"));
let database: TestDatabase | undefined;
const env: NodeJS.ProcessEnv = {
  ...process.env,
  PORT: "0",
  CHAOS_CORE_DATA_DIR: dataDir,
  LOG_LEVEL: "warn",
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
  OTEL_SERVICE_NAME: "chaos-core-bench",
  OTEL_BSP_SCHEDULE_DELAY: "200",
  OTEL_BSP_MAX_QUEUE_SIZE: "100000",
  OTEL_METRICS_EXPORTER: "none",
  OTEL_LOGS_EXPORTER: "none",
};
if (postgres) {
  database = await createTestDatabase("chaoscore_bench_stages");
  Object.assign(env, { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_MIGRATE: "auto" });
}
const proc = spawn(process.execPath, ["services/standalone/bin/chaos-core.js", "serve"], { cwd: root, env, stdio: ["ignore", "pipe", "inherit"] });
const url = await new Promise<string>((resolve, reject) => {
  createInterface({ input: proc.stdout! }).on("line", (line) => {
    const m = /(http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(line);
    if (m) resolve(m[1]!);
  });
  proc.once("exit", (code) => reject(new Error(`chaos-core serve exited with ${code}`)));
});

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

try {
  const client = new Client({ name: "bench-stages", version: "0.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  await client.callTool({ name: "chaoscore_remember", arguments: { key: "bench:key", value: { hello: "world" } } });
  const tools = [
    { tool: "chaoscore_recall", args: { key: "bench:key" } },
    { tool: "chaoscore_remember", args: { key: "bench:written", value: { n: 1 } } },
  ];
  // Warm-up, not counted: the first calls compile, connect and fill caches.
  for (const t of tools) for (let i = 0; i < 30; i++) await client.callTool({ name: t.tool, arguments: t.args });
  const warm = receiver.spans.length;
  for (const t of tools) for (let i = 0; i < CALLS; i++) await client.callTool({ name: t.tool, arguments: t.args });
  await transport.terminateSession();
  await client.close();
  // Until the exporter has sent everything: the span count holds still for a second.
  for (let last = -1; receiver.spans.length !== last; ) {
    last = receiver.spans.length;
    await new Promise((r) => setTimeout(r, 1000));
  }

  const byTrace = new Map<string, ReceivedSpan[]>();
  for (const s of receiver.spans.slice(warm)) (byTrace.get(s.traceId) ?? byTrace.set(s.traceId, []).get(s.traceId)!).push(s);
  console.log(`Where a governed call's time goes, ${postgres ? "Postgres + Redis" : "embedded (PGlite)"}, one client, ${CALLS} calls per tool, traced`);
  for (const { tool } of tools) {
    const traces = [...byTrace.values()].filter((t) => t.some((s) => s.name === `tools/call ${tool}`));
    const perName = new Map<string, number[]>();
    for (const t of traces) {
      const sums = new Map<string, number>();
      for (const s of t) {
        // Statements and commands by their kind, not their text: one row for Postgres, one for Redis.
        const name = s.name.startsWith("pg.query:") ? `pg.query:${s.name.split(" ")[0]!.slice(9)}` : s.name;
        sums.set(name, (sums.get(name) ?? 0) + (s.endMs - s.startMs));
      }
      for (const [name, ms] of sums) (perName.get(name) ?? perName.set(name, []).get(name)!).push(ms);
    }
    const total = median(perName.get(`tools/call ${tool}`) ?? [NaN]);
    console.log(`\n${tool}: ${traces.length} traced calls, the request span's median ${total.toFixed(2)} ms`);
    console.log("| span (summed within a call) | in calls | median ms | of the request |");
    console.log("|---|---|---|---|");
    const rows = [...perName].map(([name, xs]) => ({ name, n: xs.length, ms: median(xs) })).sort((a, b) => b.ms - a.ms);
    for (const r of rows.slice(0, TOP)) console.log(`| ${r.name} | ${r.n} | ${r.ms.toFixed(3)} | ${((100 * r.ms) / total).toFixed(0)} % |`);
  }
} finally {
  proc.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 1000));
  await receiver.close();
  rmSync(dataDir, { recursive: true, force: true });
  await database?.drop().catch(() => undefined);
}
