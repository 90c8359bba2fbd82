/**
 * Audit-ledger append throughput on real Postgres, group commit against a baseline in the same
 * run, and the time to verify a 100,000-entry ledger with only the public key.
 *
 *  - appends/s at 1, 16 and 64 concurrent writers on one tenant, for (a) the ledger store as
 *    built (group commit: one transaction per flush, everything queued in it) and (b) the same
 *    store with `maxBatch: 1`, one transaction per append (the baseline), interleaved over
 *    several rounds on fresh tenants; medians reported. Every append is durable when it
 *    resolves (committed with synchronous_commit on) and signs a checkpoint per transaction.
 *  - verify: loads BENCH_VERIFY_ENTRIES entries (default 100,000) with 64 writers, then times
 *    `verifyStoredLedger` (read through the store + verify) and `verifyExport` (export JSONL
 *    text, then parse + verify), both with the verifier key only.
 *
 * Run: npx tsx scripts/bench/ledger-append.ts   (after `npx tsc -b services/ledger`)
 * Options (env): BENCH_ROUNDS (3), BENCH_APPENDS (appends per run at 64 writers, 4000; scaled
 * down for fewer writers), BENCH_VERIFY_ENTRIES (100000), TEST_DATABASE_URL (admin URL).
 * Creates and drops its own database.
 */
import { generateKeyPairSync } from "node:crypto";
import { pathToFileURL } from "node:url";
import { createPostgresDb } from "@chaos-core/kit";
import { createTestDatabase } from "../../test/support/postgres.js";
import { createLedgerStore, type LedgerStore } from "../../services/ledger/src/log/ledger-store.js";
import { migrateLedger } from "../../services/ledger/src/log/migrations.js";
import { verifyExport, verifyStoredLedger } from "../../services/ledger/src/log/verify.js";

/** One measured run. */
export interface AppendRun {
  mode: "group-commit" | "baseline";
  writers: number;
  appends: number;
  seconds: number;
  appendsPerSecond: number;
  transactions: number;
}

/** What {@link benchLedgerAppend} measured (medians over rounds). */
export interface LedgerAppendBenchResult {
  rounds: number;
  rows: Array<{
    writers: number;
    groupCommitPerSecond: number;
    baselinePerSecond: number;
    speedup: number;
    appendsPerTransaction: number;
  }>;
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

/** `writers` loops append until `total` appends are done; returns appends/s and transactions. */
async function drive(store: LedgerStore, tenant: string, writers: number, total: number): Promise<{ seconds: number; transactions: number }> {
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

/** Runs the benchmark on a fresh database and drops it at the end. */
export async function benchLedgerAppend(options: { rounds?: number; appends?: number; verifyEntries?: number; log?: (s: string) => void } = {}): Promise<LedgerAppendBenchResult> {
  const rounds = options.rounds ?? 3;
  const appends64 = options.appends ?? 4000;
  const verifyEntries = options.verifyEntries ?? 100_000;
  const log = options.log ?? (() => undefined);
  const database = await createTestDatabase("chaoscore_ledger_bench");
  // A pool as the service would run it; the baseline gets the same one.
  const db = createPostgresDb({ connectionString: database.url, max: 10 });
  try {
    await migrateLedger(db);
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const key = { privateKey, publicKey };
    const grouped = createLedgerStore(db, { key });
    const baseline = createLedgerStore(db, { key, maxBatch: 1 });

    const runs: AppendRun[] = [];
    let tenantNo = 0;
    // Warm the pool, the plans and the JIT on both paths before timing anything.
    await drive(grouped, `warm-${tenantNo}`, 16, 500);
    await drive(baseline, `warm-${++tenantNo}`, 16, 200);
    for (let r = 0; r < rounds; r++) {
      for (const writers of [1, 16, 64]) {
        // Fewer writers append fewer entries, so each run takes seconds, not minutes.
        const total = writers === 1 ? Math.max(100, Math.round(appends64 / 20)) : writers === 16 ? Math.round(appends64 / 2) : appends64;
        for (const [mode, store] of [
          ["group-commit", grouped],
          ["baseline", baseline],
        ] as const) {
          const tenant = `r${r}-${mode === "baseline" ? "b" : "g"}-${writers}-${++tenantNo}`;
          const { seconds, transactions } = await drive(store, tenant, writers, total);
          const run: AppendRun = { mode, writers, appends: total, seconds, appendsPerSecond: total / seconds, transactions };
          runs.push(run);
          log(JSON.stringify({ bench: "ledger-append", round: r + 1, ...run, appendsPerSecond: Math.round(run.appendsPerSecond) }));
        }
      }
    }
    const rows = [1, 16, 64].map((writers) => {
      const g = runs.filter((x) => x.writers === writers && x.mode === "group-commit");
      const b = runs.filter((x) => x.writers === writers && x.mode === "baseline");
      const gps = median(g.map((x) => x.appendsPerSecond));
      const bps = median(b.map((x) => x.appendsPerSecond));
      return {
        writers,
        groupCommitPerSecond: Math.round(gps),
        baselinePerSecond: Math.round(bps),
        speedup: round1(gps / bps),
        appendsPerTransaction: round1(median(g.map((x) => x.appends / x.transactions))),
      };
    });

    // Verify: a big ledger, loaded the fast way, then checked with only the verifier key.
    const tenant = "verify-bench";
    let start = performance.now();
    await drive(grouped, tenant, 64, verifyEntries);
    const loadSeconds = (performance.now() - start) / 1000;
    const vkey = grouped.verifierKey(tenant);
    start = performance.now();
    const live = await verifyStoredLedger(grouped, tenant, vkey);
    const storeSeconds = (performance.now() - start) / 1000;
    start = performance.now();
    let text = "";
    for await (const line of grouped.exportLedger(tenant)) text += line;
    const exportSeconds = (performance.now() - start) / 1000;
    start = performance.now();
    const fromFile = await verifyExport(text, vkey);
    const fileSeconds = (performance.now() - start) / 1000;
    const verify = {
      entries: live.entries,
      checkpoints: live.checkpoints,
      loadSeconds: round1(loadSeconds),
      storeSeconds: Math.round(storeSeconds * 100) / 100,
      exportSeconds: Math.round(exportSeconds * 100) / 100,
      fileSeconds: Math.round(fileSeconds * 100) / 100,
      ok: live.ok && fromFile.ok && live.root === fromFile.root,
    };
    log(JSON.stringify({ bench: "ledger-verify", ...verify }));
    return { rounds, rows, verify };
  } finally {
    await db.close();
    await database.drop();
  }
}

/** The result as a plain-text table. */
export function formatLedgerBench(r: LedgerAppendBenchResult): string {
  const lines = [
    `ledger append on Postgres, medians of ${r.rounds} rounds (durable: each append resolves after its commit)`,
    "writers | group commit (appends/s) | baseline, 1 tx/append (appends/s) | speedup | appends per tx",
    "------: | -----------------------: | --------------------------------: | ------: | -------------:",
    ...r.rows.map(
      (x) => `${String(x.writers).padStart(7)} | ${String(x.groupCommitPerSecond).padStart(24)} | ${String(x.baselinePerSecond).padStart(33)} | ${`${x.speedup}x`.padStart(7)} | ${String(x.appendsPerTransaction).padStart(14)}`,
    ),
    "",
    `verify ${r.verify.entries} entries / ${r.verify.checkpoints} signed checkpoints with the public key only: ` +
      `${r.verify.storeSeconds} s from the database (read + verify); export ${r.verify.exportSeconds} s, ` +
      `verify the JSONL ${r.verify.fileSeconds} s; ${r.verify.ok ? "verified" : "NOT VERIFIED"} (load took ${r.verify.loadSeconds} s)`,
  ];
  return lines.join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await benchLedgerAppend({
    ...(process.env.BENCH_ROUNDS ? { rounds: Number(process.env.BENCH_ROUNDS) } : {}),
    ...(process.env.BENCH_APPENDS ? { appends: Number(process.env.BENCH_APPENDS) } : {}),
    ...(process.env.BENCH_VERIFY_ENTRIES ? { verifyEntries: Number(process.env.BENCH_VERIFY_ENTRIES) } : {}),
    log: (s) => console.error(s),
  });
  console.log(formatLedgerBench(result));
  if (!result.verify.ok) process.exitCode = 1;
}
