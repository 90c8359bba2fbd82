import { type Phase } from "./phases.js";
import { type Ruleset } from "./ruleset.js";
import { excerpt, type Segment, sentences } from "./text.js";

/** Output that steps outside the persona's authority, with the phrase that gave it away. */
export interface AuthorityViolation {
  phase: Phase;
  /** The not-authority rule broken ("No solutions"). */
  rule: string;
  /** The exact phrase that matched. */
  phrase: string;
  location: string;
  sentence: string;
}

const regexCache = new WeakMap<Ruleset, Map<string, RegExp>>();

function regex(source: string, r: Ruleset): RegExp {
  let map = regexCache.get(r);
  if (!map) regexCache.set(r, (map = new Map()));
  let re = map.get(source);
  if (!re) map.set(source, (re = new RegExp(source, "i")));
  return re;
}

/**
 * Finds sentences of a phase output that break the persona's not-authority rules. Questions are
 * skipped: asking "should we use logical replication?" is the analyst's job; answering it is not.
 */
export function findAuthorityViolations(phase: Phase, segments: readonly Segment[], r: Ruleset): AuthorityViolation[] {
  const out: AuthorityViolation[] = [];
  for (const seg of segments) {
    if (seg.kind === "question") continue;
    for (const sentence of sentences(seg.text)) {
      if (sentence.endsWith("?")) continue;
      for (const rule of r.authority[phase].rules) {
        for (const pattern of rule.patterns) {
          const m = regex(pattern, r).exec(sentence);
          if (!m) continue;
          out.push({ phase, rule: rule.rule, phrase: m[0].trim(), location: seg.location, sentence: excerpt(sentence) });
          break;
        }
      }
    }
  }
  return out;
}
