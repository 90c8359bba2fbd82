import { z } from "zod";

type Issue = z.core.$ZodIssue;
type Path = readonly PropertyKey[];

/** At most this many problems are spelled out; the rest are counted. */
const MAX_PROBLEMS = 10;

/**
 * `action.notional`, `claims[0].text`; `root` names the value itself (an empty path). A path
 * longer than `limit` segments (a depth bomb's) is cut to its start, where the caller can look.
 */
export function formatIssuePath(path: Path, root: string, limit = Infinity): string {
  let out = "";
  for (const key of path.slice(0, limit)) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return path.length > limit ? `${out}…` : out || root;
}

function join(prefix: Path, path: Path): Path {
  return prefix.length === 0 ? path : [...prefix, ...path];
}

/** What a value is, in the words of a JSON Schema. */
function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  return typeof value;
}

/** A number by its value (short, and what a bound is about); anything else by its type. */
function got(value: unknown): string {
  return typeof value === "number" ? String(value) : typeOf(value);
}

function quoted(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 40 ? `${text.slice(0, 39)}…` : text;
}

const TYPE_NAMES: Record<string, string> = { int: "integer", record: "object", map: "object" };

/** String checks whose zod message already says what is expected ("must start with …"). */
const TEXT_CHECKS = new Set(["starts_with", "ends_with", "includes", "lowercase", "uppercase"]);

function typeName(expected: string): string {
  return TYPE_NAMES[expected] ?? expected;
}

/** Whether zod wrote the issue's message itself (then ours is clearer) or the schema gave one. */
function hasDefaultMessage(issue: Issue): boolean {
  const fallback = z.core.config().localeError?.(issue as never);
  const text = typeof fallback === "string" ? fallback : fallback?.message;
  return text === undefined || text === issue.message;
}

function bound(issue: Extract<Issue, { code: "too_big" | "too_small" }>): string {
  const big = issue.code === "too_big";
  const limit = big ? (issue as { maximum: number | bigint }).maximum : (issue as { minimum: number | bigint }).minimum;
  const inclusive = issue.inclusive !== false;
  const input = (issue as { input?: unknown }).input;
  const size = (unit: string, length: number | undefined) =>
    `expected ${big ? "at most" : "at least"} ${String(limit)} ${unit}${limit === 1 ? "" : "s"}${length === undefined ? "" : `, got ${length}`}`;
  switch (issue.origin) {
    case "string":
      return size("character", typeof input === "string" ? [...input].length : undefined);
    case "array":
    case "set":
      return size("item", Array.isArray(input) ? input.length : undefined);
    default: {
      const relation = big ? (inclusive ? "at most" : "less than") : inclusive ? "at least" : "more than";
      return `expected ${relation} ${String(limit)}${input === undefined ? "" : `, got ${got(input)}`}`;
    }
  }
}

interface Shape {
  type?: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  getter?: () => z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  valueType?: z.ZodType;
  items?: z.ZodType[];
  options?: z.ZodType[];
}

const defOf = (schema: z.ZodType): Shape => (schema as unknown as { def: Shape }).def;

function unwrap(schema: z.ZodType): z.ZodType {
  for (let s = schema; ; ) {
    const def = defOf(s);
    const inner = def.innerType ?? def.in ?? (def.type === "lazy" ? def.getter?.() : undefined);
    if (!inner) return s;
    s = inner;
  }
}

function childOf(schema: z.ZodType, key: PropertyKey): z.ZodType | undefined {
  const def = defOf(unwrap(schema));
  switch (def.type) {
    case "object":
      return typeof key === "string" ? def.shape?.[key] : undefined;
    case "array":
      return def.element;
    case "record":
      return def.valueType;
    case "tuple":
      return typeof key === "number" ? def.items?.[key] : undefined;
    case "union":
      for (const option of def.options ?? []) {
        const child = childOf(option, key);
        if (child) return child;
      }
      return undefined;
    default:
      return undefined;
  }
}

/** The fields the object at `path` of `schema` accepts, when that is an object. */
function fieldsAt(schema: z.ZodType | undefined, path: Path): string[] | undefined {
  let s = schema;
  for (const key of path) s = s && childOf(s, key);
  if (!s) return undefined;
  const def = defOf(unwrap(s));
  return def.type === "object" && def.shape ? Object.keys(def.shape) : undefined;
}

/** The alternative of a union the value came closest to: one that failed inside the value, with the fewest problems. */
function closestAlternative(alternatives: readonly Issue[][]): Issue[] | undefined {
  const inside = alternatives.filter((a) => a.length > 0 && a.every((i) => i.path.length > 0));
  const pool = inside.length > 0 ? inside : alternatives;
  return [...pool].sort((a, b) => a.length - b.length)[0];
}

function describe(issue: Issue, prefix: Path, schema: z.ZodType | undefined, root: string, out: string[]): void {
  const path = join(prefix, issue.path);
  const at = formatIssuePath(path, root);
  const input = (issue as { input?: unknown }).input;
  switch (issue.code) {
    case "invalid_type": {
      const expected = typeName(issue.expected);
      // An integer field given 1.5 is about the value; a string field given 12 is about the type.
      const what = typeof input === "number" && issue.expected === "int" ? got(input) : typeOf(input);
      out.push(input === undefined ? `${at}: required, expected ${expected}` : `${at}: expected ${expected}, got ${what}`);
      return;
    }
    case "invalid_union": {
      const alternatives = issue.errors;
      const typesOnly =
        alternatives.length > 0 &&
        alternatives.every((a) => a.length === 1 && a[0]!.code === "invalid_type" && a[0]!.path.length === 0);
      if (typesOnly) {
        const expected = [...new Set(alternatives.map((a) => typeName((a[0] as { expected: string }).expected)))].join(" or ");
        out.push(input === undefined ? `${at}: required, expected ${expected}` : `${at}: expected ${expected}, got ${typeOf(input)}`);
        return;
      }
      const closest = closestAlternative(alternatives);
      if (!closest) {
        out.push(`${at}: matches none of the accepted forms`);
        return;
      }
      for (const inner of closest) describe(inner, path, schema, root, out);
      return;
    }
    case "unrecognized_keys": {
      const accepted = fieldsAt(schema, path);
      const hint = accepted && accepted.length > 0 ? `; accepted fields: ${accepted.join(", ")}` : "";
      for (const key of issue.keys) out.push(`${formatIssuePath(join(path, [key]), root)}: unknown field${hint}`);
      return;
    }
    case "too_big":
    case "too_small":
      out.push(`${at}: ${hasDefaultMessage(issue) ? bound(issue) : issue.message}`);
      return;
    case "invalid_value": {
      const expected = issue.values.length === 1 ? quoted(issue.values[0]) : `one of ${issue.values.map(quoted).join(", ")}`;
      out.push(input === undefined ? `${at}: required, expected ${expected}` : `${at}: expected ${expected}, got ${quoted(input)}`);
      return;
    }
    case "invalid_format": {
      if (!hasDefaultMessage(issue)) out.push(`${at}: ${issue.message}`);
      else if (issue.format === "regex") out.push(`${at}: expected text matching ${(issue as { pattern?: string }).pattern ?? "the pattern"}`);
      else if (TEXT_CHECKS.has(issue.format)) out.push(`${at}: ${issue.message.replace(/^Invalid string: /, "")}`);
      else out.push(`${at}: expected a valid ${issue.format}`);
      return;
    }
    case "not_multiple_of":
      out.push(`${at}: expected a multiple of ${String(issue.divisor)}`);
      return;
    case "invalid_key": {
      // zod puts the key itself at the end of the path; the problem belongs to the object.
      const owner = formatIssuePath(path[path.length - 1] === input ? path.slice(0, -1) : path, root);
      for (const inner of issue.issues) {
        const sub: string[] = [];
        describe(inner, [], undefined, `field name ${quoted(input)}`, sub);
        for (const line of sub) out.push(`${owner}: ${line}`);
      }
      return;
    }
    default:
      out.push(`${at}: ${issue.message}`);
  }
}

/**
 * One line per problem of a failed zod parse, each naming the field at its real depth and what
 * it expects, never zod's raw issue dump: `action.notional: expected number, got string`,
 * `key: required, expected string`, `tags: expected at most 32 items, got 40`,
 * `bogus: unknown field; accepted fields: key, value`. A message the schema wrote itself (a
 * refinement, a custom bound) is kept. Parse with `{ reportInput: true }`, or a value that is
 * present cannot be told from a missing one. `schema` (the one parsed) lets an unknown field list
 * the accepted ones; `root` names the value itself when an issue has an empty path.
 */
export function describeZodIssues(error: z.ZodError, schema?: z.ZodType, root = "(value)"): string[] {
  const lines: string[] = [];
  for (const issue of error.issues) describe(issue, [], schema, root, lines);
  const distinct = [...new Set(lines)];
  if (distinct.length <= MAX_PROBLEMS) return distinct;
  return [...distinct.slice(0, MAX_PROBLEMS), `… and ${distinct.length - MAX_PROBLEMS} more problems`];
}
