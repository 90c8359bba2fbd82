/**
 * Memory substring search at scale: loads 100,000 items for one tenant into a fresh Postgres
 * database, then times searches through the SQL memory store — rare and common substrings,
 * each with and without a tag filter — and checks with EXPLAIN that a rare substring is served
 * by the trigram index (auto_explain captures the plan of the statement inside the search
 * function, as the store runs it). Drops the database at the end.
 *
 * Baseline in the same run: migration 0001's search function, exactly as it was written (the
 * whole pattern given to the trigram index), installed beside the current one as
 * `memory.search_items_0001` and timed on the same searches, interleaved with the store's.
 *
 * Run: npx tsx scripts/bench/memory-search.ts   (after `npx tsc -b services/memory`)
 * Options (env): BENCH_ITEMS (100000), BENCH_SEARCHES (total, 400), TEST_DATABASE_URL (admin URL),
 * BENCH_DEBUG=1 (log each search slower than 10 ms on stderr).
 * Prints one JSON line per kind of search and a one-line summary on stdout.
 */
import { pathToFileURL } from "node:url";
import { APP_ROLE, createPostgresDb, type Db } from "@chaos-core/kit";
import pg from "pg";
import { createTestDatabase } from "../../test/support/postgres.js";
import { MEMORY_MIGRATIONS, migrateMemory } from "../../services/memory/src/adapters/migrations.js";
import { createSqlMemoryStore, searchStatement } from "../../services/memory/src/adapters/sql-store.js";
import { validateSearch } from "../../services/memory/src/domain/validation.js";

/** Options of {@link benchMemorySearch}; every field has a default. */
export interface MemorySearchBenchOptions {
  /** Items loaded for the tenant (default 100,000). */
  items?: number;
  /** Timed searches in total, spread evenly over the four kinds (default 400). */
  searches?: number;
  /** Untimed searches first, to warm caches and the connection pool (default 40). */
  warmup?: number;
  /** Page size of each search (default 20, the service default). */
  limit?: number;
  /** Called with each JSON line of results as it is ready. */
  onLine?: (line: string) => void;
}

/** Latency of one kind of search. */
export interface SearchKindResult {
  kind: SearchKind;
  searches: number;
  p50Ms: number;
  p99Ms: number;
  meanResults: number;
  /** The same searches through migration 0001's search function, in the same run. */
  baselineP50Ms: number;
}

/** What {@link benchMemorySearch} measured. */
export interface MemorySearchBenchResult {
  items: number;
  loadSeconds: number;
  searches: number;
  /** Over all timed searches. */
  p50Ms: number;
  p99Ms: number;
  /** Over the same searches through migration 0001's search function (the baseline). */
  baselineP50Ms: number;
  byKind: SearchKindResult[];
  /** Median of a few `stats` calls over the whole tenant (not a hot path; for scale). */
  statsMs: number;
  /** The plan of a rare-substring search uses the trigram index. */
  rareUsesTrigramIndex: boolean;
  /** Node types and indexes of the executed plan for one search of each kind. */
  plans: Record<SearchKind, { nodes: string[]; indexes: string[] }>;
}

type SearchKind = "rare" | "rare+tag" | "common" | "common+tag";

const TENANT = "bench";
const TAGS = Array.from({ length: 20 }, (_, i) => `team-${i}`);
const RARE_TAG = "urgent";
const NEEDLES = 20;
const NEEDLE_EVERY = 1000; // one item in a thousand carries a needle: 100 items at 100k, 5 per needle
const SYLLABLES = "ka lo mi nu pe ra si to vu xe ba co di fa go hu ji ke lu ma ne ol pa qu ri sa te ul ve wo".split(" ");
const COMMON = ["ka", "lomi", "nu", "sito", "pera", "note", "body", "team"];

/** A small deterministic PRNG (mulberry32), so every run loads the same data. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const needle = (j: number) => `zq-needle-${String(j).padStart(3, "0")}`;

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

const round = (ms: number) => Math.round(ms * 1000) / 1000;

/** Bulk-loads `count` items in large multi-row statements, as the tenant (so RLS checks every row). */
async function load(db: Db, count: number): Promise<void> {
  const rand = prng(42);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)] as T;
  const word = () => pick(SYLLABLES) + pick(SYLLABLES) + pick(SYLLABLES);
  const words = (n: number) => Array.from({ length: n }, word).join(" ");
  const now = new Date().toISOString();
  const batch = 10_000;
  for (let start = 0; start < count; start += batch) {
    const keys: string[] = [];
    const values: string[] = [];
    const tags: string[] = [];
    for (let i = start; i < Math.min(count, start + batch); i++) {
      keys.push(`notes/${String(i).padStart(7, "0")}/${word()}`);
      const value: Record<string, unknown> = { title: words(3), body: `note ${words(12)}`, n: i, owner: `user-${i % 500}` };
      if (i % NEEDLE_EVERY === 0) value.ref = needle((i / NEEDLE_EVERY) % NEEDLES);
      values.push(JSON.stringify(value));
      const t = new Set([pick(TAGS)]);
      if (rand() < 0.5) t.add(pick(TAGS));
      if (rand() < 0.01) t.add(RARE_TAG);
      tags.push([...t].join(","));
    }
    await db.tenantTx(TENANT, (q) =>
      q.query(
        `INSERT INTO memory.items (tenant_id, key, value, tags, created_at, updated_at)
         SELECT $1, k, v::json, string_to_array(t, ','), $2::timestamptz, $2::timestamptz
           FROM unnest($3::text[], $4::text[], $5::text[]) AS u(k, v, t)`,
        [TENANT, now, keys, values, tags],
      ),
    );
  }
}

/**
 * What autovacuum would have done to a table this size before anyone searched it: fresh
 * statistics, and the GIN pending lists merged (a bulk load leaves entries there, and every
 * search would otherwise scan them linearly). VACUUM cannot run inside a transaction.
 */
async function vacuumAnalyze(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("VACUUM (ANALYZE) memory.items");
  } finally {
    await client.end();
  }
}

function planNodes(plan: Record<string, unknown>): { nodes: string[]; indexes: string[] } {
  const nodes: string[] = [];
  const indexes: string[] = [];
  const walk = (node: Record<string, unknown>) => {
    nodes.push(String(node["Node Type"]));
    if (typeof node["Index Name"] === "string") indexes.push(node["Index Name"]);
    for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
  };
  walk(plan);
  return { nodes, indexes };
}

/** Migration 0001's search function, renamed `memory.search_items_0001`: the baseline. */
const BASELINE_FUNCTION = "memory.search_items_0001";
async function installBaseline(db: Db): Promise<void> {
  const sql = MEMORY_MIGRATIONS.find((m) => m.id === "0001_items")?.sql ?? "";
  const start = sql.indexOf("CREATE FUNCTION memory.search_items(");
  const end = sql.indexOf("$fn$;", start);
  if (start < 0 || end < 0) throw new Error("migration 0001 no longer holds the search function the baseline is made from");
  const fn = sql.slice(start, end + "$fn$;".length).replace("memory.search_items(", `${BASELINE_FUNCTION}(`);
  await db.adminTx((q) => q.exec(`${fn}\nGRANT EXECUTE ON FUNCTION ${BASELINE_FUNCTION}(text, text[], text, timestamptz, integer) TO ${APP_ROLE};`));
}

/**
 * The plan Postgres actually executed for the query on `memory.items` inside the search
 * function, for the store's exact statement run as the application role: EXPLAIN of the outer
 * statement would only show a function scan, so auto_explain reports nested statements.
 */
async function executedPlan(url: string, sql: string, params: unknown[]): Promise<{ nodes: string[]; indexes: string[] }> {
  const client = new pg.Client({ connectionString: url });
  const notices: string[] = [];
  client.on("notice", (n) => notices.push(n.message ?? ""));
  await client.connect();
  try {
    await client.query("BEGIN");
    // Superuser settings first, then the same prelude as a tenant transaction.
    await client.query("LOAD 'auto_explain'");
    for (const setting of ["log_min_duration = 0", "log_nested_statements = on", "log_format = json", "log_level = notice"]) {
      await client.query(`SET LOCAL auto_explain.${setting}`);
    }
    await client.query(`SELECT set_config('app.tenant_id', $1, true), set_config('role', '${APP_ROLE}', true)`, [TENANT]);
    await client.query(sql, params);
  } finally {
    await client.query("ROLLBACK").catch(() => undefined);
    await client.end();
  }
  for (const notice of notices) {
    const json = notice.slice(notice.indexOf("{"));
    const entry = JSON.parse(json) as { "Query Text": string; Plan: Record<string, unknown> };
    if (entry["Query Text"].includes("FROM memory.items")) return planNodes(entry.Plan);
  }
  throw new Error(`auto_explain reported no plan for memory.items:\n${notices.join("\n")}`);
}

/**
 * Runs the benchmark on a fresh database of the local Postgres (`TEST_DATABASE_URL` or
 * postgres@127.0.0.1:5432) and returns the numbers. The database is dropped even on failure.
 */
export async function benchMemorySearch(options: MemorySearchBenchOptions = {}): Promise<MemorySearchBenchResult> {
  const items = options.items ?? 100_000;
  const total = options.searches ?? 400;
  const warmup = options.warmup ?? 40;
  const limit = options.limit ?? 20;
  const emit = options.onLine ?? (() => undefined);
  if (items < NEEDLE_EVERY * NEEDLES) throw new Error(`items must be at least ${NEEDLE_EVERY * NEEDLES}`);

  const database = await createTestDatabase("chaoscore_bench_memory");
  const db = createPostgresDb({ connectionString: database.url });
  try {
    await migrateMemory(db);
    const t0 = performance.now();
    await load(db, items);
    await vacuumAnalyze(database.url);
    await installBaseline(db);
    const loadSeconds = (performance.now() - t0) / 1000;

    const store = createSqlMemoryStore(db);
    const rand = prng(7);
    const kinds: SearchKind[] = ["rare", "rare+tag", "common", "common+tag"];
    const inputFor = (kind: SearchKind, i: number) => {
      const tag = i % 2 ? RARE_TAG : (TAGS[i % TAGS.length] as string);
      switch (kind) {
        case "rare":
          return { query: needle(Math.floor(rand() * NEEDLES)), limit };
        case "rare+tag":
          return { query: needle(Math.floor(rand() * NEEDLES)), tags: [tag], limit };
        case "common":
          return { query: COMMON[Math.floor(rand() * COMMON.length)] as string, limit };
        case "common+tag":
          return { query: COMMON[Math.floor(rand() * COMMON.length)] as string, tags: [tag], limit };
      }
    };

    // Every needle is planted in items / (NEEDLE_EVERY * NEEDLES) items: a wrong index or
    // query would show up here, not as a suspiciously fast number.
    const expected = Math.min(limit, items / (NEEDLE_EVERY * NEEDLES));
    for (let j = 0; j < NEEDLES; j++) {
      const page = await store.search(TENANT, { query: needle(j).toUpperCase(), limit });
      if (page.items.length !== expected) throw new Error(`${needle(j)}: ${page.items.length} results, expected ${expected}`);
    }
    for (let i = 0; i < warmup; i++) await store.search(TENANT, inputFor(kinds[i % 4] as SearchKind, i));

    const samples = new Map<SearchKind, { ms: number[]; baselineMs: number[]; results: number }>(kinds.map((k) => [k, { ms: [], baselineMs: [], results: 0 }]));
    const baseline = async (input: ReturnType<typeof inputFor>) => {
      const { sql, params } = searchStatement(validateSearch(input), undefined, new Date());
      const res = await db.tenantTx(TENANT, (q) => q.query(sql.replace("memory.search_items(", `${BASELINE_FUNCTION}(`), params));
      return res.rows.length;
    };
    for (let i = 0; i < total; i++) {
      const kind = kinds[i % 4] as SearchKind;
      const input = inputFor(kind, Math.floor(i / 4));
      const s = samples.get(kind) as { ms: number[]; baselineMs: number[]; results: number };
      // Interleaved, alternating which goes first, so both meet the same cache and load.
      const timeStore = async () => {
        const start = performance.now();
        const page = await store.search(TENANT, input);
        const ms = performance.now() - start;
        s.ms.push(ms);
        if (process.env.BENCH_DEBUG && ms > 10) process.stderr.write(`${ms.toFixed(1)} ms ${JSON.stringify(input)}\n`);
        s.results += page.items.length;
        return page.items.length;
      };
      const timeBaseline = async () => {
        const start = performance.now();
        const rows = await baseline(input);
        s.baselineMs.push(performance.now() - start);
        return Math.min(rows, input.limit);
      };
      const [a, b] = i % 2 ? [await timeBaseline(), await timeStore()] : [await timeStore(), await timeBaseline()];
      if (a !== b) throw new Error(`the store and the baseline disagree on ${JSON.stringify(input)}: ${a} vs ${b} results`);
    }

    const byKind: SearchKindResult[] = kinds.map((kind) => {
      const s = samples.get(kind) as { ms: number[]; baselineMs: number[]; results: number };
      const sorted = [...s.ms].sort((a, b) => a - b);
      const r: SearchKindResult = {
        kind,
        searches: sorted.length,
        p50Ms: round(percentile(sorted, 50)),
        p99Ms: round(percentile(sorted, 99)),
        meanResults: round(s.results / Math.max(1, sorted.length)),
        baselineP50Ms: round(percentile([...s.baselineMs].sort((a, b) => a - b), 50)),
      };
      emit(JSON.stringify({ bench: "memory-search", items, ...r }));
      return r;
    });
    const all = [...samples.values()].flatMap((s) => s.ms).sort((a, b) => a - b);
    const allBaseline = [...samples.values()].flatMap((s) => s.baselineMs).sort((a, b) => a - b);

    const statsRuns: number[] = [];
    for (let i = 0; i < 5; i++) {
      const start = performance.now();
      const stats = await store.stats(TENANT);
      statsRuns.push(performance.now() - start);
      if (stats.items !== items) throw new Error(`stats counted ${stats.items} items, expected ${items}`);
    }
    const statsMs = round(percentile(statsRuns.sort((a, b) => a - b), 50));

    const plans = {} as Record<SearchKind, { nodes: string[]; indexes: string[] }>;
    for (const [i, kind] of kinds.entries()) {
      const input = kind === "common+tag" ? { query: "note", tags: [RARE_TAG], limit } : inputFor(kind, i);
      const { sql, params } = searchStatement(validateSearch(input), undefined, new Date());
      plans[kind] = await executedPlan(database.url, sql, params);
    }
    const result: MemorySearchBenchResult = {
      items,
      loadSeconds: round(loadSeconds),
      searches: all.length,
      p50Ms: round(percentile(all, 50)),
      p99Ms: round(percentile(all, 99)),
      baselineP50Ms: round(percentile(allBaseline, 50)),
      byKind,
      statsMs,
      rareUsesTrigramIndex: plans.rare.indexes.includes("items_search_trgm"),
      plans,
    };
    emit(JSON.stringify({ bench: "memory-search", items, statsMs, plans }));
    return result;
  } finally {
    await db.close();
    await database.drop();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await benchMemorySearch({
    ...(process.env.BENCH_ITEMS ? { items: Number(process.env.BENCH_ITEMS) } : {}),
    ...(process.env.BENCH_SEARCHES ? { searches: Number(process.env.BENCH_SEARCHES) } : {}),
    onLine: (line) => console.log(line),
  });
  console.log(
    `memory search over ${result.items} items: p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms over ${result.searches} searches ` +
      `(baseline, migration 0001's search function, same searches: p50 ${result.baselineP50Ms} ms) ` +
      `(load ${result.loadSeconds} s; rare substring ${result.rareUsesTrigramIndex ? "uses" : "does NOT use"} the trigram index)`,
  );
}
