/**
 * How long a host waits for a stdio server (issue 9, item 17): spawn the server on an existing
 * data directory, as Claude Desktop or Claude Code does on every start, and time from spawn to
 * the answer to `initialize`, to the first `tools/list`, and to the first tool call
 * (`chaoscore_recall` of a stored key), with a real SDK client. Series, interleaved run by run:
 *  (a) a bare MCP SDK stdio server with one no-op tool (scripts/bench/bare-stdio-server.js),
 *  (b) `chaos-core stdio` as it starts before issue 9: every store open before the transport
 *      answers (scripts/bench/eager-stdio.js, createRuntime then the transport),
 *  (c) `chaos-core stdio` (the launcher): the transport first, the stores in the background.
 * Besides wall time, the CPU time the server process had used when `initialize` was answered
 * (Linux /proc): on a shared, noisy machine it says more than the wall time about what a quiet
 * one would see.
 *
 * Run alone: npm run build && npx tsx scripts/bench/stdio-startup.ts   (BENCH_STARTUP_RUNS, default 7)
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ListToolsResultSchema } from "@modelcontextprotocol/sdk/types.js";

const root = new URL("../../", import.meta.url).pathname;

interface Series {
  name: string;
  script: string;
  tool: string;
  args: Record<string, unknown>;
}

const SERIES: Series[] = [
  { name: "(a) bare SDK stdio server", script: "scripts/bench/bare-stdio-server.js", tool: "noop", args: { key: "x" } },
  { name: "(b) chaos-core stdio, stores first (before)", script: "scripts/bench/eager-stdio.js", tool: "chaoscore_recall", args: { key: "bench:key" } },
  { name: "(c) chaos-core stdio, transport first", script: "services/standalone/bin/chaos-core.js", tool: "chaoscore_recall", args: { key: "bench:key" } },
];

/** Milliseconds from spawn to each first answer, and the server's CPU time at the first. */
export interface StartupTimes {
  initialize: number;
  initializeCpu: number;
  toolsList: number;
  toolCall: number;
}

/** User + system CPU time of a process so far (fields 14 and 15 of /proc/PID/stat, in 10 ms ticks). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function startOnce(series: Series, dataDir: string): Promise<StartupTimes> {
  const args = series.script.endsWith("chaos-core.js") ? [series.script, "stdio"] : [series.script];
  const transport = new StdioClientTransport({
    command: process.execPath,
    args,
    cwd: root,
    env: { ...(process.env as Record<string, string>), CHAOS_CORE_DATA_DIR: dataDir, LOG_LEVEL: "warn" },
    stderr: "inherit",
  });
  const client = new Client({ name: "bench-startup", version: "0.0.0" });
  const t0 = performance.now();
  await client.connect(transport);
  const initialize = performance.now() - t0;
  const initializeCpu = cpuMs(transport.pid!);
  // The request itself, not client.listTools(): that also compiles every output schema in the
  // client, which costs the same whichever server answered.
  await client.request({ method: "tools/list" }, ListToolsResultSchema);
  const toolsList = performance.now() - t0;
  const res = await client.callTool({ name: series.tool, arguments: series.args });
  const toolCall = performance.now() - t0;
  if (res.isError) throw new Error(`${series.name}: ${JSON.stringify(res.content)}`);
  // Closing stdin stops the server; it releases the data directory before the next run starts.
  const exited = new Promise<void>((resolve) => (transport.onclose = () => resolve()));
  await client.close();
  await exited;
  return { initialize, initializeCpu, toolsList, toolCall };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
}

/** Median times per series over `runs` interleaved runs, after one unmeasured warm-up of each. */
export async function benchStdioStartup(options: { runs?: number } = {}): Promise<Array<{ series: string } & StartupTimes>> {
  const runs = options.runs ?? 7;
  const dataDir = mkdtempSync(join(tmpdir(), "chaos-core-bench-startup-"));
  try {
    // First run creates the database; then there is a key to recall.
    const seed = new Client({ name: "bench-seed", version: "0.0.0" });
    await seed.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ["services/standalone/bin/chaos-core.js", "stdio"],
        cwd: root,
        env: { ...(process.env as Record<string, string>), CHAOS_CORE_DATA_DIR: dataDir, LOG_LEVEL: "warn" },
      }),
    );
    await seed.callTool({ name: "chaoscore_remember", arguments: { key: "bench:key", value: { hello: "world" } } });
    await seed.close();

    for (const s of SERIES) await startOnce(s, dataDir);
    const results: StartupTimes[][] = SERIES.map(() => []);
    for (let run = 0; run < runs; run++) {
      for (const [i, s] of SERIES.entries()) results[i]!.push(await startOnce(s, dataDir));
      process.stderr.write(`stdio start-up run ${run + 1}/${runs} done\n`);
    }
    return SERIES.map((s, i) => ({
      series: s.name,
      initialize: median(results[i]!.map((r) => r.initialize)),
      initializeCpu: median(results[i]!.map((r) => r.initializeCpu)),
      toolsList: median(results[i]!.map((r) => r.toolsList)),
      toolCall: median(results[i]!.map((r) => r.toolCall)),
    }));
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function ratioRow(label: string, x: StartupTimes, y: StartupTimes): string {
  const r = (k: keyof StartupTimes) => (x[k] / y[k]).toFixed(2);
  return `| ${label} | ${r("initialize")} | ${r("initializeCpu")} | ${r("toolsList")} | ${r("toolCall")} |`;
}

/** The table BENCHMARKS.md carries: medians, and each chaos-core series against the others. */
export function startupTable(rows: Array<{ series: string } & StartupTimes>, runs: number): string {
  const [bare, eager, deferred] = rows as unknown as [StartupTimes, StartupTimes, StartupTimes];
  const ms = (x: number) => x.toFixed(0);
  const lines = [
    `stdio start-up on an existing data directory, ms from spawn, medians of ${runs} interleaved runs`,
    "| series | initialize answered | server CPU ms by then | first tools/list answered | first tool call answered |",
    "|---|---:|---:|---:|---:|",
    ...rows.map((r) => `| ${r.series} | ${ms(r.initialize)} | ${ms(r.initializeCpu)} | ${ms(r.toolsList)} | ${ms(r.toolCall)} |`),
    ratioRow("ratio (b)/(c), before/after", eager, deferred),
    ratioRow("ratio (c)/(a), against the bare SDK", deferred, bare),
  ];
  return lines.join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const runs = Number(process.env.BENCH_STARTUP_RUNS ?? 7);
  console.log(startupTable(await benchStdioStartup({ runs }), runs));
}
