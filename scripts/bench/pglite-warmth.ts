/**
 * What one embedded-engine statement costs back to back, and what it costs when other work runs
 * between statements, as in a server (issue 14, BENCHMARKS.md "The embedded engine's statements
 * in a busy server"). PGlite is Postgres in WebAssembly on the caller's thread: its code and data
 * share the CPU's caches with everything else the thread does.
 *
 * Two statements, each timed alone (the work between them is not timed), in an embedded database
 * on a data directory made by the memory service's migrations:
 *  - the governed read's statement as the memory store runs it (`memory.recall_item`, named);
 *  - `SELECT $1, $2, $3` (named): one exchange with the engine and nothing to read — its floor.
 * Each under four conditions, interleaved over the rounds: back to back; after touching 4 MB and
 * 16 MB of other memory (what a thread serving HTTP, JSON and zod does between two statements);
 * after a 1 ms timer (the thread idle between calls, as at one client).
 *
 * Run: npx tsx scripts/bench/pglite-warmth.ts   (after `npm run build`)
 * Options (env): BENCH_STEPS (statements per condition per round, 2000), BENCH_ROUNDS (3).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPgliteDb } from "@chaos-core/kit";
import { MEMORY_PG_EXTENSIONS, migrateMemory } from "@chaos-core/memory";

const STEPS = Number(process.env.BENCH_STEPS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const statements = {
  recall: { sql: "SELECT * FROM memory.recall_item($1, $2, $3::timestamptz)", name: "bench_recall_item" },
  floor: { sql: "SELECT $1::text AS a, $2::text AS b, $3::timestamptz AS c", name: "bench_floor" },
} as const;

/** Other memory, written between statements: 8-byte steps over `mb` megabytes, one store per cache line. */
const scratch = new Float64Array((16 << 20) / 8);
function touch(mb: number): void {
  const end = (mb << 20) / 8;
  for (let i = 0; i < end; i += 8) scratch[i] = i;
}
const between = {
  "back to back": () => undefined,
  "after 4 MB of other work": () => touch(4),
  "after 16 MB of other work": () => touch(16),
  "after a 1 ms timer": () => new Promise<void>((r) => setTimeout(r, 1)),
} as const;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

const dir = mkdtempSync(join(tmpdir(), "chaos-core-bench-warmth-"));
const db = await createPgliteDb({ dataDir: join(dir, "pg"), extensions: [...MEMORY_PG_EXTENSIONS] });
try {
  await migrateMemory(db);
  await db.adminTx((q) =>
    q.query("INSERT INTO memory.items (tenant_id, key, value, tags, created_at, updated_at) VALUES ('bench', 'bench:key', '{\"hello\":\"world\"}', '{}', now(), now())"),
  );
  const params = ["bench", "bench:key", new Date().toISOString()];
  const results = new Map<string, number[]>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const [label, run] of Object.entries(between)) {
      for (const [kind, s] of Object.entries(statements)) {
        const samples: number[] = [];
        for (let i = 0; i < STEPS + 100; i++) {
          await run();
          const t0 = performance.now();
          const { rows } = await db.statement(s.sql, params, { name: s.name });
          const dt = performance.now() - t0;
          if (rows.length !== 1) throw new Error(`${kind}: expected one row, got ${rows.length}`);
          if (i >= 100) samples.push(dt);
        }
        const key = `${label}|${kind}`;
        results.set(key, [...(results.get(key) ?? []), median(samples)]);
      }
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
  }
  console.log(`| between statements | recall_item p50 µs (rounds) | floor p50 µs (rounds) |`);
  console.log(`|---|---|---|`);
  const us = (xs: number[]) => `**${(median(xs) * 1000).toFixed(0)}** (${xs.map((x) => (x * 1000).toFixed(0)).join(", ")})`;
  for (const label of Object.keys(between)) {
    console.log(`| ${label} | ${us(results.get(`${label}|recall`)!)} | ${us(results.get(`${label}|floor`)!)} |`);
  }
} finally {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
}
