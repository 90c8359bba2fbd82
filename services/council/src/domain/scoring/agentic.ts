import { type Ruleset } from "../ruleset.js";
import { containsPhrase } from "../text.js";
import { type DimensionResult, type PhaseContext, share } from "./checklist.js";

/**
 * Agentic: the output speaks as its persona (identity keywords) and stays inside its
 * authority. Each violation costs the ruleset's penalty and is named with its phrase.
 */
export function scoreAgentic(ctx: PhaseContext, r: Ruleset): DimensionResult {
  const a = r.agentic;
  const text = ctx.segments.map((s) => s.text).join("\n");
  const hits = r.authority[ctx.phase].identityKeywords.filter((k) => containsPhrase(text, k));
  const identity = hits.length >= a.minIdentityHits;
  const authorityPoints = Math.max(0, 100 - a.identityPoints - ctx.violations.length * a.violationPenalty);
  const passed: string[] = [];
  const failed: string[] = [];
  const improve: string[] = [];
  const identityLabel = `speaks as the persona (${hits.length} identity keyword(s): ${hits.join(", ") || "none"})`;
  if (identity) passed.push(identityLabel);
  else {
    failed.push(identityLabel);
    improve.push(`Work as the persona: address ${r.authority[ctx.phase].identityKeywords.slice(0, 4).join(", ")}.`);
  }
  if (ctx.violations.length === 0) passed.push("stays within the persona's authority");
  for (const v of ctx.violations) {
    failed.push(`authority violation (${v.rule}): "${v.phrase}" at ${v.location}`);
    improve.push(`Remove "${v.phrase}" from ${v.location}: ${v.rule.toLowerCase()} in the ${ctx.phase} phase.`);
  }
  return {
    score: Math.round((identity ? a.identityPoints : 0) + authorityPoints),
    weight: share(r, "agentic"),
    passed,
    failed,
    improve,
    details: { violations: ctx.violations, identityKeywords: hits },
  };
}
