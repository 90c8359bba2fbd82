/**
 * An upstream tool's input read from an objective, offline (docs/federation-platform.md §4): what
 * the heuristic planner fills in when it plans an upstream tool it ranked, from the tool's pinned
 * input schema. Only what the objective says plainly: no required field → `{}`; a required string
 * whose name says path, file or directory ← the objective's one path; url/uri/link ← its one URL;
 * another single required string ← its one quoted text; required numbers ← its numbers, in order,
 * when there are exactly as many. Anything else (a required field it cannot fill, or two
 * candidates for one) → undefined: the planner leaves the tool to a model or a person, rather than
 * guess. The capability's own validation checks what this returns.
 */

interface Property {
  readonly type?: unknown;
}

const PATH_FIELD = /path|file|dir|folder/i;
const URL_FIELD = /url|uri|link|href/i;
const URL_RE = /\bhttps?:\/\/[^\s"'<>]+/g;
// An absolute or ./ relative path, or a file name with an extension.
const PATH_RE = /(?:^|\s)((?:\/|\.\.?\/|~\/)[^\s"'<>]*|[\w.-]+\.[A-Za-z0-9]{1,8})(?=$|[\s,;:!?])/g;
const QUOTED_RE = /"([^"]{1,500})"|'([^']{1,500})'|“([^”]{1,500})”/g;
const NUMBER_RE = /(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])/g;

const typeOf = (p: Property | undefined): string | undefined => (typeof p?.type === "string" ? p.type : undefined);

/** The one match of `re` in `text` (its first group when it has one), or undefined when there are none or several. */
function only(text: string, re: RegExp): string | undefined {
  const found = [...new Set([...text.matchAll(re)].map((m) => (m.slice(1).find((g) => g !== undefined) ?? m[0]).trim()))].filter((s) => s !== "");
  return found.length === 1 ? found[0] : undefined;
}

export function inputFromObjective(schema: Record<string, unknown>, objective: string): Record<string, unknown> | undefined {
  const properties = (typeof schema.properties === "object" && schema.properties !== null ? schema.properties : {}) as Record<string, Property>;
  const required = Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === "string") : [];
  if (required.length === 0) return {};
  const input: Record<string, unknown> = {};
  const withoutUrls = objective.replace(URL_RE, " ");
  const numbers = [...objective.matchAll(NUMBER_RE)].map((m) => Number(m[0]));
  const numeric = required.filter((r) => typeOf(properties[r]) === "number" || typeOf(properties[r]) === "integer");
  if (numeric.length > 0) {
    if (numbers.length !== numeric.length) return undefined;
    numeric.forEach((name, i) => (input[name] = numbers[i]));
  }
  const strings = required.filter((r) => typeOf(properties[r]) === "string");
  if (strings.length + numeric.length !== required.length) return undefined;
  for (const name of strings) {
    const value = URL_FIELD.test(name)
      ? only(objective, URL_RE)
      : PATH_FIELD.test(name)
        ? only(withoutUrls, PATH_RE)
        : strings.length === 1
          ? only(objective, QUOTED_RE)
          : undefined;
    if (value === undefined) return undefined;
    input[name] = value;
  }
  return input;
}
