import { z } from "zod";

type Issue = z.core.$ZodIssue;
type Path = readonly PropertyKey[];

/** At most this many problems are spelled out; the rest are counted. */
const MAX_PROBLEMS = 10;

/**
 * `action.notional`, `claims[0].text`; `root` names the value itself (an empty path). A path
 * longer than `limit` segments (a depth bomb's) is cut to its start, where the caller can look.
 * `underRoot` writes every path from the root (`output.summary`, `output[0]`), for a value that
 * is itself a field of what the reader sent.
 */
export function formatIssuePath(path: Path, root: string, limit = Infinity, underRoot = false): string {
  let out = underRoot ? root : "";
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
  out?: z.ZodType;
  getter?: () => z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  valueType?: z.ZodType;
  items?: z.ZodType[];
  options?: z.ZodType[];
}

const defOf = (schema: z.ZodType): Shape => (schema as unknown as { def: Shape }).def;

/** The schema `schema` wraps (optional, default, a pipe, lazy), or undefined when it wraps none. */
function wrapped(schema: z.ZodType): z.ZodType | undefined {
  const def = defOf(schema);
  if (def.innerType) return def.innerType;
  // A pipe's `in` checks the value first, except z.preprocess's, a transform: its `out` checks the result.
  if (def.in) return defOf(def.in).type === "transform" ? def.out : def.in;
  return def.type === "lazy" ? def.getter?.() : undefined;
}

function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (let inner = wrapped(s); inner; inner = wrapped(s)) s = inner;
  return s;
}

const notes = new WeakMap<z.ZodType, string>();

/**
 * Adds `note` to what {@link describeZodIssues} says `schema` expects, for what the schema cannot
 * say itself: `(any case)` after an enumeration a preprocess reads in any case, `(or a plain
 * string)` after the fields of an object a string may stand for. Returns `schema`.
 */
export function withIssueNote<T extends z.ZodType>(schema: T, note: string): T {
  notes.set(schema, note);
  return schema;
}

/** The note of `schema` or of a schema it wraps, with its leading space; empty when none has one. */
function noteOf(schema: z.ZodType | undefined): string {
  for (let s = schema; s; s = wrapped(s)) {
    const note = notes.get(s);
    if (note !== undefined) return ` ${note}`;
  }
  return "";
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

/** The schema at `path` of `schema`, when it can be told. */
function schemaAt(schema: z.ZodType | undefined, path: Path): z.ZodType | undefined {
  let s = schema;
  for (const key of path) s = s && childOf(s, key);
  return s;
}

/** The fields `schema` accepts, when it is an object. */
function fieldsOf(schema: z.ZodType | undefined): string[] | undefined {
  if (!schema) return undefined;
  const def = defOf(unwrap(schema));
  return def.type === "object" && def.shape ? Object.keys(def.shape) : undefined;
}

/** How many single-character edits turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}

/**
 * The accepted name `key` is a typo of: a few edits away, more for longer names ("denyAbove" →
 * "denyAtOrAbove"), or at most `maxEdits` when names share long parts a guess must not bridge.
 */
export function likelyMeant(key: string, accepted: readonly string[], maxEdits?: number): string | undefined {
  // The first of the closest names, each distance computed once.
  let closest: string | undefined;
  let distance = Infinity;
  for (const name of accepted) {
    const d = editDistance(key, name);
    if (d < distance) [closest, distance] = [name, d];
  }
  if (closest === undefined) return undefined;
  return distance <= (maxEdits ?? Math.max(2, Math.floor(closest.length / 3))) ? closest : undefined;
}

/** The alternative of a union the value came closest to: one that failed inside the value, with the fewest problems. */
function closestAlternative(alternatives: readonly Issue[][]): Issue[] | undefined {
  const inside = alternatives.filter((a) => a.length > 0 && a.every((i) => i.path.length > 0));
  const pool = inside.length > 0 ? inside : alternatives;
  return [...pool].sort((a, b) => a.length - b.length)[0];
}

/** How the lines are worded: see {@link describeZodIssues}. */
export interface ZodIssueWording {
  /** Write every path from the root's name (`output.summary`) instead of alone (`summary`). */
  underRoot?: boolean;
  /** Name the accepted field an unknown one is likely a typo of (`did you mean "deniedCapabilities"?`). */
  suggest?: boolean;
}

/** One problem of a failed parse: where (`claims[0].text`; empty for a nameless root) and what. */
export interface ZodProblem {
  readonly path: string;
  readonly message: string;
}

interface Words extends ZodIssueWording {
  root: string;
}

const lineOf = (p: ZodProblem): string => (p.path ? `${p.path}: ${p.message}` : p.message);

function describe(issue: Issue, prefix: Path, schema: z.ZodType | undefined, words: Words, out: ZodProblem[]): void {
  const path = join(prefix, issue.path);
  const pathName = (p: Path) => formatIssuePath(p, words.root, Infinity, words.underRoot);
  const push = (message: string, at = pathName(path)) => out.push({ path: at, message });
  const input = (issue as { input?: unknown }).input;
  const note = () => noteOf(schemaAt(schema, path));
  switch (issue.code) {
    case "invalid_type": {
      // A required field of any type (`z.unknown()`, `z.any()`): zod's "nonoptional" is no type to name.
      if (issue.expected === "nonoptional" && input === undefined) {
        push(`required${note()}`);
        return;
      }
      const expected = `${typeName(issue.expected)}${note()}`;
      // An integer field given 1.5 is about the value; a string field given 12 is about the type.
      const what = typeof input === "number" && issue.expected === "int" ? got(input) : typeOf(input);
      push(input === undefined ? `required, expected ${expected}` : `expected ${expected}, got ${what}`);
      return;
    }
    case "invalid_union": {
      const alternatives = issue.errors;
      const typesOnly =
        alternatives.length > 0 &&
        alternatives.every((a) => a.length === 1 && a[0]!.code === "invalid_type" && a[0]!.path.length === 0);
      if (typesOnly) {
        const types = [...new Set(alternatives.map((a) => typeName((a[0] as { expected: string }).expected)))].join(" or ");
        const expected = `${types}${note()}`;
        push(input === undefined ? `required, expected ${expected}` : `expected ${expected}, got ${typeOf(input)}`);
        return;
      }
      const closest = closestAlternative(alternatives);
      if (!closest) {
        push("matches none of the accepted forms");
        return;
      }
      for (const inner of closest) describe(inner, path, schema, words, out);
      return;
    }
    case "unrecognized_keys": {
      const object = schemaAt(schema, path);
      const accepted = fieldsOf(object) ?? [];
      const hint = accepted.length > 0 ? `; accepted fields: ${accepted.join(", ")}${noteOf(object)}` : "";
      for (const key of issue.keys) {
        const meant = words.suggest ? likelyMeant(key, accepted) : undefined;
        push(`unknown field${meant === undefined ? "" : ` (did you mean "${meant}"?)`}${hint}`, pathName(join(path, [key])));
      }
      return;
    }
    case "too_big":
    case "too_small":
      push(hasDefaultMessage(issue) ? bound(issue) : issue.message);
      return;
    case "invalid_value": {
      const values = issue.values.length === 1 ? quoted(issue.values[0]) : `one of ${issue.values.map(quoted).join(", ")}`;
      const expected = `${values}${note()}`;
      push(input === undefined ? `required, expected ${expected}` : `expected ${expected}, got ${quoted(input)}`);
      return;
    }
    case "invalid_format": {
      if (!hasDefaultMessage(issue)) push(issue.message);
      else if (issue.format === "regex") push(`expected text matching ${(issue as { pattern?: string }).pattern ?? "the pattern"}`);
      else if (TEXT_CHECKS.has(issue.format)) push(issue.message.replace(/^Invalid string: /, ""));
      else push(`expected a valid ${issue.format}`);
      return;
    }
    case "not_multiple_of":
      push(`expected a multiple of ${String(issue.divisor)}`);
      return;
    case "invalid_key": {
      // zod puts the key itself at the end of the path; the problem belongs to the object.
      const owner = pathName(path[path.length - 1] === input ? path.slice(0, -1) : path);
      for (const inner of issue.issues) {
        const sub: ZodProblem[] = [];
        describe(inner, [], undefined, { root: `field name ${quoted(input)}` }, sub);
        for (const problem of sub) push(lineOf(problem), owner);
      }
      return;
    }
    default:
      push(issue.message);
  }
}

/**
 * Every problem of a failed zod parse, each once, as {@link describeZodIssues} words it, with its
 * path apart (for a caller that keeps them as data). None is left out.
 */
export function zodProblems(error: z.ZodError, schema?: z.ZodType, root = "(value)", wording: ZodIssueWording = {}): ZodProblem[] {
  const problems: ZodProblem[] = [];
  for (const issue of error.issues) describe(issue, [], schema, { ...wording, root }, problems);
  // Alternatives of a union can say one thing twice.
  const byLine = new Map<string, ZodProblem>();
  for (const p of problems) if (!byLine.has(lineOf(p))) byLine.set(lineOf(p), p);
  return [...byLine.values()];
}

/**
 * One line per problem of a failed zod parse, each naming the field at its real depth and what
 * it expects, never zod's raw issue dump: `action.notional: expected number, got string`,
 * `key: required, expected string`, `tags: expected at most 32 items, got 40`,
 * `bogus: unknown field; accepted fields: key, value`. A message the schema wrote itself (a
 * refinement, a custom bound) is kept, and a note given with {@link withIssueNote} is added to
 * what its schema expects. Parse with `{ reportInput: true }`, or a value that is present cannot
 * be told from a missing one. `schema` (the one parsed) lets an unknown field list the accepted
 * ones; `root` names the value itself when an issue has an empty path (an empty `root`: the
 * line is the problem alone). See {@link ZodIssueWording} for the rest.
 */
export function describeZodIssues(error: z.ZodError, schema?: z.ZodType, root = "(value)", wording: ZodIssueWording = {}): string[] {
  const lines = zodProblems(error, schema, root, wording).map(lineOf);
  if (lines.length <= MAX_PROBLEMS) return lines;
  return [...lines.slice(0, MAX_PROBLEMS), `… and ${lines.length - MAX_PROBLEMS} more problems`];
}
