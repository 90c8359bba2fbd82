import { ChaosError } from "@chaos-core/kit";
import { tokenize } from "./tokens.js";

// Ranking capabilities against an objective (docs/federation-platform.md §4): what the heuristic
// planner and intent use, and what gives a model planner its shortlist.

/** What is ranked: a capability as the registry describes it; an upstream tool's title too. */
export interface CapabilityDescriptor {
  readonly name: string;
  readonly description: string;
  readonly title?: string;
}

/** One ranked capability; `score` is its BM25 relevance to the objective (always > 0). */
export interface RankedCapability {
  readonly name: string;
  readonly score: number;
}

// BM25F (Robertson, Zaragoza & Taylor): per-field weights and length normalization, one saturation.
const K1 = 1.2;

/**
 * Each field's weight and length normalization. The name is the most deliberate summary a
 * capability has; the title next. A description counts each distinct term once, normalized fully
 * by its number of distinct terms: upstream descriptions are untrusted, and one written to win
 * every ranking — a word repeated, or the whole vocabulary — spreads what it can earn over all of
 * it, so it gains no more than an honest one.
 */
const FIELDS = {
  name: { weight: 3, b: 0.75 },
  title: { weight: 2, b: 0.75 },
  description: { weight: 1, b: 1 },
} as const;
type Field = keyof typeof FIELDS;

/** The share of the best score below which a capability is not ranked at all. */
const RELATIVE_FLOOR = 0.4;

/** Words that name the same thing to a person asking (after {@link rankingTerm}): each to one. */
const SAME_MEANING: Readonly<Record<string, string>> = {
  folder: "directory",
  dir: "directory",
  find: "search",
  locat: "search",
  lookup: "search",
  remov: "delet",
  eras: "delet",
};

/**
 * One word as the ranking compares it: {@link tokenize}'s stem, a final `i` read as `y`
 * (`directori` from "directories" meets "directory") and a final `e` dropped ("create" meets
 * "created"), then {@link SAME_MEANING}.
 */
function rankingTerm(stemmed: string): string {
  let t = stemmed.length > 3 && stemmed.endsWith("i") ? `${stemmed.slice(0, -1)}y` : stemmed;
  if (t.length > 3 && t.endsWith("e")) t = t.slice(0, -1);
  return SAME_MEANING[t] ?? t;
}

const terms = (text: string) => tokenize(text).map(rankingTerm);

/** A descriptor's term frequencies and length, per field. */
interface Document {
  readonly capability: string;
  readonly fields: Record<Field, { tf: Map<string, number>; length: number }>;
}

function fieldOf(list: readonly string[]): { tf: Map<string, number>; length: number } {
  const tf = new Map<string, number>();
  for (const t of list) tf.set(t, (tf.get(t) ?? 0) + 1);
  return { tf, length: list.length };
}

function documentOf(d: CapabilityDescriptor): Document {
  return {
    capability: d.name,
    fields: { name: fieldOf(terms(d.name)), title: fieldOf(terms(d.title ?? "")), description: fieldOf([...new Set(terms(d.description))]) },
  };
}

/**
 * Ranks capability descriptors against an objective with BM25 over their fields — the name
 * counted three times, the title twice, each of the description's distinct terms once, normalized
 * by how many it has ({@link FIELDS}) — and IDF over the descriptors given (the caller's
 * catalogue). Pure and deterministic: equal scores are ordered by name, so the input order never
 * matters. Returns at most `k` capabilities, only those sharing at least one term with the
 * objective, and only names from `descriptors`.
 */
export function rankCapabilities(objective: string, descriptors: readonly CapabilityDescriptor[], k: number): RankedCapability[] {
  if (!Number.isInteger(k) || k < 0) throw new ChaosError("invalid_argument", `k must be a whole number >= 0, got ${k}`);
  const seen = new Set<string>();
  for (const d of descriptors) {
    if (seen.has(d.name)) throw new ChaosError("invalid_argument", `capability ${d.name} is listed twice`);
    seen.add(d.name);
  }
  const query = [...new Set(terms(objective))];
  if (query.length === 0 || descriptors.length === 0 || k === 0) return [];

  const docs = descriptors.map(documentOf);
  const n = docs.length;
  // Integer sums, so the averages are identical whatever order the descriptors came in.
  const avg = Object.fromEntries((Object.keys(FIELDS) as Field[]).map((f) => [f, docs.reduce((sum, d) => sum + d.fields[f].length, 0) / n || 1])) as Record<Field, number>;
  const idf = new Map<string, number>();
  for (const term of query) {
    const df = docs.filter((d) => (Object.keys(FIELDS) as Field[]).some((f) => d.fields[f].tf.has(term))).length;
    // The "+1" form keeps idf positive even for a term found in every description.
    idf.set(term, Math.log(1 + (n - df + 0.5) / (df + 0.5)));
  }

  const ranked: RankedCapability[] = [];
  for (const doc of docs) {
    let score = 0;
    for (const term of query) {
      let tf = 0;
      for (const f of Object.keys(FIELDS) as Field[]) {
        const count = doc.fields[f].tf.get(term);
        if (count === undefined) continue;
        const { weight, b } = FIELDS[f];
        tf += (weight * count) / (1 - b + (b * doc.fields[f].length) / avg[f]);
      }
      if (tf > 0) score += ((idf.get(term) ?? 0) * tf * (K1 + 1)) / (tf + K1);
    }
    if (score > 0) ranked.push({ name: doc.capability, score });
  }
  ranked.sort((a, b) => b.score - a.score || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // Only what is plausibly relevant: a capability scoring a small part of the best one's matched
  // a word or two in passing (a stuffed description earns no more than that).
  const floor = (ranked[0]?.score ?? 0) * RELATIVE_FLOOR;
  return ranked.filter((r) => r.score >= floor).slice(0, k);
}
