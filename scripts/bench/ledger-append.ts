/**
 * Audit-ledger append throughput on real Postgres against a baseline in the same run, the time
 * until an acknowledged entry is provable, and the time to verify a 100,000-entry ledger with
 * only the public key.
 *
 *  - appends/s at 1, 16 and 64 concurrent writers on one tenant, for (a) the ledger store as
 *    built (sequence, then integrate: the append commits its entry and chain link, the
 *    integrator signs checkpoints in batches) and (b) the baseline: the store of git revision
 *    BENCH_LEDGER_BASELINE (default 7d6ac1c, the last per-commit version: every group-commit
 *    transaction also wrote the Merkle nodes and signed a checkpoint), extracted with
 *    `git archive` into .cache/ and run on its own database on the same server. Interleaved
 *    over several rounds on fresh tenants; medians reported. Every append is durable when it
 *    resolves (committed with synchronous_commit on). BENCH_LEDGER_BASELINE=none: group commit
 *    with `maxBatch: 1` (one transaction per append) instead.
 *  - proof availability, during each 64-writer run of (a): one extra append every 20 ms, then
 *    (i) a reader without the integrator polls every 2 ms until a signed checkpoint covers it
 *    (the background integrator's latency), and (ii) a second such append asks the store for
 *    its inclusion proof at once (the on-demand path: integrate, then prove).
 *  - verify: loads BENCH_VERIFY_ENTRIES entries (default 100,000) with 64 writers, then times
 *    `verifyStoredLedger` (read through the store + verify) and `verifyExport` (export JSONL
 *    text, then parse + verify), both with the verifier key only.
 *
 * Run: npx tsx scripts/bench/ledger-append.ts   (after `npm run build`), or
 *      BENCH_ONLY=ledger npm run bench
 * Options (env): BENCH_ROUNDS (3), BENCH_APPENDS (appends per run at 64 writers, 8000; scaled
 * down for fewer writers), BENCH_VERIFY_ENTRIES (100000), BENCH_LEDGER_BASELINE (a git
 * revision, or none), TEST_DATABASE_URL (admin URL). Creates and drops its own databases.
 */
import { execFileSync } from "node:child_process";
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { createPostgresDb, type Db } from "@chaos-core/kit";
import { createTestDatabase } from "../../test/support/postgres.js";
import type * as currentStore from "../../services/ledger/src/log/ledger-store.js";
import { createLedgerReader } from "../../services/ledger/src/log/ledger-reader.js";
import { createLedgerStore, type LedgerStore } from "../../services/ledger/src/log/ledger-store.js";
import type * as currentMigrations from "../../services/ledger/src/log/migrations.js";
import { migrateLedger } from "../../services/ledger/src/log/migrations.js";
import { verifyExport, verifyStoredLedger } from "../../services/ledger/src/log/verify.js";

/** What the bench needs of a store, the current one or a baseline revision's. */
type BenchStore = Pick<LedgerStore, "append" | "stats">;

interface BaselineModule {
  createStore(db: Db, key: { privateKey: KeyObject; publicKey: KeyObject }): BenchStore;
  migrate(db: Db): Promise<unknown>;
}

const root = new URL("../../", import.meta.url).pathname;

/** The ledger log modules of `rev`, extracted under .cache/ (ignored by git) and imported. */
async function loadBaseline(rev: string): Promise<BaselineModule> {
  const sha = execFileSync("git", ["rev-parse", "--short=12", rev], { cwd: root, encoding: "utf8" }).trim();
  const dir = join(root, ".cache", `ledger-baseline-${sha}`);
  if (!existsSync(join(dir, "services/ledger/src/log/ledger-store.ts"))) {
    mkdirSync(dir, { recursive: true });
    const tar = execFileSync("git", ["archive", sha, "services/ledger/src/log"], { cwd: root, maxBuffer: 64 << 20 });
    execFileSync("tar", ["-x", "-C", dir], { input: tar });
  }
  // Typed as today's modules: the baseline is only asked for createLedgerStore and migrateLedger.
  const store = (await import(pathToFileURL(join(dir, "services/ledger/src/log/ledger-store.ts")).href)) as typeof currentStore;
  const migrations = (await import(pathToFileURL(join(dir, "services/ledger/src/log/migrations.ts")).href)) as typeof currentMigrations;
  return { createStore: (db, key) => store.createLedgerStore(db, { key }), migrate: (db) => migrations.migrateLedger(db) };
}

/** One measured run. */
export interface AppendRun {
  mode: "current" | "baseline";
  writers: number;
  appends: number;
  seconds: number;
  appendsPerSecond: number;
  transactions: number;
}

/** What {@link benchLedgerAppend} measured (medians over rounds). */
export interface LedgerAppendBenchResult {
  rounds: number;
  /** What the baseline was: a git revision's store, or one transaction per append. */
  baseline: string;
  rows: Array<{
    writers: number;
    currentPerSecond: number;
    baselinePerSecond: number;
    speedup: number;
    appendsPerTransaction: number;
  }>;
  /** Milliseconds from an append's acknowledgement until it is provable (all 64-writer runs). */
  proofs: { samples: number; integratedP50: number; integratedP99: number; integratedMax: number; onDemandP50: number; onDemandP99: number; onDemandMax: number };
  verify: {
    entries: number;
    checkpoints: number;
    loadSeconds: number;
    storeSeconds: number;
    exportSeconds: number;
    fileSeconds: number;
    ok: boolean;
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
}

const round1 = (n: number): number => Math.round(n * 10) / 10;

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;

/** `writers` loops append until `total` appends are done; returns appends/s and transactions. */
async function drive(store: BenchStore, tenant: string, writers: number, total: number): Promise<{ seconds: number; transactions: number }> {
  const before = store.stats().batches;
  let issued = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      while (issued < total) {
        const i = issued++;
        await store.append(tenant, {
          session: `session-${w}`,
          principal: `agent-${w}@example.com`,
          event: { kind: "tool.executed", tool: "memory.remember", decision: "ALLOW", step: i, writer: w },
        });
      }
    }),
  );
  return { seconds: (performance.now() - start) / 1000, transactions: store.stats().batches - before };
}

/**
 * While `load` runs, appends one sample entry every 20 ms and measures how long after its
 * acknowledgement (i) a signed checkpoint covers it, seen by a reader without an integrator,
 * and (ii) the store answers its inclusion proof when asked at once.
 */
async function sampleProofs(store: LedgerStore, reader: ReturnType<typeof createLedgerReader>, tenant: string, load: Promise<unknown>) {
  const integrated: number[] = [];
  const onDemand: number[] = [];
  let done = false;
  void load.finally(() => (done = true));
  while (!done) {
    const a = await store.append(tenant, { session: "probe", principal: "probe@example.com", event: { kind: "probe" } });
    const acked = performance.now();
    for (;;) {
      const cp = await reader.latestCheckpoint(tenant);
      if (cp && cp.size >= a.seq) break;
      await new Promise((r) => setTimeout(r, 2));
    }
    integrated.push(performance.now() - acked);
    const b = await store.append(tenant, { session: "probe", principal: "probe@example.com", event: { kind: "probe-proof" } });
    const asked = performance.now();
    await store.inclusionProof(tenant, { seq: b.seq });
    onDemand.push(performance.now() - asked);
    await new Promise((r) => setTimeout(r, 20));
  }
  await load;
  return { integrated, onDemand };
}

/** Runs the benchmark on fresh databases and drops them at the end. */
export async function benchLedgerAppend(
  options: { rounds?: number; appends?: number; verifyEntries?: number; baseline?: string; log?: (s: string) => void } = {},
): Promise<LedgerAppendBenchResult> {
  const rounds = options.rounds ?? 3;
  const appends64 = options.appends ?? 8000;
  const verifyEntries = options.verifyEntries ?? 100_000;
  const baselineRev = options.baseline ?? "7d6ac1c";
  const log = options.log ?? (() => undefined);
  const database = await createTestDatabase("chaoscore_ledger_bench");
  const baselineDatabase = await createTestDatabase("chaoscore_ledger_bench_base");
  // A pool as the service would run it; the baseline gets the same size.
  const db = createPostgresDb({ connectionString: database.url, max: 10 });
  const baseDb = createPostgresDb({ connectionString: baselineDatabase.url, max: 10 });
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const key = { privateKey, publicKey };
  let current: LedgerStore | undefined;
  try {
    await migrateLedger(db);
    current = createLedgerStore(db, { key });
    const reader = createLedgerReader(db);
    let baseline: BenchStore;
    let baselineName: string;
    if (baselineRev === "none") {
      await migrateLedger(baseDb);
      baseline = createLedgerStore(baseDb, { key, maxBatch: 1 });
      baselineName = "this build with maxBatch 1 (one transaction per append)";
    } else {
      const mod = await loadBaseline(baselineRev);
      await mod.migrate(baseDb);
      baseline = mod.createStore(baseDb, key);
      baselineName = `the store at ${baselineRev} (per-commit Merkle nodes and signed checkpoint)`;
    }

    const runs: AppendRun[] = [];
    const integratedMs: number[] = [];
    const onDemandMs: number[] = [];
    let tenantNo = 0;
    // Warm the pools, the plans and the JIT on both paths before timing anything.
    await drive(current, `warm-${tenantNo}`, 64, 2000);
    await drive(baseline, `warm-${++tenantNo}`, 64, 2000);
    for (let r = 0; r < rounds; r++) {
      for (const writers of [1, 16, 64]) {
        // Fewer writers append fewer entries, so each run takes seconds, not minutes.
        const total = writers === 1 ? Math.max(100, Math.round(appends64 / 40)) : writers === 16 ? Math.round(appends64 / 2) : appends64;
        for (const [mode, store] of [
          ["current", current],
          ["baseline", baseline],
        ] as const) {
          const tenant = `r${r}-${mode === "baseline" ? "b" : "c"}-${writers}-${++tenantNo}`;
          const { seconds, transactions } = await drive(store, tenant, writers, total);
          const run: AppendRun = { mode, writers, appends: total, seconds, appendsPerSecond: total / seconds, transactions };
          runs.push(run);
          log(JSON.stringify({ bench: "ledger-append", round: r + 1, ...run, appendsPerSecond: Math.round(run.appendsPerSecond) }));
        }
      }
      // Proof availability under the 64-writer load, untimed for throughput.
      const tenant = `r${r}-proofs-${++tenantNo}`;
      const sampled = await sampleProofs(current, reader, tenant, drive(current, tenant, 64, appends64));
      integratedMs.push(...sampled.integrated);
      onDemandMs.push(...sampled.onDemand);
      log(JSON.stringify({ bench: "ledger-proofs", round: r + 1, samples: sampled.integrated.length, integratedP50: round2(percentile(sampled.integrated, 50)), onDemandP50: round2(percentile(sampled.onDemand, 50)) }));
    }
    const rows = [1, 16, 64].map((writers) => {
      const c = runs.filter((x) => x.writers === writers && x.mode === "current");
      const b = runs.filter((x) => x.writers === writers && x.mode === "baseline");
      const cps = median(c.map((x) => x.appendsPerSecond));
      const bps = median(b.map((x) => x.appendsPerSecond));
      return {
        writers,
        currentPerSecond: Math.round(cps),
        baselinePerSecond: Math.round(bps),
        speedup: round1(cps / bps),
        appendsPerTransaction: round1(median(c.map((x) => x.appends / x.transactions))),
      };
    });
    const proofs = {
      samples: integratedMs.length,
      integratedP50: round2(percentile(integratedMs, 50)),
      integratedP99: round2(percentile(integratedMs, 99)),
      integratedMax: round2(Math.max(...integratedMs)),
      onDemandP50: round2(percentile(onDemandMs, 50)),
      onDemandP99: round2(percentile(onDemandMs, 99)),
      onDemandMax: round2(Math.max(...onDemandMs)),
    };

    // Verify: a big ledger, loaded the fast way, then checked with only the verifier key.
    const tenant = "verify-bench";
    let start = performance.now();
    await drive(current, tenant, 64, verifyEntries);
    const loadSeconds = (performance.now() - start) / 1000;
    const vkey = current.verifierKey(tenant);
    start = performance.now();
    const live = await verifyStoredLedger(current, tenant, vkey);
    const storeSeconds = (performance.now() - start) / 1000;
    start = performance.now();
    let text = "";
    for await (const line of current.exportLedger(tenant)) text += line;
    const exportSeconds = (performance.now() - start) / 1000;
    start = performance.now();
    const fromFile = await verifyExport(text, vkey);
    const fileSeconds = (performance.now() - start) / 1000;
    const verify = {
      entries: live.entries,
      checkpoints: live.checkpoints,
      loadSeconds: round1(loadSeconds),
      storeSeconds: round2(storeSeconds),
      exportSeconds: round2(exportSeconds),
      fileSeconds: round2(fileSeconds),
      ok: live.ok && fromFile.ok && live.root === fromFile.root,
    };
    log(JSON.stringify({ bench: "ledger-verify", ...verify }));
    return { rounds, baseline: baselineName, rows, proofs, verify };
  } finally {
    await current?.close().catch(() => undefined);
    await db.close();
    await baseDb.close();
    await database.drop();
    await baselineDatabase.drop();
  }
}

/** The result as a plain-text table. */
export function formatLedgerBench(r: LedgerAppendBenchResult): string {
  const lines = [
    `ledger append on Postgres, medians of ${r.rounds} rounds (durable: each append resolves after its commit); baseline: ${r.baseline}`,
    "| writers | this build (sequence, then integrate), appends/s | baseline, appends/s | ratio | appends per tx |",
    "|---:|---:|---:|---:|---:|",
    ...r.rows.map((x) => `| ${x.writers} | ${x.currentPerSecond} | ${x.baselinePerSecond} | ${x.speedup}x | ${x.appendsPerTransaction} |`),
    "",
    `provable after acknowledgement, under 64 writers (${r.proofs.samples} samples): covered by a signed checkpoint from the background integrator ` +
      `p50 ${r.proofs.integratedP50} / p99 ${r.proofs.integratedP99} / max ${r.proofs.integratedMax} ms; inclusion proof asked at once ` +
      `p50 ${r.proofs.onDemandP50} / p99 ${r.proofs.onDemandP99} / max ${r.proofs.onDemandMax} ms`,
    "",
    `verify ${r.verify.entries} entries / ${r.verify.checkpoints} signed checkpoints with the public key only: ` +
      `${r.verify.storeSeconds} s from the database (read + verify); export ${r.verify.exportSeconds} s, ` +
      `verify the JSONL ${r.verify.fileSeconds} s; ${r.verify.ok ? "verified" : "NOT VERIFIED"} (load took ${r.verify.loadSeconds} s)`,
  ];
  return lines.join("\n");
}

/** The options of {@link benchLedgerAppend} from the environment. */
export function ledgerBenchOptionsFromEnv(env: NodeJS.ProcessEnv): Parameters<typeof benchLedgerAppend>[0] {
  return {
    ...(env.BENCH_ROUNDS ? { rounds: Number(env.BENCH_ROUNDS) } : {}),
    ...(env.BENCH_APPENDS ? { appends: Number(env.BENCH_APPENDS) } : {}),
    ...(env.BENCH_VERIFY_ENTRIES ? { verifyEntries: Number(env.BENCH_VERIFY_ENTRIES) } : {}),
    ...(env.BENCH_LEDGER_BASELINE ? { baseline: env.BENCH_LEDGER_BASELINE } : {}),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await benchLedgerAppend({ ...ledgerBenchOptionsFromEnv(process.env), log: (s) => console.error(s) });
  console.log(formatLedgerBench(result));
  if (!result.verify.ok) process.exitCode = 1;
  process.exit();
}
