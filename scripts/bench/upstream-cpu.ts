/**
 * A governed upstream call against a direct one, in one run (issue 32, docs/federation.md §11):
 *  (d) direct: an SDK client (this process) calls server-everything's `echo` over stdio;
 *  (g) governed: the same call as the MCP tool `everything__echo` of `chaos-core serve` (embedded
 *      store), which runs it as one executor step — schema, policy, the ledger's decision and
 *      outcome entries — and calls its own server-everything over stdio;
 *  (s) the same governed call with the client on stdio too (`chaos-core stdio`, its own data
 *      directory), like for like with (d): the difference is governance, not the client's transport;
 *  (r) for reference, on the same server: `chaoscore_recall` of one key, a governed step of a
 *      built-in capability with no upstream (one `step.read` ledger entry), and
 *  (i) `chaoscore_inspect sessions`, which the edge answers alone (no step, no ledger entry), over
 *      HTTP and over stdio: the floor under any governed call through an MCP edge.
 * One client, calls one after another; rounds interleaved, medians of the rounds. Beside the
 * latency, the CPU time (user + system, from /proc) per call summed over every serving process —
 * for (g) `chaos-core serve` and its upstream, for (d) the upstream alone — never this process's,
 * which drives both alike. CPU, not calls/s: two shared cores cannot show throughput ratios.
 * Goals: p50 added ≤ 2 ms; CPU per call ≤ 2× the direct call's.
 *
 * Run: npm run bench:cpu   (builds first). Options (env): BENCH_CALLS (per kind per round, 500),
 * BENCH_ROUNDS (5). Linux only (reads /proc).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const root = new URL("../../", import.meta.url).pathname;
const CLI = join(root, "services/standalone/bin/chaos-core.js");
const EVERYTHING = join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

// The kernel's USER_HZ, 100 wherever Linux runs; /proc counts CPU time in these ticks.
const CLOCK_TICKS = 100;

/** User + system CPU time of a process in µs. */
function cpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
}

/** The process ids of `pid`'s children. */
function childrenOf(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).flatMap((task) =>
    readFileSync(`/proc/${pid}/task/${task}/children`, "utf8")
      .split(" ")
      .filter((p) => p.trim() !== "")
      .map(Number),
  );
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;

/** Runs `calls` echo calls one after another; p50 ms and CPU µs per call over `pids`. */
async function series(call: (i: number) => Promise<unknown>, pids: () => number[]): Promise<{ p50: number; cpuUsPerCall: number }> {
  const watched = pids();
  const before = watched.map(cpuUs);
  const latencies: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const started = performance.now();
    await call(i);
    latencies.push(performance.now() - started);
  }
  const spent = watched.reduce((sum, pid, i) => sum + cpuUs(pid) - before[i]!, 0);
  return { p50: percentile(latencies, 50), cpuUsPerCall: spent / CALLS };
}

async function startServe(dataDir: string): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, [CLI, "serve"], { env: { ...process.env, CHAOS_CORE_DATA_DIR: dataDir, PORT: "0", LOG_LEVEL: "warn" }, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout! }).on("line", (line) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(line);
      if (m) resolve({ url: m[1]!, proc });
    });
    proc.once("exit", (code) => reject(new Error(`chaos-core serve exited with ${code}`)));
  });
}

const dataDir = mkdtempSync(join(tmpdir(), "chaos-core-bench-upstream-"));
writeFileSync(join(dataDir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "everything", command: process.execPath, args: [EVERYTHING, "stdio"] }] }));
const locked = spawnSync(process.execPath, [CLI, "upstreams", "lock"], { env: { ...process.env, CHAOS_CORE_DATA_DIR: dataDir }, encoding: "utf8" });
if (locked.status !== 0) throw new Error(`chaos-core upstreams lock failed:\n${locked.stderr}`);
const serve = await startServe(dataDir);
// The stdio server gets a data directory of its own (on serve's, it would attach to serve).
const stdioDir = mkdtempSync(join(tmpdir(), "chaos-core-bench-upstream-stdio-"));
writeFileSync(join(stdioDir, "upstreams.json"), readFileSync(join(dataDir, "upstreams.json")));
writeFileSync(join(stdioDir, "upstreams.lock"), readFileSync(join(dataDir, "upstreams.lock")));

const direct = new Client({ name: "bench-direct", version: "0" });
const directTransport = new StdioClientTransport({ command: process.execPath, args: [EVERYTHING, "stdio"], stderr: "ignore" });
await direct.connect(directTransport);
const governed = new Client({ name: "bench-governed", version: "0" });
await governed.connect(new StreamableHTTPClientTransport(new URL(serve.url)));
const overStdio = new Client({ name: "bench-governed-stdio", version: "0" });
const stdioTransport = new StdioClientTransport({
  command: process.execPath,
  args: [CLI, "stdio"],
  env: { ...(process.env as Record<string, string>), CHAOS_CORE_DATA_DIR: stdioDir, LOG_LEVEL: "warn" },
  stderr: "ignore",
});
await overStdio.connect(stdioTransport);

const echo = (client: Client, name: string) => (i: number) => client.callTool({ name, arguments: { message: `bench ${i}` } });
// Warm both paths (and let serve start its upstream, whose pid is then a child of serve).
for (let i = 0; i < 50; i++) {
  await echo(direct, "echo")(i);
  await echo(governed, "everything__echo")(i);
  await echo(overStdio, "everything__echo")(i);
}
const upstreamOfServe = childrenOf(serve.proc.pid!);
const stdioPids = [stdioTransport.pid!, ...childrenOf(stdioTransport.pid!)];
type Row = { p50: number; cpuUsPerCall: number };
const rows = { direct: [] as Row[], governed: [] as Row[], stdio: [] as Row[], recall: [] as Row[], inspect: [] as Row[], inspectStdio: [] as Row[] };
const KINDS = ["direct", "governed", "stdio", "recall", "inspect", "inspectStdio"] as const;
const servePids = () => [serve.proc.pid!, ...upstreamOfServe];
const run = (kind: (typeof KINDS)[number]): Promise<Row> => {
  switch (kind) {
    case "direct":
      return series(echo(direct, "echo"), () => [directTransport.pid!]);
    case "governed":
      return series(echo(governed, "everything__echo"), servePids);
    case "stdio":
      return series(echo(overStdio, "everything__echo"), () => stdioPids);
    case "recall":
      return series(() => governed.callTool({ name: "chaoscore_recall", arguments: { key: "bench-key" } }), servePids);
    case "inspect":
      return series(() => governed.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } }), servePids);
    case "inspectStdio":
      return series(() => overStdio.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } }), () => stdioPids);
  }
};
for (let round = 0; round < ROUNDS; round++) {
  // Each round starts with another kind, so the machine's load falls on all of them alike.
  const order = KINDS.map((_, i) => KINDS[(i + round) % KINDS.length]!);
  for (const kind of order) rows[kind].push(await run(kind));
  process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
}
await direct.close();
await governed.close();
await overStdio.close();
serve.proc.kill("SIGTERM");
await new Promise((r) => serve.proc.once("exit", r));
rmSync(dataDir, { recursive: true, force: true });
rmSync(stdioDir, { recursive: true, force: true });

const summary = (kind: keyof typeof rows) => ({ p50: median(rows[kind].map((r) => r.p50)), cpu: median(rows[kind].map((r) => r.cpuUsPerCall)) });
const d = summary("direct");
const g = summary("governed");
const st = summary("stdio");
const r = summary("recall");
const i = summary("inspect");
const is = summary("inspectStdio");
console.log(`upstream call, one client, ${CALLS} calls × ${ROUNDS} interleaved rounds, medians of the rounds`);
console.log("| path | p50 ms | CPU µs per call (serving processes) |");
console.log("|---|---|---|");
console.log(`| direct: SDK client → server-everything (stdio) | ${d.p50.toFixed(2)} | ${d.cpu.toFixed(0)} (upstream) |`);
console.log(`| governed: client → chaos-core serve (HTTP) → executor → server-everything (stdio) | ${g.p50.toFixed(2)} | ${g.cpu.toFixed(0)} (serve + upstream) |`);
console.log(`| governed, like for like: client → chaos-core stdio → executor → server-everything (stdio) | ${st.p50.toFixed(2)} | ${st.cpu.toFixed(0)} (chaos-core + upstream) |`);
console.log(`| reference: chaoscore_recall on the same server (a governed built-in step) | ${r.p50.toFixed(2)} | ${r.cpu.toFixed(0)} (serve + upstream) |`);
console.log(`| reference: chaoscore_inspect sessions (the edge alone) | ${i.p50.toFixed(2)} | ${i.cpu.toFixed(0)} (serve + upstream) |`);
console.log(`| reference: chaoscore_inspect sessions over stdio (the edge alone, like for like with the direct call) | ${is.p50.toFixed(2)} | ${is.cpu.toFixed(0)} (chaos-core + upstream) |`);
console.log(`added p50: ${(g.p50 - d.p50).toFixed(2)} ms over HTTP, ${(st.p50 - d.p50).toFixed(2)} ms over stdio (goal ≤ 2 ms); CPU per call: ${(g.cpu / d.cpu).toFixed(2)}× over HTTP, ${(st.cpu / d.cpu).toFixed(2)}× over stdio, the direct call's (goal ≤ 2×)`);
