import { ChaosError } from "@chaos-core/kit";
import { Environment } from "@marcbachmann/cel-js";
import { afterEach, describe, expect, it, vi } from "vitest";
import { compileCondition, CONDITION_BOUNDS, evaluateCondition, type ConditionInput } from "./conditions.js";
import { wallFields } from "./zoned-time.js";

const ANNOTATIONS = { title: "", readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };

/** One call's environment; each test overrides what it looks at. */
function input(over: Partial<ConditionInput> = {}): ConditionInput {
  return {
    args: {},
    capability: { name: "filesystem.write_file", risk: "high", annotations: ANNOTATIONS, upstream: "filesystem" },
    principal: { id: "alice", roles: [] },
    tenant: "acme",
    now: new Date("2026-12-07T10:00:00Z"),
    http: { host: "" },
    ...over,
  };
}

/** The refusal `compileCondition` throws, as `code: message`. */
function refusal(expression: string, rule = 2): string {
  try {
    compileCondition(expression, rule);
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    return `${(err as ChaosError).code}: ${(err as ChaosError).message}`;
  }
  throw new Error(`compiled: ${expression}`);
}

function evaluate(expression: string, over: Partial<ConditionInput>) {
  return evaluateCondition(compileCondition(expression, 0), input(over));
}

describe("compileCondition refuses at load, naming the rule, the position and the expression", () => {
  it("a parse error", () => {
    expect(refusal('args.path.startsWith("/srv/"')).toBe(
      'invalid_argument: rules[2].when: expected RPAREN, got EOF at 1:29 in "args.path.startsWith(\\"/srv/\\""',
    );
  });

  it("a type error", () => {
    expect(refusal("capability.risk + 1 > 2")).toBe(
      'invalid_argument: rules[2].when: no such overload: string + int at 1:1 in "capability.risk + 1 > 2"',
    );
    expect(refusal('"support" in principal.id')).toMatch(/^invalid_argument: rules\[2\]\.when: no such overload: string in string at 1:1 /);
  });

  it("an unknown field of a declared variable", () => {
    expect(refusal('"support" in principal.rolez')).toBe(
      'invalid_argument: rules[2].when: unknown field "rolez" at 1:24 in "\\"support\\" in principal.rolez"',
    );
    expect(refusal("capability.annotations.destructive")).toMatch(/unknown field "destructive" at 1:24 /);
  });

  it("an unknown variable, listing the variables there are", () => {
    expect(refusal("arg.path == \"/\"", 0)).toBe(
      'invalid_argument: rules[0].when: unknown variable "arg" (the variables are args, capability, principal, tenant, now, http) at 1:1 in "arg.path == \\"/\\""',
    );
  });

  it("a position on a later line of a multi-line expression", () => {
    expect(refusal('args.path.startsWith("/srv/") &&\n  principal.rolez == []')).toMatch(/unknown field "rolez" at 2:13 /);
  });

  it("a condition that does not yield a bool", () => {
    expect(refusal("tenant")).toBe('invalid_argument: rules[2].when: the condition yields string; it must yield bool at 1:1 in "tenant"');
  });

  it("an empty condition", () => {
    expect(refusal("  ")).toBe("invalid_argument: rules[2].when: must not be empty; omit when for a rule without a condition");
  });

  it("an expression over the character bound", () => {
    const long = `tenant == "${"a".repeat(CONDITION_BOUNDS.maxChars)}"`;
    expect(refusal(long)).toMatch(new RegExp(`^invalid_argument: rules\\[2\\]\\.when: the expression is ${long.length} characters, over the bound of 1024 at 1:1025 in "tenant == \\\\"a+…"$`));
  });

  it("an expression over the syntax-tree bound", () => {
    const wide = `${"1+".repeat(300)}1 == 301`;
    expect(wide.length).toBeLessThan(CONDITION_BOUNDS.maxChars);
    expect(refusal(wide)).toMatch(/^invalid_argument: rules\[2\]\.when: the expression is over the size bound \(Exceeded maxAstNodes \(256\)\) at /);
  });

  it("nesting over the depth bound", () => {
    expect(refusal(`${"(".repeat(40)}true${")".repeat(40)}`)).toMatch(/the expression is over the size bound \(Exceeded maxDepth \(32\)\) at 1:\d+ /);
  });

  it("comprehensions nested over the bound, at the one too deep", () => {
    const two = "args.groups.all(g, g.members.exists(m, m == principal.id))";
    expect(() => compileCondition(two, 1)).not.toThrow();
    expect(refusal("args.a.all(x, x.b.all(y, y.c.exists(z, z == 1)))", 1)).toBe(
      'invalid_argument: rules[1].when: comprehensions are nested 3 deep, over the bound of 2 at 1:26 in "args.a.all(x, x.b.all(y, y.c.exists(z, z == 1)))"',
    );
    // Chained, not nested: the receiver of a comprehension is outside its loop.
    expect(() => compileCondition("args.a.filter(x, x > 0).map(x, x * 2.0).exists(x, x > 4.0)", 1)).not.toThrow();
  });

  it("a matches pattern that is not a literal, or not linear-time", () => {
    expect(refusal("args.repository.matches(args.pattern)")).toBe(
      'invalid_argument: rules[2].when: the pattern of matches must be a string literal, so it is checked when the policy is loaded at 1:25 in "args.repository.matches(args.pattern)"',
    );
    expect(refusal('args.repository.matches("^(a)\\\\1$")')).toMatch(/the pattern "\^\(a\)\\\\1\$" is not a regular expression that runs in linear time \(Cannot be executed in linear time\) at 1:25 /);
    expect(refusal('args.repository.matches("[")')).toMatch(/the pattern "\[" is not a regular expression that runs in linear time \(Unterminated character class\) at 1:25 /);
  });
});

describe("evaluateCondition: the issue's four examples", () => {
  it("filesystem.write_file only under /srv/reports/", () => {
    const under = 'args.path.startsWith("/srv/reports/") && !args.path.contains("/../")';
    expect(evaluate(under, { args: { path: "/srv/reports/q3.csv" } })).toEqual({ ok: true, value: true });
    expect(evaluate(under, { args: { path: "/etc/passwd" } })).toEqual({ ok: true, value: false });
    expect(evaluate(under, { args: { path: "/srv/reports/../../etc/passwd" } })).toEqual({ ok: true, value: false });
  });

  it("github.merge_pull_request needs a person unless the repository is sandbox/*", () => {
    const sandbox = 'args.repository.matches("^sandbox/")';
    expect(evaluate(sandbox, { args: { repository: "sandbox/demo", pull_number: 7 } })).toEqual({ ok: true, value: true });
    expect(evaluate(`!(${sandbox})`, { args: { repository: "acme/payments", pull_number: 7 } })).toEqual({ ok: true, value: true });
  });

  it("jira.* for the support role only", () => {
    const support = '"support" in principal.roles';
    expect(evaluate(support, { principal: { id: "bob", roles: ["billing", "support"] } })).toEqual({ ok: true, value: true });
    expect(evaluate(support, { principal: { id: "eve", roles: [] } })).toEqual({ ok: true, value: false });
  });

  it("jira.delete_issue outside business hours needs a person, with an injected now", () => {
    const outside = 'now.getHours("Europe/Berlin") < 8 || now.getHours("Europe/Berlin") >= 18 || now.getDayOfWeek("Europe/Berlin") in [0, 6]';
    // A Monday, 2026-12-07: 10:00 UTC is 11:00 in Berlin, 17:30 UTC is 18:30.
    expect(evaluate(outside, { now: new Date("2026-12-07T10:00:00Z") })).toEqual({ ok: true, value: false });
    expect(evaluate(outside, { now: new Date("2026-12-07T17:30:00Z") })).toEqual({ ok: true, value: true });
    expect(evaluate(outside, { now: new Date("2026-12-06T10:00:00Z") })).toEqual({ ok: true, value: true }); // a Sunday
    expect(evaluate("now.getHours() < 8 || now.getHours() >= 18", { now: new Date("2026-12-07T07:59:00Z") })).toEqual({ ok: true, value: true }); // UTC
  });
});

describe("evaluateCondition reads the whole environment and never throws", () => {
  it("nested arguments, sizes, capability, tenant and http facts", () => {
    const over = {
      args: { a: { b: { c: 1 } }, items: [{ qty: 2, tags: ["urgent"] }] },
      http: { host: "api.example.com" },
    };
    expect(evaluate("args.a.b.c == 1", over)).toEqual({ ok: true, value: true });
    expect(evaluate('size(args.items) < 10 && args.items.all(i, i.qty > 0 && i.tags.exists(t, t == "urgent"))', over)).toEqual({ ok: true, value: true });
    expect(evaluate('capability.upstream == "filesystem" && capability.risk == "high" && capability.annotations.destructiveHint', over)).toEqual({ ok: true, value: true });
    expect(evaluate('tenant == "acme" && http.host.endsWith(".example.com")', over)).toEqual({ ok: true, value: true });
  });

  it("a missing argument is an error naming the rule and position, for the caller to fail closed on", () => {
    expect(evaluate('args.repository.matches("^sandbox/")', { args: {} })).toEqual({ ok: false, error: 'rules[0].when: the value has no field "repository" at 1:6' });
    expect(evaluate('has(args.repository) && args.repository.matches("^sandbox/")', { args: {} })).toEqual({ ok: true, value: false });
  });

  it("a value of another type in the data is an error", () => {
    expect(evaluate('args.path.startsWith("/srv/")', { args: { path: 42 } })).toMatchObject({ ok: false, error: expect.stringMatching(/^rules\[0\]\.when: .*startsWith.* at 1:\d+$/) });
  });

  it("a dynamic result that is not a bool is an error", () => {
    expect(evaluate("args.flag", { args: { flag: "yes" } })).toEqual({ ok: false, error: "rules[0].when: the condition yielded string, not a bool" });
    expect(evaluate("args.flag", { args: { flag: true } })).toEqual({ ok: true, value: true });
  });

  it("an object's prototype is not a field", () => {
    expect(evaluate("has(args.constructor) || has(args.__proto__)", { args: {} })).toEqual({ ok: true, value: false });
  });

  it("a backtracking-prone pattern against a hostile argument stays linear", () => {
    const start = performance.now();
    const hostile = { args: { name: `${"a".repeat(32)}!` } };
    expect(evaluate('args.name.matches("^(a+)+$")', hostile)).toEqual({ ok: true, value: false });
    // A backtracking engine takes minutes on 32 characters (seconds on 25); V8's linear engine milliseconds.
    expect(performance.now() - start).toBeLessThan(1_000);
  });
});

const ZONED_ACCESSORS = ["getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getHours", "getMinutes", "getSeconds", "getMilliseconds"] as const;
type Accessor = (typeof ZONED_ACCESSORS)[number];

/** CEL's accessors for `d` in `timeZone`, from a formatter built for this one call: independent of zoned-time.ts's cache and text reading. */
function reference(d: Date, timeZone: string): Record<Accessor, number> {
  const parts: Record<string, string> = {};
  const format = new Intl.DateTimeFormat("en-US", { timeZone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric", weekday: "short" });
  for (const part of format.formatToParts(d)) parts[part.type] = part.value;
  const [year, month, day] = [Number(parts.year), Number(parts.month), Number(parts.day)];
  return {
    getFullYear: year,
    getMonth: month - 1,
    getDate: day,
    getDayOfMonth: day - 1,
    getDayOfWeek: ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"].indexOf(parts.weekday!),
    getDayOfYear: Math.round((Date.UTC(year, month - 1, day) - Date.UTC(year, 0, 1)) / 86_400_000),
    getHours: Number(parts.hour),
    getMinutes: Number(parts.minute),
    getSeconds: Number(parts.second),
    getMilliseconds: d.getUTCMilliseconds(),
  };
}

/** The accessor's value through conditions.ts: `dyn(…)` passes the compiler's bool check, and `run` answers the raw value. */
function zoned(accessor: Accessor, zone: string | undefined, now: Date): number {
  const value = compileCondition(`dyn(now.${accessor}(${zone === undefined ? "" : JSON.stringify(zone)}))`, 0).run(input({ now }));
  expect(typeof value).toBe("bigint");
  return Number(value);
}

/** Instants on both sides of each zone's DST changes in 2026, a year end in a half-hour zone, a leap day. */
const INSTANTS = [
  "2026-03-29T00:59:59.250Z", "2026-03-29T01:00:00Z", // Berlin: 01:59:59 CET, then 03:00 CEST
  "2026-10-25T00:59:59Z", "2026-10-25T01:00:00Z", // Berlin: 02:59:59 CEST, then 02:00 CET
  "2026-03-08T06:59:59Z", "2026-03-08T07:00:00Z", // New York: 01:59:59 EST, then 03:00 EDT
  "2026-11-01T05:59:59Z", "2026-11-01T06:00:00.999Z", // New York: 01:59:59 EDT, then 01:00 EST
  "2026-12-31T18:29:59Z", "2026-12-31T18:30:00Z", // Kolkata: 23:59:59 on the 31st, then 00:00 on 1 January 2027
  "2028-02-29T20:00:00Z", "2026-07-01T00:30:00Z",
].map((iso) => new Date(iso));
const ZONES = ["Europe/Berlin", "America/New_York", "Asia/Kolkata", "UTC"];

/** The same expression through the library alone (its toLocaleString per call). */
const library = new Environment().registerVariable("now", "google.protobuf.Timestamp");

describe("timestamp accessors with a time zone: one cached formatter per zone, CEL's values", () => {
  const processZone = process.env.TZ;
  afterEach(() => {
    if (processZone === undefined) delete process.env.TZ;
    else process.env.TZ = processZone;
    vi.restoreAllMocks();
  });

  it("across the DST changes of Berlin and New York and in Kolkata's half-hour zone, each accessor equals Intl's", () => {
    for (const now of INSTANTS) {
      for (const zone of ZONES) {
        const expected = reference(now, zone);
        for (const accessor of ZONED_ACCESSORS) expect([now.toISOString(), zone, accessor, zoned(accessor, zone, now)]).toEqual([now.toISOString(), zone, accessor, expected[accessor]]);
      }
      // Without a zone: UTC.
      for (const accessor of ZONED_ACCESSORS) expect([now.toISOString(), accessor, zoned(accessor, undefined, now)]).toEqual([now.toISOString(), accessor, reference(now, "UTC")[accessor]]);
    }
  });

  it("the hours either side of each change, written out", () => {
    const hours = (zone: string, iso: string) => zoned("getHours", zone, new Date(iso));
    expect([hours("Europe/Berlin", "2026-03-29T00:59:59Z"), hours("Europe/Berlin", "2026-03-29T01:00:00Z")]).toEqual([1, 3]);
    expect([hours("Europe/Berlin", "2026-10-25T00:59:59Z"), hours("Europe/Berlin", "2026-10-25T01:00:00Z")]).toEqual([2, 2]);
    expect([hours("America/New_York", "2026-03-08T06:59:59Z"), hours("America/New_York", "2026-03-08T07:00:00Z")]).toEqual([1, 3]);
    expect([hours("America/New_York", "2026-11-01T05:59:59Z"), hours("America/New_York", "2026-11-01T06:00:00Z")]).toEqual([1, 1]);
    const kolkata = new Date("2026-12-31T18:30:00Z");
    expect(["getFullYear", "getMonth", "getDate", "getDayOfYear", "getDayOfWeek", "getHours", "getMinutes"].map((a) => zoned(a as Accessor, "Asia/Kolkata", kolkata))).toEqual([2027, 0, 1, 0, 5, 0, 0]);
  });

  it("agrees with the library's own accessors in a process on UTC, and no longer calls toLocaleString per call", () => {
    process.env.TZ = "UTC";
    const now = new Date("2026-03-29T01:00:00Z");
    for (const zone of ZONES) {
      for (const accessor of ZONED_ACCESSORS) {
        const theirs = Number(library.evaluate(`now.${accessor}(${JSON.stringify(zone)})`, { now }));
        expect([zone, accessor, zoned(accessor, zone, now)]).toEqual([zone, accessor, theirs]);
      }
    }
    const toLocaleString = vi.spyOn(Date.prototype, "toLocaleString");
    expect(evaluate('now.getHours("Europe/Berlin") == 3 && now.getDayOfWeek("America/New_York") == 6', { now })).toEqual({ ok: true, value: true });
    expect(toLocaleString).not.toHaveBeenCalled();
  });

  it("does not depend on the process's own zone (the library's getDayOfYear loses a day in summer under one with DST)", () => {
    process.env.TZ = "America/New_York";
    const july = new Date("2026-07-01T12:00:00Z");
    expect(Number(library.evaluate("now.getDayOfYear()", { now: july }))).toBe(180);
    expect([zoned("getDayOfYear", undefined, july), zoned("getDayOfYear", "UTC", july), zoned("getDayOfYear", "Europe/Berlin", july)]).toEqual([181, 181, 181]);
    for (const now of INSTANTS) for (const zone of ZONES) expect([now.toISOString(), zone, zoned("getHours", zone, now)]).toEqual([now.toISOString(), zone, reference(now, zone).getHours]);
  });

  it("an unknown zone is an error for every accessor, for the rule to fail closed on", () => {
    for (const accessor of ZONED_ACCESSORS) {
      expect(evaluate(`now.${accessor}("Mars/Olympus_Mons") == 1`, {})).toEqual({ ok: false, error: "rules[0].when: invalid time zone specified: Mars/Olympus_Mons at 1:1" });
    }
    expect(evaluate("now.getHours(args.tz) == 5", { args: { tz: "Asia/Kolkata" }, now: new Date("2026-12-07T23:40:00Z") })).toEqual({ ok: true, value: true });
    expect(evaluate("now.getHours(args.tz) == 5", { args: { tz: "" } })).toMatchObject({ ok: false, error: expect.stringContaining("invalid time zone specified") });
    // A zone name of another type names the function as written.
    expect(evaluate("now.getHours(args.tz) == 5", { args: { tz: 5 } })).toEqual({ ok: false, error: "rules[0].when: found no matching overload for 'google.protobuf.Timestamp.getHours(double)' at 1:1" });
  });

  it("the names of the cached-formatter overloads cannot be written in a condition", () => {
    expect(refusal('now.getHours@zone("UTC") == 1')).toMatch(/^invalid_argument: rules\[2\]\.when: unexpected character: @ at 1:13 /);
  });

  it("the formatted text and the formatter's parts read the same wall clock", () => {
    for (const zone of [...ZONES, "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Chatham"]) {
      const format = new Intl.DateTimeFormat("en-US", { timeZone: zone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric" });
      for (const now of INSTANTS) expect(wallFields(format, now.getTime(), "text")).toEqual(wallFields(format, now.getTime(), "parts"));
    }
  });
});
