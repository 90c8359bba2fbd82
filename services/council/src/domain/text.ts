import { type Phase } from "./phases.js";
import { type Ruleset } from "./ruleset.js";

/** What a piece of stored text is, which decides how a breach of it is named. */
export type SegmentKind = "task" | "constraint" | "claim" | "decision" | "question" | "alternative" | "text";

/** One string of the session with where it lives ("design.approaches[0].description"). */
export interface Segment {
  /** The phase that wrote it, "task" for the task and its context, "claim" for a claim under verification. */
  origin: Phase | "task" | "claim";
  location: string;
  kind: SegmentKind;
  text: string;
}

const KIND_BY_FIELD: Record<string, SegmentKind> = {
  constraints: "constraint",
  claims: "claim",
  decisions: "decision",
  criticalQuestions: "question",
};

/**
 * Flattens a phase output into its strings, each with its field path and kind. The approaches a
 * design did not recommend are "alternative": described, not asserted.
 */
export function segmentsOf(phase: Phase, output: object): Segment[] {
  const out: Segment[] = [];
  const recommended = "recommended" in output && typeof output.recommended === "string" ? output.recommended : undefined;
  const walk = (value: unknown, location: string, kind: SegmentKind): void => {
    if (typeof value === "string") out.push({ origin: phase, location, kind, text: value });
    else if (Array.isArray(value)) value.forEach((v, i) => walk(v, `${location}[${i}]`, kind));
    else if (typeof value === "object" && value !== null) {
      for (const [key, v] of Object.entries(value)) {
        // A claim's source is a reference, not a statement.
        if (key === "source") continue;
        walk(v, `${location}.${key}`, kind === "text" ? (KIND_BY_FIELD[key] ?? "text") : kind);
      }
    }
  };
  const walkApproaches = (approaches: unknown[]): void => {
    approaches.forEach((a, i) => {
      const name = typeof a === "object" && a !== null && "name" in a ? a.name : undefined;
      const chosen = recommended !== undefined && typeof name === "string" && sameName(name, recommended);
      walk(a, `${phase}.approaches[${i}]`, chosen ? "text" : "alternative");
    });
  };
  for (const [key, v] of Object.entries(output)) {
    if (key === "approaches" && Array.isArray(v)) walkApproaches(v);
    else walk(v, `${phase}.${key}`, KIND_BY_FIELD[key] ?? "text");
  }
  return out;
}

/** Loose match of an approach name ("Logical replication" vs "logical replication with pgcopydb"). */
export function sameName(a: string, b: string): boolean {
  const x = a.trim().toLowerCase();
  const y = b.trim().toLowerCase();
  return x === y || x.includes(y) || y.includes(x);
}

/** The output's field names a segment's location passes through ("design.approaches[0].cons[1]" → approaches, cons). */
export function fieldsOf(location: string): string[] {
  return location.split(/[.[\]]+/).filter((p) => p.length > 0 && !/^\d+$/.test(p));
}

/** The task and its context as segments, each sentence a constraint the phases must respect. */
export function taskSegments(task: string, context: string | undefined): Segment[] {
  const segs: Segment[] = [{ origin: "task", location: "task", kind: "task", text: task }];
  if (context) segs.push({ origin: "task", location: "context", kind: "task", text: context });
  return segs;
}

/**
 * Splits text into sentences. A dot only ends a sentence before whitespace, so "2.5 GB" and
 * "v1.2" stay whole; line breaks and list bullets end one too.
 */
export function sentences(text: string): string[] {
  return text
    .split(/(?<=[.!?;])\s+|\n+|\s+[-•*]\s+/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** Splits a sentence into clauses, so one clause's subject does not claim another's number. */
export function clauses(sentence: string): string[] {
  return sentence
    .split(/[,;:()]\s*|\s+(?:but|while|whereas|although|however)\s+/i)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** Lower-cases and expands contractions so "won't" and "will not" read the same. */
export function normalise(text: string): string {
  return text
    .toLowerCase()
    .replace(/[’‘]/g, "'")
    .replace(/\bwon't\b/g, "will not")
    .replace(/\bcan't\b/g, "can not")
    .replace(/\bshan't\b/g, "shall not")
    .replace(/n't\b/g, " not")
    // "2 GB" and "2GB" must be the same token for grounding to match them.
    .replace(/(\d)\s+(kb|mb|gb|tb|ms|%)(?![a-z])/g, "$1$2");
}

/** Word tokens of a text (letters, digits, inner hyphens and dots, %). */
export function tokens(text: string): string[] {
  return normalise(text).match(/[a-z0-9%]+(?:[-.][a-z0-9%]+)*/g) ?? [];
}

/** Sets built once per ruleset: the lists are arrays in the ruleset so they read as data. */
interface WordSets {
  stop: Set<string>;
  negation: Set<string>;
  hedge: Set<string>;
}

const wordSetCache = new WeakMap<Ruleset, WordSets>();

/** The ruleset's word lists as sets (cached per ruleset object). */
export function wordSets(r: Ruleset): WordSets {
  let sets = wordSetCache.get(r);
  if (!sets) {
    sets = { stop: new Set(r.text.stopwords), negation: new Set(r.text.negations), hedge: new Set(r.text.hedges) };
    wordSetCache.set(r, sets);
  }
  return sets;
}

/** Tokens that carry meaning: no stopwords and no negations. */
export function contentTokens(text: string, r: Ruleset): string[] {
  const { stop, negation } = wordSets(r);
  return tokens(text).filter((t) => !stop.has(t) && !negation.has(t));
}

/** How many negation words a text holds (an even count cancels out). */
export function negationCount(text: string, r: Ruleset): number {
  const { negation } = wordSets(r);
  return tokens(text).filter((t) => negation.has(t)).length;
}

/** True when the text is a question, a condition or a check rather than an assertion. */
export function isHedged(text: string, r: Ruleset): boolean {
  if (text.trim().endsWith("?")) return true;
  const { hedge } = wordSets(r);
  return tokens(text).some((t) => hedge.has(t));
}

/** True when `haystack` contains the phrase as whole words (case-insensitive). */
export function containsPhrase(haystack: string, phrase: string): boolean {
  const escaped = phrase.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(?:^|[^a-z0-9])${escaped}`, "i").test(normalise(haystack));
}

/** Jaccard similarity of two token lists taken as sets. */
export function jaccard(a: readonly string[], b: readonly string[]): number {
  const sa = new Set(a);
  const sb = new Set(b);
  if (sa.size === 0 && sb.size === 0) return 0;
  let inter = 0;
  for (const t of sa) if (sb.has(t)) inter++;
  return inter / (sa.size + sb.size - inter);
}

/** Shortens a text for a message, keeping whole words. */
export function excerpt(text: string, max = 160): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  const space = cut.lastIndexOf(" ");
  return `${space > max / 2 ? cut.slice(0, space) : cut}…`;
}

/**
 * A deliberately tiny stemmer: enough that "lock", "locks", "locked" and "locking" meet,
 * predictable enough to explain in a message. Numbers and short words stay as they are.
 */
export function stem(token: string): string {
  if (token.length <= 2 || /\d/.test(token)) return token;
  let t = token;
  if ((t.endsWith("ing") && t.length > 4) || (t.endsWith("ed") && t.length > 3)) {
    t = t.slice(0, t.endsWith("ing") ? -3 : -2);
    // "mapped" → "map", "stopping" → "stop"; "rolled" keeps its "ll".
    if (/([b-df-hj-kmnp-rtv-z])\1$/.test(t)) t = t.slice(0, -1);
  } else if (t.endsWith("s") && !t.endsWith("ss") && t.length > 3) t = t.slice(0, -1);
  if (t.endsWith("e") && t.length >= 3) t = t.slice(0, -1);
  return t;
}

/** Stemmed content tokens. */
export function stems(text: string, r: Ruleset): string[] {
  return contentTokens(text, r).map(stem);
}
