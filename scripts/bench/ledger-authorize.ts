/**
 * Authorize latency (issue 4 "authorize p50/p99") on real Postgres and Redis through the
 * in-process LedgerService client, side by side in one run with its floor:
 *  - authorize: each iteration issues a fresh receipt (EvaluateToolApproval + IssueReceipt, not
 *    timed), then times one Authorize that consumes it: check chain, Ed25519 verify, Redis
 *    SET NX, and one ledger append whose hook reads and inserts the nonce row.
 *  - authorize-denied: Authorize without a receipt (check chain + one plain append): a denial.
 *  - append (baseline): Append of an event shaped like the authorization entry: one durable,
 *    checkpointed ledger commit, which every decision pays.
 * One caller at a time (latency, not throughput); the kinds are interleaved call by call, each
 * on its own tenant; p50/p99 per round, medians over rounds reported.
 *
 * Run: npx tsx scripts/bench/ledger-authorize.ts   (needs Postgres and Redis)
 * Options (env): BENCH_ITERATIONS (per kind per round, 500), BENCH_ROUNDS (3),
 * TEST_DATABASE_URL, TEST_REDIS_URL. Creates and drops its own database.
 */
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { createLedgerFixture, type LedgerFixture } from "../../services/ledger/src/test-support/ledger-fixture.js";
import { as, requestAndIssue, type FixtureToolCall } from "../../services/ledger/src/test-support/flows.js";

export type AuthorizeBenchKind = "authorize" | "authorize-denied" | "append-baseline";

export interface AuthorizeKindResult {
  kind: AuthorizeBenchKind;
  calls: number;
  p50Ms: number;
  p99Ms: number;
}

export interface LedgerAuthorizeBenchResult {
  rounds: number;
  iterationsPerRound: number;
  kinds: AuthorizeKindResult[];
}

const CALL: FixtureToolCall = { tool: "reports.delete", resource: "bucket:reports", arguments: { report_id: "q3-2025", hard: false } };
const POLICIES = {
  defaults: { tool_approval: { version: "tp-1", tools: { "reports.delete": { risk: "high", resources: ["bucket:reports"] } } } },
};
const AGENT = "agent@bench";
const APPROVER = "approver@bench";

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** One timed call of `kind` (the receipt for "authorize" is issued first, untimed). */
async function oneCall(fx: LedgerFixture, kind: AuthorizeBenchKind, tenant: string, i: number): Promise<number> {
  const ctx = as(tenant, AGENT);
  if (kind === "authorize") {
    const { receipt } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: CALL });
    let code = "";
    const ms = await timed(async () => (code = (await fx.client.authorize({ call: CALL, receipt }, ctx)).code));
    if (code !== "AUTHORIZED") throw new Error(`authorize: expected AUTHORIZED, got ${code}`);
    return ms;
  }
  if (kind === "authorize-denied") {
    let code = "";
    const ms = await timed(async () => (code = (await fx.client.authorize({ call: CALL }, ctx)).code));
    if (code !== "allowlist_is_not_authorization") throw new Error(`authorize-denied: got ${code}`);
    return ms;
  }
  const event = {
    type: "authorization.decided",
    tool: CALL.tool,
    resource: CALL.resource,
    args_hash: "0".repeat(64),
    receipt_kid: "bench",
    receipt_nonce: `n${i}`,
    receipt_actor: APPROVER,
    policy_version: "tp-1",
    code: "AUTHORIZED",
    step: "authorized",
    authorized: true,
  };
  return timed(() => fx.client.append({ event }, ctx));
}

/**
 * Every kind once per iteration, in rotating order, each on its own tenant: the kinds see the
 * same machine load, so the comparison holds even on a busy host.
 */
async function runRound(fx: LedgerFixture, kinds: AuthorizeBenchKind[], prefix: string, iterations: number): Promise<Map<AuthorizeBenchKind, number[]>> {
  const samples = new Map<AuthorizeBenchKind, number[]>(kinds.map((k) => [k, []]));
  for (let i = 0; i < iterations; i++) {
    for (let j = 0; j < kinds.length; j++) {
      const kind = kinds[(i + j) % kinds.length]!;
      samples.get(kind)!.push(await oneCall(fx, kind, `${prefix}-${kind.replace(/[^a-z]/g, "")}`, i));
    }
  }
  return samples;
}

export async function benchLedgerAuthorize(options: { iterations?: number; rounds?: number } = {}): Promise<LedgerAuthorizeBenchResult> {
  const iterations = options.iterations ?? Number(process.env.BENCH_ITERATIONS ?? 500);
  const rounds = options.rounds ?? Number(process.env.BENCH_ROUNDS ?? 3);
  const kinds: AuthorizeBenchKind[] = ["authorize", "authorize-denied", "append-baseline"];
  const fx = await createLedgerFixture({ name: "chaoscore_bench_authorize", policies: POLICIES });
  const perRound = new Map<AuthorizeBenchKind, { p50: number[]; p99: number[] }>(kinds.map((k) => [k, { p50: [], p99: [] }]));
  try {
    // Warm-up: JIT, pool connections, the tenant heads.
    await runRound(fx, kinds, "warmup", 50);
    for (let r = 0; r < rounds; r++) {
      const round = await runRound(fx, kinds, `r${r}`, iterations);
      for (const kind of kinds) {
        const samples = round.get(kind)!.sort((a, b) => a - b);
        const p50 = quantile(samples, 0.5);
        const p99 = quantile(samples, 0.99);
        perRound.get(kind)!.p50.push(p50);
        perRound.get(kind)!.p99.push(p99);
        process.stdout.write(`${JSON.stringify({ round: r + 1, kind, calls: samples.length, p50Ms: +p50.toFixed(3), p99Ms: +p99.toFixed(3) })}\n`);
      }
    }
  } finally {
    await fx.close();
  }
  return {
    rounds,
    iterationsPerRound: iterations,
    kinds: kinds.map((kind) => ({
      kind,
      calls: iterations * rounds,
      p50Ms: +median(perRound.get(kind)!.p50).toFixed(3),
      p99Ms: +median(perRound.get(kind)!.p99).toFixed(3),
    })),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const result = await benchLedgerAuthorize();
  process.stdout.write("\nmedians over rounds (ms), one caller, in-process client, Postgres + Redis:\n");
  for (const k of result.kinds) process.stdout.write(`  ${k.kind.padEnd(18)} p50 ${k.p50Ms.toFixed(3).padStart(8)}  p99 ${k.p99Ms.toFixed(3).padStart(8)}\n`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
