import { type Phase } from "./phases.js";
import { type ComplexityLevel, type Depth, type Ruleset } from "./ruleset.js";
import { containsPhrase } from "./text.js";

/** How complex a task is, why, and the pipeline that follows from it. */
export interface ComplexityAssessment {
  score: number;
  level: ComplexityLevel;
  depth: Depth;
  pipeline: Phase[];
  reasons: {
    baseline: number;
    keywords: { matched: string[]; points: number };
    domains: { matched: string[]; points: number };
    numbers: { matched: string[]; points: number };
  };
  explanation: string;
}

/** A number, optionally with a unit or a percent sign ("2GB", "30 minutes", "99.9%"). */
const NUMBER_RE = /\d+(?:[.,]\d+)*(?:\s*(?:%|[a-z]+))?/gi;

/**
 * Scores a task's complexity from its text alone: a baseline, points per distinct keyword,
 * a boost per domain touched, and points per number (a quantity is a requirement to meet).
 * Each part is capped so a long list of buzzwords cannot reach "complex" by itself.
 */
export function assessComplexity(text: string, r: Ruleset): ComplexityAssessment {
  const c = r.complexity;
  const keywords = c.keywords.filter((k) => containsPhrase(text, k));
  const keywordPoints = Math.min(keywords.length * c.keywordWeight, c.maxKeywordPoints);
  const domains = Object.entries(c.domains)
    .filter(([, words]) => words.some((w) => containsPhrase(text, w)))
    .map(([name]) => name)
    .sort();
  const domainPoints = domains.length * c.domainBoost;
  const numbers = text.match(NUMBER_RE) ?? [];
  const numberPoints = Math.min(numbers.length * c.numberWeight, c.maxNumberPoints);
  const score = Math.min(100, c.baseline + keywordPoints + domainPoints + numberPoints);
  const level: ComplexityLevel = score <= c.simpleMax ? "simple" : score <= c.moderateMax ? "moderate" : "complex";
  const depth = r.depthOf[level];
  const pipeline = [...r.pipelines[depth]];
  const parts = [`baseline ${c.baseline}`];
  if (keywords.length) parts.push(`keywords ${keywords.join(", ")} +${keywordPoints}`);
  if (domains.length) parts.push(`domains ${domains.join(", ")} +${domainPoints}`);
  if (numbers.length) parts.push(`numbers ${numbers.join(", ")} +${numberPoints}`);
  return {
    score,
    level,
    depth,
    pipeline,
    reasons: {
      baseline: c.baseline,
      keywords: { matched: keywords, points: keywordPoints },
      domains: { matched: domains, points: domainPoints },
      numbers: { matched: numbers, points: numberPoints },
    },
    explanation: `Complexity score ${score}/100 (${level}) from ${parts.join("; ")}. Pipeline: ${depth} (${pipeline.join(" → ")}).`,
  };
}
