import { ChaosError } from "@chaos-core/kit";
import type { AIProvider, JsonRequest, JsonResult, TextRequest, TextResult } from "./ai-provider.js";
import { parseObjective, type ParsedObjective } from "./objective-parser.js";

/** What the heuristic provider ranks: a capability as the registry describes it. */
export interface CapabilityDescriptor {
  readonly name: string;
  readonly description: string;
}

/** One ranked capability; `score` is its BM25 relevance to the objective (always > 0). */
export interface RankedCapability {
  readonly name: string;
  readonly score: number;
}

/** The model name the heuristic provider reports: it uses none. */
export const NO_MODEL = "none";

// Standard BM25 parameters (Robertson & Zaragoza); the corpus is a few dozen short descriptions,
// so there is nothing to tune against.
const K1 = 1.2;
const B = 0.75;

// Words that carry no meaning for matching an objective to a capability.
const STOPWORDS = new Set(
  "a an and are as at be by can do for from get how i in into is it me my of on or our please that the then this to up use using via we what when with you your"
    .split(" "),
);

/**
 * Lower-cases, splits on anything that is not a letter or digit (so `http.request` and
 * `memory_recall` split too), drops stopwords and strips a few English suffixes so that
 * "requests", "requested" and "request" meet.
 */
export function tokenize(text: string): string[] {
  const tokens: string[] = [];
  for (const word of text.toLowerCase().split(/[^\p{L}\p{N}]+/u)) {
    if (word === "" || STOPWORDS.has(word)) continue;
    tokens.push(stem(word));
  }
  return tokens;
}

function stem(word: string): string {
  for (const suffix of ["ing", "ed", "es", "s"]) {
    if (word.length > suffix.length + 3 && word.endsWith(suffix)) return word.slice(0, -suffix.length);
  }
  return word;
}

/**
 * Ranks capability descriptors against an objective with BM25 over name and description (the
 * name counted twice, because it is the most deliberate summary a capability has). Pure and
 * deterministic: equal scores are ordered by name, so the input order never matters. Returns at
 * most `k` capabilities, only those sharing at least one term with the objective, and only names
 * from `descriptors`.
 */
export function rankCapabilities(
  objective: string,
  descriptors: readonly CapabilityDescriptor[],
  k: number,
): RankedCapability[] {
  if (!Number.isInteger(k) || k < 0) throw new ChaosError("invalid_argument", `k must be a whole number >= 0, got ${k}`);
  const seen = new Set<string>();
  for (const d of descriptors) {
    if (seen.has(d.name)) throw new ChaosError("invalid_argument", `capability ${d.name} is listed twice`);
    seen.add(d.name);
  }
  const query = [...new Set(tokenize(objective))];
  if (query.length === 0 || descriptors.length === 0 || k === 0) return [];

  const docs = descriptors.map((d) => {
    const nameTokens = tokenize(d.name);
    const tokens = [...nameTokens, ...nameTokens, ...tokenize(d.description)];
    const tf = new Map<string, number>();
    for (const t of tokens) tf.set(t, (tf.get(t) ?? 0) + 1);
    return { name: d.name, length: tokens.length, tf };
  });
  const n = docs.length;
  // Integer sums, so the average is identical whatever order the descriptors came in.
  const avgLength = docs.reduce((sum, d) => sum + d.length, 0) / n || 1;
  const idf = new Map<string, number>();
  for (const term of query) {
    const df = docs.filter((d) => d.tf.has(term)).length;
    // The "+1" form keeps idf positive even for a term found in every description.
    idf.set(term, Math.log(1 + (n - df + 0.5) / (df + 0.5)));
  }

  const ranked: RankedCapability[] = [];
  for (const doc of docs) {
    let score = 0;
    for (const term of query) {
      const f = doc.tf.get(term);
      if (f === undefined) continue;
      score += ((idf.get(term) ?? 0) * f * (K1 + 1)) / (f + K1 * (1 - B + (B * doc.length) / avgLength));
    }
    if (score > 0) ranked.push({ name: doc.name, score });
  }
  ranked.sort((a, b) => b.score - a.score || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return ranked.slice(0, k);
}

/**
 * The offline provider: no model, no network, same input → same output. It reads everyday
 * objectives with a deterministic parser ({@link HeuristicProvider.parse}: remember, ask, list,
 * forget, fetch, and compositions of those), and grounds anything else by ranking capability
 * descriptions against the objective ({@link HeuristicProvider.rank}). It does
 * not pretend to be a model: `generateText` answers that no text was generated, and
 * `generateJson` refuses with `failed_precondition`, because the shapes the planner asks for
 * cannot be produced honestly without one.
 */
export class HeuristicProvider implements AIProvider {
  readonly id = "heuristic";
  readonly displayName = "Heuristic (offline, no model)";
  readonly model = null;

  isConfigured(): boolean {
    return true;
  }

  /** The offline reading of an everyday objective; see {@link parseObjective}. */
  parse(objective: string): ParsedObjective {
    return parseObjective(objective);
  }

  /** See {@link rankCapabilities}. */
  rank(objective: string, descriptors: readonly CapabilityDescriptor[], k: number): RankedCapability[] {
    return rankCapabilities(objective, descriptors, k);
  }

  async generateText(_request: TextRequest): Promise<TextResult> {
    return {
      text:
        "No language model was used: Chaos Core is running with the heuristic provider, which does not generate text. " +
        "To enable generation, set CHAOS_CORE_PROVIDER=openai (with OPENAI_API_KEY and OPENAI_MODEL) or " +
        "CHAOS_CORE_PROVIDER=openai-compatible (with OPENAI_BASE_URL and OPENAI_MODEL).",
      model: NO_MODEL,
      providerId: this.id,
    };
  }

  async generateJson(_request: JsonRequest): Promise<JsonResult> {
    throw new ChaosError(
      "failed_precondition",
      "the heuristic provider uses no model and does not generate free JSON; use rank() to ground a plan in capabilities",
    );
  }
}
