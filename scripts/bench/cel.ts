/**
 * The two CEL libraries issue 33 names, measured on the policy conditions' own expressions in one
 * run (docs/policy-conditions.md §8): `@bufbuild/cel` (parse + plan, evaluation of the plan) and
 * `@marcbachmann/cel-js` (parse + type check against the declared environment, evaluation of the
 * parsed expression), interleaved expression by expression, round by round; then the chosen one
 * through the policy service's own compiler (`services/policy/src/domain/conditions.ts`: the
 * declared schemas converted per call, the result checked). Also reports, per library, what it
 * does with the expressions a policy must refuse at load (a parse error, an unknown field or
 * variable, a type error) and how long one `matches` over a backtracking-prone pattern takes.
 *
 * Run: npm run bench:cel   (or npx tsx scripts/bench/cel.ts)
 * Options (env): BENCH_ROUNDS (15), BENCH_BATCH (evaluations per timed batch, 2000),
 * BENCH_COMPILES (compilations per expression per round, 50).
 */
import { celEnv, CelScalar, isCelError, parse as bufParse, plan as bufPlan } from "@bufbuild/cel";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Environment } from "@marcbachmann/cel-js";
import { compileCondition, declareConditionVariables, evaluateCondition, type ConditionInput } from "../../services/policy/src/domain/conditions.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const BATCH = Number(process.env.BENCH_BATCH ?? 2000);
const COMPILES = Number(process.env.BENCH_COMPILES ?? 50);

/** Ten conditions of the kinds issue 33 asks for. */
const EXPRESSIONS: readonly string[] = [
  'args.path.startsWith("/srv/reports/")',
  '!(args.repository.matches("^sandbox/"))',
  '"support" in principal.roles',
  "now.getHours() < 8 || now.getHours() >= 18",
  'now.getHours("Europe/Berlin") < 8 || now.getDayOfWeek("Europe/Berlin") in [0, 6]',
  "args.a.b.c == 1",
  "size(args.items) < 10",
  'args.items.all(i, i.qty > 0 && i.tags.exists(t, t == "urgent"))',
  'capability.upstream == "github" && capability.risk == "high" && capability.annotations.destructiveHint',
  'tenant == "acme" && http.host.endsWith(".example.com")',
];

/** Expressions a policy must refuse at load. */
const REFUSALS: readonly { what: string; expr: string }[] = [
  { what: "parse error", expr: 'args.path.startsWith("/srv/"' },
  { what: "unknown field", expr: '"support" in principal.rolez' },
  { what: "unknown variable", expr: 'arg.path == "/"' },
  { what: "type error", expr: "capability.risk + 1 > 2" },
];

const ANNOTATIONS = { title: "", readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };
const NOW = new Date("2026-12-07T17:30:00Z");
const INPUT: ConditionInput = {
  args: {
    path: "/srv/reports/q3.csv",
    repository: "acme/payments",
    a: { b: { c: 1 } },
    items: [
      { qty: 2, tags: ["urgent"] },
      { qty: 1, tags: ["later", "urgent"] },
    ],
  },
  capability: { name: "github.merge_pull_request", risk: "high", annotations: ANNOTATIONS, upstream: "github" },
  principal: { id: "alice", roles: ["billing", "support"] },
  tenant: "acme",
  now: NOW,
  http: { host: "api.example.com" },
};
/** The same values as @bufbuild/cel takes them: a timestamp is a protobuf message. */
const BUF_INPUT = { ...INPUT, now: timestampFromDate(NOW) };

function marcEnvironment(): Environment {
  return declareConditionVariables(new Environment());
}

/** @bufbuild/cel declares variables by type only; a field of a map is not declared (no message types here). */
const bufEnv = celEnv({
  variables: {
    args: CelScalar.DYN,
    capability: CelScalar.DYN,
    principal: CelScalar.DYN,
    tenant: CelScalar.STRING,
    now: CelScalar.DYN,
    http: CelScalar.DYN,
  },
});
const marcEnv = marcEnvironment();

type Evaluate = () => unknown;

interface Candidate {
  readonly name: string;
  compile(expr: string): Evaluate;
}

const marc: Candidate = {
  name: "@marcbachmann/cel-js 8.0.0",
  compile(expr) {
    const parsed = marcEnv.parse(expr);
    const checked = parsed.check();
    if (!checked.valid) throw checked.error;
    return () => parsed(INPUT as unknown as Record<string, unknown>);
  },
};

const buf: Candidate = {
  name: "@bufbuild/cel 0.6.1",
  compile(expr) {
    const planned = bufPlan(bufEnv, bufParse(expr));
    return () => planned(BUF_INPUT as never);
  },
};

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Microseconds per call of `fn`, over one batch. */
function timeBatch(fn: () => unknown, n: number): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) fn();
  return Number(process.hrtime.bigint() - start) / 1_000 / n;
}

function show(value: unknown): string {
  if (isCelError(value)) return `error: ${value.message}`;
  return typeof value === "boolean" ? String(value) : JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v));
}

/** What a library says about an expression a policy must refuse: at load, or only when evaluated. */
function refusalOf(candidate: Candidate, expr: string): string {
  try {
    const evaluate = candidate.compile(expr);
    return `accepted at load; evaluated: ${show(evaluate())}`;
  } catch (err) {
    const e = err as { message: string; range?: { start: number } };
    const where = e.range ? ` (offset ${e.range.start})` : "";
    return `refused at load: ${e.message.split("\n")[0]}${where}`;
  }
}

const candidates = [marc, buf];

console.log(`CEL libraries on the policy conditions' expressions: ${ROUNDS} rounds, batches of ${BATCH}, ${COMPILES} compiles per expression per round; Node ${process.version}\n`);

// The backtracking check comes first: conditions.ts sets V8's linear-engine fallback for the whole process.
const hostile = `${"a".repeat(22)}!`;
const redos = candidates.map((c) => {
  const planned = c.name.startsWith("@bufbuild")
    ? (() => {
        const p = bufPlan(bufEnv, bufParse('args.s.matches("^(a+)+$")'));
        return () => p({ ...BUF_INPUT, args: { s: hostile } } as never);
      })()
    : (() => {
        const p = marcEnv.parse('args.s.matches("^(a+)+$")');
        return () => p({ ...INPUT, args: { s: hostile } } as unknown as Record<string, unknown>);
      })();
  const start = performance.now();
  planned();
  return performance.now() - start;
});

const evalSamples = new Map<string, number[]>();
const compileSamples = new Map<string, number[]>();
const key = (c: string, i: number) => `${c}#${i}`;
const compiled = candidates.map((c) => EXPRESSIONS.map((e) => c.compile(e)));
const answers = candidates.map((_, ci) => compiled[ci]!.map((f) => show(f())));
const ours = EXPRESSIONS.map((e, i) => compileCondition(e, i));
const oursAnswers = ours.map((c) => {
  const outcome = evaluateCondition(c, INPUT);
  return outcome.ok ? String(outcome.value) : `error: ${outcome.error}`;
});

for (let round = 0; round < ROUNDS; round++) {
  EXPRESSIONS.forEach((expr, i) => {
    candidates.forEach((c, ci) => {
      const evaluate = compiled[ci]![i]!;
      (evalSamples.get(key(c.name, i)) ?? evalSamples.set(key(c.name, i), []).get(key(c.name, i))!).push(timeBatch(evaluate, BATCH));
      (compileSamples.get(key(c.name, i)) ?? compileSamples.set(key(c.name, i), []).get(key(c.name, i))!).push(timeBatch(() => c.compile(expr), COMPILES));
    });
    const condition = ours[i]!;
    (evalSamples.get(key("ours", i)) ?? evalSamples.set(key("ours", i), []).get(key("ours", i))!).push(timeBatch(() => evaluateCondition(condition, INPUT), BATCH));
  });
}

const fmt = (us: number) => (us < 10 ? us.toFixed(2) : us.toFixed(1));
console.log(`| # | expression | ${candidates.map((c) => `${c.name}: eval µs / compile µs`).join(" | ")} | conditions.ts eval µs |`);
console.log(`|---|---|${candidates.map(() => "---").join("|")}|---|`);
EXPRESSIONS.forEach((expr, i) => {
  const cells = candidates.map((c, ci) => {
    const ev = median(evalSamples.get(key(c.name, i))!);
    const co = median(compileSamples.get(key(c.name, i))!);
    return `${fmt(ev)} / ${fmt(co)}${answers[ci]![i] === "true" || answers[ci]![i] === "false" ? "" : ` (${answers[ci]![i]})`}`;
  });
  console.log(`| ${i + 1} | \`${expr}\` | ${cells.join(" | ")} | ${fmt(median(evalSamples.get(key("ours", i))!))}${oursAnswers[i] === "true" || oursAnswers[i] === "false" ? "" : ` (${oursAnswers[i]})`} |`);
});
const total = (name: string) => EXPRESSIONS.reduce((sum, _e, i) => sum + median(evalSamples.get(key(name, i))!), 0);
console.log(`| | all ten, evaluated once each | ${candidates.map((c) => `${fmt(total(c.name))} / —`).join(" | ")} | ${fmt(total("ours"))} |`);
const agree = EXPRESSIONS.every((_e, i) => answers[0]![i] === answers[1]![i] && answers[0]![i] === oursAnswers[i]);
console.log(`\nAnswers ${agree ? "agree" : "DIFFER"}: ${answers[0]!.join(", ")}${agree ? "" : ` vs ${answers[1]!.join(", ")} vs ${oursAnswers.join(", ")}`}`);

console.log(`\nOne \`args.s.matches("^(a+)+$")\` with s = 22 × "a" + "!": ${candidates.map((c, ci) => `${c.name} ${redos[ci]!.toFixed(1)} ms`).join("; ")}`);

console.log("\nExpressions a policy must refuse at load:\n");
console.log(`| refusal | expression | ${candidates.map((c) => c.name).join(" | ")} |`);
console.log(`|---|---|${candidates.map(() => "---").join("|")}|`);
for (const { what, expr } of REFUSALS) {
  console.log(`| ${what} | \`${expr}\` | ${candidates.map((c) => refusalOf(c, expr).replaceAll("|", "\\|")).join(" | ")} |`);
}
