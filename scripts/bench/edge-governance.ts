/**
 * What the edge's tenant governance adds to each request (issue 13): the rate limiter's admit
 * (GCRA over three buckets in one Lua script on Redis, the way every edge replica shares them) and
 * the tenant check (the registry's status and toolsets, cached per replica while the tenant's
 * generation in Redis holds: one GET), each against a bare Redis round trip (PING) measured in the
 * same run, interleaved round by round. Redis is this machine's (REDIS_URL or 127.0.0.1:6379),
 * the registry a fresh Postgres database; everything runs in this one process, as in an edge.
 *
 * Run: npx tsx scripts/bench/edge-governance.ts   (after `npm run build`), or
 *      BENCH_ONLY=edge-governance npm run bench
 * Options (env): BENCH_ROUNDS (3), BENCH_CALLS (calls per series per round at each concurrency, 4000).
 */
import { Redis } from "ioredis";
import { createInProcessClient, createLogger, createPostgresDb, createRedisTenantGenerations } from "@chaos-core/kit";
import { createCredentialDirectory, createRedisRateLimiter } from "@chaos-core/edge";
import { createSqlTenantRegistry, createTenantDirectoryHandlers, migratePolicy } from "@chaos-core/policy";
import { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { createTestDatabase } from "../../test/support/postgres.js";
import { percentile } from "./mcp-load.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CALLS = Number(process.env.BENCH_CALLS ?? 4000);
const prefix = `bench-edge-${process.pid}:`;

const database = await createTestDatabase("chaoscore_bench_edge");
const db = createPostgresDb({ connectionString: database.url, max: 2 });
const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: 1 });
const logger = createLogger("bench", "silent");

/** p50 and throughput of `calls` calls of `fn`, `concurrency` at a time. */
async function measure(fn: () => Promise<unknown>, concurrency: number): Promise<{ p50: number; perSecond: number }> {
  const latencies: number[] = [];
  let started = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started < CALLS) {
        started++;
        const t = performance.now();
        await fn();
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { p50: percentile(latencies.sort((a, b) => a - b), 50), perSecond: CALLS / seconds };
}

try {
  await migratePolicy(db);
  const generations = createRedisTenantGenerations(redis, { prefix });
  const registry = createSqlTenantRegistry(db, { generations });
  await registry.createTenant({ id: "acme", settings: { toolsets: ["core", "council"] } });
  const directory = createCredentialDirectory({
    client: createInProcessClient(TenantDirectoryService, createTenantDirectoryHandlers(registry)),
    generations,
    logger,
  });
  // Generous limits, so no call is refused: what is measured is the check itself.
  const per = { requests: 1_000_000, per: "second" as const };
  const limiter = createRedisRateLimiter(redis, { default: { tenant: per, principal: per, tool: per }, tenants: {} }, { prefix, logger });
  const series = {
    "redis PING (baseline round trip)": () => redis.ping(),
    "rate limiter admit (3 buckets, one script)": () => limiter.admit({ tenant: "acme", principal: "ann", tool: "chaoscore_recall", readOnly: true }),
    "tenant check (cached; one GET of the generation)": () => directory.tenantRefusal("acme"),
  };
  await directory.tenantRefusal("acme");
  console.log(`Edge governance per request, medians of ${ROUNDS} interleaved rounds of ${CALLS} calls`);
  console.log("| concurrency | series | p50 ms | calls/s | p50 − PING p50 ms |");
  console.log("|---|---|---|---|---|");
  for (const concurrency of [1, 16]) {
    const results: Record<string, Array<{ p50: number; perSecond: number }>> = {};
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, fn] of Object.entries(series)) (results[name] ??= []).push(await measure(fn, concurrency));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const ping = median(results["redis PING (baseline round trip)"]!.map((r) => r.p50));
    for (const [name, rs] of Object.entries(results)) {
      const p50 = median(rs.map((r) => r.p50));
      console.log(`| ${concurrency} | ${name} | ${p50.toFixed(3)} | ${median(rs.map((r) => r.perSecond)).toFixed(0)} | ${(p50 - ping).toFixed(3)} |`);
    }
  }
} finally {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
  await db.close();
  await database.drop();
}
