/**
 * Issue 33, item 5 ("Fast"): what ten conditional rules add to a policy decision
 * (docs/policy-conditions.md §9). Times the policy service's own pure decision, `decide(...)` from
 * `services/policy/src/handlers/policy-handlers.ts` — the proto request with its `argumentsJson`
 * parsed, the engine, the proto answer — for one realistic document without rules and the same
 * document with ten conditional rules, interleaved batch by batch in one process, round by round.
 *
 * The ten rules all match the capability decided (`github.merge_pull_request`: five by its exact
 * name, five by `github.*`) and every condition is false for the call, so the decision consults
 * all ten (deny rules, then require_approval, then allow) and falls through to the default ALLOW.
 * Before timing, the script proves it: the decision with rules is the default, and for each rule,
 * the same document with only that rule's condition negated is decided by that rule — reaching it
 * means every rule consulted before it was evaluated and false.
 *
 * Each decision gets its own `now` (one millisecond later than the last), as the service's clock
 * gives, so no per-instant memo carries over from one decision to the next.
 *
 * Also times the rule with zoned timestamp accessors alone: through @marcbachmann/cel-js as it
 * ships (`toLocaleString` with the zone on every call) and through `conditions.ts` (a cached
 * formatter per zone, `zoned-time.ts`).
 *
 * Run: npm run bench:rules   (or npx tsx scripts/bench/policy-rules.ts)
 * Options (env): BENCH_ROUNDS (21), BENCH_BATCH (decisions per timed batch, 2000).
 */
import { availableParallelism, loadavg } from "node:os";
import { create } from "@bufbuild/protobuf";
import { EvaluateRequestSchema, Risk } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { Environment } from "@marcbachmann/cel-js";
import { compileCondition, declareConditionVariables, evaluateCondition } from "../../services/policy/src/domain/conditions.js";
import { conditionInput } from "../../services/policy/src/domain/rules.js";
import { defaultPolicyDocument, validatePolicyDocument, type PolicyDocumentJson } from "../../services/policy/src/domain/policy-document.js";
import { decide } from "../../services/policy/src/handlers/policy-handlers.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 21);
const BATCH = Number(process.env.BENCH_BATCH ?? 2000);

const CAPABILITY = "github.merge_pull_request";

/** Ten conditional rules of the kinds issue 33 asks for, each false for the call below. */
const RULES = [
  { capability: "github.*", effect: "deny", when: '!("engineer" in principal.roles)', description: "engineers only" },
  { capability: CAPABILITY, effect: "deny", when: 'args.repository.matches("^(prod|infra)/")', description: "no merges into prod or infra" },
  { capability: "github.*", effect: "deny", when: 'capability.annotations.destructiveHint && capability.risk == "critical"' },
  { capability: CAPABILITY, effect: "deny", when: 'args.checks.exists(c, c.required && c.status != "success")', description: "required checks green" },
  {
    capability: CAPABILITY,
    effect: "require_approval",
    when: 'now.getHours("Europe/Berlin") < 8 || now.getHours("Europe/Berlin") >= 18 || now.getDayOfWeek("Europe/Berlin") in [0, 6]',
    description: "outside business hours",
  },
  { capability: "github.*", effect: "require_approval", when: 'args.head.ref.startsWith("release/")' },
  { capability: CAPABILITY, effect: "require_approval", when: 'size(args.labels) > 5 || "hotfix" in args.labels' },
  { capability: CAPABILITY, effect: "allow", when: 'args.repository.startsWith("sandbox/") && !args.repository.contains("/../")', description: "sandbox merges" },
  { capability: "github.*", effect: "allow", when: 'tenant == "sandbox" && http.host.endsWith(".example.com")' },
  { capability: "github.*", effect: "allow", when: 'now.getHours() >= 22 && args.merge_method == "rebase"' },
] as const;

/** A realistic document beside the rules: seed lists, a risk threshold, HTTP domains, approval channels. */
function document(rules: readonly object[]): PolicyDocumentJson {
  const base = defaultPolicyDocument();
  return validatePolicyDocument(
    {
      ...base,
      deniedCapabilities: ["filesystem.delete_file", "shell.*"],
      requireConfirmationFor: ["http.request", "github.delete_repository", "jira.delete_issue"],
      httpAllowedDomains: ["api.github.com", "acme.atlassian.net", "example.com"],
      riskRules: { requireApprovalAtOrAbove: "high", denyAtOrAbove: "never" },
      rules,
    },
    "bench",
  );
}

const WITHOUT = document([]);
const WITH = document(RULES);

const ARGS = {
  repository: "acme/payments",
  pull_number: 4242,
  merge_method: "squash",
  commit_title: "Fix rounding in invoice totals (#4242)",
  head: { ref: "fix/invoice-rounding", sha: "9f2c1e7a4b3d5f60718293a4b5c6d7e8f9012345" },
  labels: ["bug", "payments"],
  checks: [
    { name: "build", status: "success", required: true },
    { name: "test", status: "success", required: true },
    { name: "lint", status: "success", required: true },
    { name: "preview", status: "pending", required: false },
  ],
};

const REQUEST = create(EvaluateRequestSchema, {
  capability: CAPABILITY,
  risk: Risk.MEDIUM,
  argumentsJson: JSON.stringify(ARGS),
  upstream: "github",
  annotations: { title: "Merge a pull request", readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
});
const CALL = { tenant: "acme", principal: "alice@acme.example", roles: ["engineer", "support"] };

/** A Monday, 10:00 UTC (11:00 in Berlin); each decision one millisecond later. */
const BASE = Date.parse("2026-12-07T10:00:00Z");
let tick = 0;
const nextNow = () => new Date(BASE + (tick++ % 3_600_000));

const decideWith = (doc: PolicyDocumentJson) => () => decide(REQUEST, doc, 7, { call: CALL, now: nextNow() });

// The proof that all ten conditions are evaluated, before any timing.
const baseline = decideWith(WITH)();
if (baseline.matchedRule !== "default" || baseline.conditionError !== "" || !baseline.evaluatedAt) {
  throw new Error(`the decision with rules should fall through to the default after evaluating them: ${JSON.stringify(baseline, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))}`);
}
if (decideWith(WITHOUT)().matchedRule !== "default") throw new Error("the decision without rules should be the default");
RULES.forEach((rule, i) => {
  const negated = document(RULES.map((r, j) => (j === i ? { ...r, when: `!(${r.when})` } : r)));
  const answer = decideWith(negated)();
  if (answer.matchedRule !== `rules[${i}]`) throw new Error(`with rules[${i}] negated the decision should name it, got ${answer.matchedRule}`);
});

// The zoned rule alone: the library as it ships, and conditions.ts.
const ZONED = RULES[4].when;
const input = conditionInput(CAPABILITY, "medium", undefined, { args: ARGS, upstream: "github", principal: CALL.principal, roles: CALL.roles, tenant: CALL.tenant, now: new Date(BASE) });
const library = declareConditionVariables(new Environment()).parse(ZONED);
if (!library.check().valid) throw new Error("the zoned rule does not check in the library");
const ours = compileCondition(ZONED, 4);
const zonedLibrary = () => library({ ...input, now: nextNow() } as unknown as Record<string, unknown>);
const zonedOurs = () => evaluateCondition(ours, { ...input, now: nextNow() });
if (zonedLibrary() !== false || JSON.stringify(zonedOurs()) !== '{"ok":true,"value":false}') throw new Error("the zoned rule should be false at the bench's time");

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * Microseconds per call of `fn` over one batch: wall clock, and the process's CPU time (user +
 * system), which a machine shared with other work inflates far less than the wall clock.
 */
function timeBatch(fn: () => unknown, n: number): { wall: number; cpu: number } {
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) fn();
  const wall = Number(process.hrtime.bigint() - start) / 1_000 / n;
  const used = process.cpuUsage(cpu);
  return { wall, cpu: (used.user + used.system) / n };
}

const cases = {
  without: decideWith(WITHOUT),
  with: decideWith(WITH),
  zonedLibrary,
  zonedOurs,
} as const;
type Case = keyof typeof cases;
const samples: Record<Case, { wall: number; cpu: number }[]> = { without: [], with: [], zonedLibrary: [], zonedOurs: [] };
/** Batches per case for the zoned rule alone: the library's is ~100× dearer, so fewer of its calls. */
const batchOf = (c: Case) => (c === "zonedLibrary" ? Math.max(1, Math.round(BATCH / 20)) : BATCH);

console.log(`Policy decisions with ten conditional rules: ${ROUNDS} rounds, batches of ${BATCH}; Node ${process.version}\n`);
// Warm-up: one round untimed.
for (const c of Object.keys(cases) as Case[]) timeBatch(cases[c], batchOf(c));
const order: Case[] = ["without", "with", "zonedLibrary", "zonedOurs"];
for (let round = 0; round < ROUNDS; round++) {
  // Alternate which decision goes first, so neither always runs on a warmer or cooler machine.
  const first: Case[] = round % 2 ? ["with", "without"] : ["without", "with"];
  for (const c of [...first, ...order.slice(2)]) samples[c].push(timeBatch(cases[c], batchOf(c)));
}

const fmt = (us: number) => (us < 10 ? us.toFixed(2) : us.toFixed(1));
type Clock = "wall" | "cpu";
const of = (c: Case, clock: Clock) => samples[c].map((s) => s[clock]);
const p50 = (c: Case, clock: Clock) => median(of(c, clock));
const spread = (c: Case, clock: Clock) => `${fmt(Math.min(...of(c, clock)))}–${fmt(Math.max(...of(c, clock)))}`;
const added = (clock: Clock) => p50("with", clock) - p50("without", clock);
const pairedAdded = (clock: Clock) => median(samples.with.map((w, i) => w[clock] - samples.without[i]![clock]));
const row = (label: string, c: Case) => `| ${label} | ${fmt(p50(c, "wall"))} (${spread(c, "wall")}) | ${fmt(p50(c, "cpu"))} (${spread(c, "cpu")}) |`;

console.log("| decide(...) | wall µs per decision, p50 (per-round range) | CPU µs per decision, p50 (per-round range) |");
console.log("|---|---|---|");
console.log(row("document without rules", "without"));
console.log(row("same document with ten conditional rules (all ten evaluated, all false: default ALLOW)", "with"));
console.log(`| added by the ten rules: difference of the p50s; p50 of the per-round differences | ${fmt(added("wall"))}; ${fmt(pairedAdded("wall"))} | ${fmt(added("cpu"))}; ${fmt(pairedAdded("cpu"))} |`);
console.log("\n| the zoned rule alone | wall µs per evaluation, p50 (per-round range) | CPU µs per evaluation, p50 (per-round range) |");
console.log("|---|---|---|");
console.log(row("@marcbachmann/cel-js as shipped (toLocaleString with the zone per call)", "zonedLibrary"));
console.log(row("conditions.ts (a cached formatter per zone)", "zonedOurs"));
console.log(`\nThe zoned rule: \`${ZONED}\``);
console.log(`Goal (issue 33): ten conditional rules add < 50 µs p50 to the decision: wall clock ${added("wall") < 50 ? "met" : "NOT met"} (${fmt(added("wall"))} µs), CPU time ${added("cpu") < 50 ? "met" : "NOT met"} (${fmt(added("cpu"))} µs)`);
console.log(`Load average while it ran: ${loadavg().map((l) => l.toFixed(1)).join(", ")} on ${availableParallelism()} cores`);
