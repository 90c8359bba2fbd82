import { type Dimension, type Ruleset } from "./ruleset.js";
import {
  clauses,
  excerpt,
  fieldsOf,
  isHedged,
  negationCount,
  normalise,
  type Segment,
  sentences,
  stems,
  tokens,
  wordSets,
} from "./text.js";

/** Kinds of contradiction the council detects. */
export type ContradictionType = "numerical" | "polarity" | "constraint";

/** Where one side of a contradiction was written. */
export interface ContradictionSide {
  origin: Segment["origin"];
  location: string;
  text: string;
}

/** Two statements of the session that cannot both hold, and why. */
export interface Contradiction {
  type: ContradictionType;
  /** The quantity compared, for numerical and numeric constraint contradictions. */
  quantity?: string;
  earlier: ContradictionSide;
  later: ContradictionSide;
  explanation: string;
}

type BoundKind = "exact" | "upper" | "lower";

/** A number in the text tied to a named quantity, normalised to the dimension's base unit. */
export interface Quantity {
  name: string;
  dimension: Dimension;
  kind: BoundKind;
  /** An estimate ("about 10 minutes"): compared with the wider tolerance. */
  approximate: boolean;
  min: number;
  max: number;
  /** The text as written ("< 30 minutes"). */
  raw: string;
  segment: Segment;
}

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const NUM = "(\\d+(?:,\\d{3})*(?:\\.\\d+)?)";

interface Compiled {
  numberRe: RegExp;
  aliases: Array<{ name: string; dimension: Dimension; re: RegExp; length: number }>;
  unitOf: Map<string, { dimension: Dimension; factor: number }>;
  upper: string[];
  lower: string[];
}

const compiledCache = new WeakMap<Ruleset, Compiled>();

function compiled(r: Ruleset): Compiled {
  let c = compiledCache.get(r);
  if (c) return c;
  const unitOf = new Map<string, { dimension: Dimension; factor: number }>();
  for (const u of r.contradictions.units) for (const s of u.spellings) unitOf.set(s, { dimension: u.dimension, factor: u.factor });
  // Longest spelling first so "min" does not win over "minutes".
  const spellings = [...unitOf.keys()].sort((a, b) => b.length - a.length).map(escape);
  const numberRe = new RegExp(`${NUM}(?:\\s*(?:-|–|to)\\s*${NUM})?\\s*-?\\s*(${spellings.join("|")})(?![a-z0-9])`, "g");
  const byLength = (a: string, b: string) => b.length - a.length;
  const aliases = r.contradictions.quantities.flatMap((q) =>
    q.aliases.map((alias) => ({ name: q.name, dimension: q.dimension, re: new RegExp(`(?<![a-z0-9])${escape(alias)}(?![a-z0-9])`, "g"), length: alias.length })),
  );
  c = {
    numberRe,
    aliases,
    unitOf,
    upper: [...r.contradictions.upperBound].sort(byLength),
    lower: [...r.contradictions.lowerBound].sort(byLength),
  };
  compiledCache.set(r, c);
  return c;
}

/** True for segments that state the plan, as opposed to risks, questions and alternatives. */
export function isAsserted(seg: Segment, r: Ruleset): boolean {
  if (seg.kind === "question" || seg.kind === "alternative") return false;
  const skip = r.contradictions.nonAssertedFields;
  return !fieldsOf(seg.location).some((f) => skip.includes(f));
}

/** Constraints and the task are binding even when phrased with a hedge word ("must not exceed"). */
function isBinding(seg: Segment): boolean {
  return seg.kind === "constraint" || seg.kind === "task";
}

function boundOf(prefix: string, c: Compiled, r: Ruleset): BoundKind {
  const p = prefix.trimEnd();
  const endsWith = (phrase: string) =>
    p.endsWith(phrase) && (p.length === phrase.length || !/[a-z0-9]/.test(p[p.length - phrase.length - 1] ?? "") || !/[a-z]/.test(phrase[0] ?? ""));
  const upper = c.upper.find(endsWith);
  const lower = c.lower.find(endsWith);
  const phrase = [upper, lower].filter((x): x is string => x !== undefined).sort((a, b) => b.length - a.length)[0];
  if (phrase === undefined) return "exact";
  const kind: BoundKind = phrase === upper ? "upper" : "lower";
  // "no downtime longer than 30 minutes": a negation before a bound flips it, unless the
  // phrase carries its own ("not exceeding").
  const { negation } = wordSets(r);
  const own = tokens(phrase).some((t) => negation.has(t));
  const before = p.slice(0, p.length - phrase.length);
  const flipped = !own && negationCount(before, r) % 2 === 1;
  if (!flipped) return kind;
  return kind === "upper" ? "lower" : "upper";
}

function nearestAlias(clause: string, start: number, end: number, dimension: Dimension, r: Ruleset): string | undefined {
  const { stop } = wordSets(r);
  let best: { name: string; distance: number } | undefined;
  for (const alias of compiled(r).aliases) {
    if (alias.dimension !== dimension) continue;
    for (const m of clause.matchAll(alias.re)) {
      const aStart = m.index;
      const aEnd = aStart + alias.length;
      let distance: number;
      if (aEnd <= start) {
        // Another number in between owns this alias ("lag below 5 seconds for 10 minutes").
        if (/\d/.test(clause.slice(aEnd, start))) continue;
        distance = tokens(clause.slice(aEnd, start)).length;
        if (distance > r.contradictions.aliasWindow) continue;
      } else if (aStart >= end) {
        // After the number only connecting words may sit between ("30 minutes of downtime"),
        // or "a 200 MB sample of the data" would be read as the data size.
        const between = tokens(clause.slice(end, aStart));
        if (between.some((t) => !stop.has(t))) continue;
        distance = between.length;
      } else continue;
      if (!best || distance < best.distance) best = { name: alias.name, distance };
    }
  }
  return best?.name;
}

/** The quantities a segment asserts, e.g. `downtime ≤ 1800 s` from "downtime < 30 minutes". */
export function extractQuantities(seg: Segment, r: Ruleset): Quantity[] {
  if (!isAsserted(seg, r)) return [];
  const c = compiled(r);
  const out: Quantity[] = [];
  for (const sentence of sentences(seg.text)) {
    if (!isBinding(seg) && isHedged(sentence, r)) continue;
    if (!/\d/.test(sentence)) continue;
    for (const clause of clauses(normalise(sentence))) {
      for (const m of clause.matchAll(c.numberRe)) {
        const unit = c.unitOf.get(m[3] ?? "");
        if (!unit) continue;
        const a = Number((m[1] ?? "").replace(/,/g, "")) * unit.factor;
        const b = m[2] !== undefined ? Number(m[2].replace(/,/g, "")) * unit.factor : a;
        const name = nearestAlias(clause, m.index, m.index + m[0].length, unit.dimension, r);
        if (!name) continue;
        const words = tokens(clause);
        let kind = boundOf(clause.slice(0, m.index), c, r);
        // "a downtime budget of 30 minutes" states a limit even without a comparison word.
        if (kind === "exact" && r.contradictions.boundNouns.some((n) => words.includes(n))) kind = "upper";
        const prefix = clause.slice(0, m.index).trimEnd().split(/\s+/).slice(-2).join(" ");
        const approximate = r.contradictions.approximateMarkers.some((w) => (/[a-z]/.test(w) ? words.includes(w) : clause.includes(w)));
        out.push({
          name,
          dimension: unit.dimension,
          kind,
          approximate,
          min: Math.min(a, b),
          max: Math.max(a, b),
          raw: `${prefix} ${m[0]}`.trim(),
          segment: seg,
        });
      }
    }
  }
  return out;
}

function side(seg: Segment): ContradictionSide {
  return { origin: seg.origin, location: seg.location, text: excerpt(seg.text) };
}

function describe(q: Quantity): string {
  return `${q.name} ${q.kind === "upper" ? "at most" : q.kind === "lower" ? "at least" : ""} "${q.raw}"`.replace(/\s+/g, " ");
}

/**
 * Compares two mentions of the same quantity. Bounds are directional: a stricter later limit
 * (under 20 minutes after "under 30 minutes") is consistent; a looser one, or a value beyond
 * an earlier limit, is not. Values within the ruleset's tolerance count as equal.
 */
export function compareQuantities(a: Quantity, b: Quantity, r: Ruleset): Contradiction | null {
  if (a.name !== b.name || a.dimension !== b.dimension) return null;
  const tol = a.approximate || b.approximate ? r.contradictions.approximateTolerance : r.contradictions.numericTolerance;
  const above = (x: number, limit: number) => x > limit * (1 + tol);
  const below = (x: number, limit: number) => x < limit * (1 - tol);
  let violatedBound: Quantity | undefined;
  let why: string | undefined;
  const point = (q: Quantity) => q.kind === "exact";
  if (point(a) && point(b)) {
    if (above(b.min, a.max) || above(a.min, b.max)) why = "the same quantity is given two different values";
  } else if (a.kind === "upper" && point(b) && above(b.max, a.max)) [violatedBound, why] = [a, "the value exceeds the earlier limit"];
  else if (point(a) && b.kind === "upper" && above(a.max, b.max)) [violatedBound, why] = [b, "the earlier value exceeds this limit"];
  else if (a.kind === "lower" && point(b) && below(b.min, a.min)) [violatedBound, why] = [a, "the value is below the earlier minimum"];
  else if (point(a) && b.kind === "lower" && below(a.min, b.min)) [violatedBound, why] = [b, "the earlier value is below this minimum"];
  else if (a.kind === "upper" && b.kind === "upper" && above(b.max, a.max)) [violatedBound, why] = [a, "the limit was loosened"];
  else if (a.kind === "lower" && b.kind === "lower" && below(b.min, a.min)) [violatedBound, why] = [a, "the minimum was lowered"];
  else if (a.kind === "upper" && b.kind === "lower" && above(b.min, a.max)) [violatedBound, why] = [a, "the minimum is above the limit"];
  else if (a.kind === "lower" && b.kind === "upper" && above(a.min, b.max)) [violatedBound, why] = [b, "the limit is below the minimum"];
  if (!why) return null;
  const type: ContradictionType = violatedBound && isBinding(violatedBound.segment) ? "constraint" : "numerical";
  return {
    type,
    quantity: a.name,
    earlier: side(a.segment),
    later: side(b.segment),
    explanation: `${type === "constraint" ? "Constraint violated" : "Numerical contradiction"} on ${a.name}: ${describe(a)} (${a.segment.location}) vs ${describe(b)} (${b.segment.location}): ${why}.`,
  };
}

/** One clause read as a proposition: its stemmed content words and whether it is negated. */
interface Proposition {
  stems: string[];
  set: Set<string>;
  negated: boolean;
  clause: string;
  segment: Segment;
}

function propositions(seg: Segment, r: Ruleset): Proposition[] {
  if (!isAsserted(seg, r)) return [];
  const out: Proposition[] = [];
  for (const sentence of sentences(seg.text)) {
    if (isHedged(sentence, r)) continue;
    for (const clause of clauses(sentence)) {
      const s = stems(clause, r);
      if (s.length < r.contradictions.minPropositionTokens) continue;
      out.push({ stems: s, set: new Set(s), negated: negationCount(clause, r) % 2 === 1, clause, segment: seg });
    }
  }
  return out;
}

function setSimilarity(sa: ReadonlySet<string>, sb: ReadonlySet<string>): number {
  let inter = 0;
  for (const t of sa) if (sb.has(t)) inter++;
  return inter / (sa.size + sb.size - inter);
}

/** A prohibition from a constraint: the words that must not be done ("no triggers on orders"). */
interface Prohibition {
  sequence: string[];
  segment: Segment;
}

function prohibitions(seg: Segment, r: Ruleset): Prohibition[] {
  if (!isBinding(seg)) return [];
  const { negation } = wordSets(r);
  const out: Prohibition[] = [];
  for (const sentence of sentences(seg.text)) {
    for (const clause of clauses(sentence)) {
      // Numbers in a constraint are bounds, which the numerical check handles precisely.
      if (/\d/.test(clause)) continue;
      const words = tokens(clause);
      const at = words.findIndex((w) => negation.has(w));
      if (at < 0) continue;
      const sequence = stems(words.slice(at + 1).join(" "), r).slice(0, r.contradictions.prohibitionTokens);
      if (sequence.length >= r.contradictions.prohibitionMinTokens) out.push({ sequence, segment: seg });
    }
  }
  return out;
}

function containsSequence(haystack: readonly string[], needle: readonly string[]): boolean {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return true;
  }
  return false;
}

function polarity(a: Proposition, b: Proposition, r: Ruleset): Contradiction | null {
  if (a.negated === b.negated) return null;
  // Jaccard can reach the threshold only if the smaller set is at least that share of the larger.
  const min = r.contradictions.polaritySimilarity;
  if (Math.min(a.set.size, b.set.size) < min * Math.max(a.set.size, b.set.size)) return null;
  if (setSimilarity(a.set, b.set) < min) return null;
  const [pos, neg] = a.negated ? [b, a] : [a, b];
  return {
    type: "polarity",
    earlier: side(a.segment),
    later: side(b.segment),
    explanation: `Polarity contradiction: "${excerpt(pos.clause, 100)}" (${pos.segment.location}) is negated by "${excerpt(neg.clause, 100)}" (${neg.segment.location}).`,
  };
}

function prohibitionBreach(p: Prohibition, prop: Proposition, r: Ruleset): Contradiction | null {
  const origin = prop.segment.origin;
  // A claim under verification is checked like a proposing phase: it asserts something.
  if (prop.negated || (origin !== "claim" && !r.contradictions.prohibitionCheckedPhases.some((ph) => ph === origin))) return null;
  if (!containsSequence(prop.stems, p.sequence)) return null;
  return {
    type: "constraint",
    earlier: side(p.segment),
    later: side(prop.segment),
    explanation: `Constraint violated: "${excerpt(p.segment.text, 100)}" (${p.segment.location}) forbids what "${excerpt(prop.clause, 100)}" (${prop.segment.location}) does.`,
  };
}

/** Everything the checker reads from a group of segments, computed once. */
interface Facts {
  quantities: Quantity[];
  propositions: Proposition[];
  prohibitions: Prohibition[];
}

function factsOf(segments: readonly Segment[], r: Ruleset): Facts {
  return {
    quantities: segments.flatMap((s) => extractQuantities(s, r)),
    propositions: segments.flatMap((s) => propositions(s, r)),
    prohibitions: segments.flatMap((s) => prohibitions(s, r)),
  };
}

function pairs(earlier: Facts, later: Facts, r: Ruleset, sameGroup: boolean): Contradiction[] {
  const out: Contradiction[] = [];
  const each = <T extends { segment: Segment }>(xs: T[], ys: T[], f: (x: T, y: T) => Contradiction | null) => {
    xs.forEach((x, i) => {
      ys.forEach((y, j) => {
        // Within one group compare each pair once, and never a segment with itself.
        if (sameGroup && (j <= i || x.segment === y.segment)) return;
        const c = f(x, y);
        if (c) out.push(c);
      });
    });
  };
  each(earlier.quantities, later.quantities, (a, b) => compareQuantities(a, b, r));
  each(earlier.propositions, later.propositions, (a, b) => polarity(a, b, r));
  for (const p of earlier.prohibitions) {
    for (const prop of later.propositions) {
      if (sameGroup && p.segment === prop.segment) continue;
      const c = prohibitionBreach(p, prop, r);
      if (c) out.push(c);
    }
  }
  if (sameGroup) {
    // A prohibition written in the same output as its breach still counts, in either order.
    for (const p of later.prohibitions) {
      for (const prop of earlier.propositions) {
        if (p.segment === prop.segment) continue;
        const c = prohibitionBreach(p, prop, r);
        if (c && !out.some((o) => o.earlier.location === c.later.location && o.later.location === c.earlier.location)) out.push(c);
      }
    }
  }
  return out;
}

/**
 * Contradictions that new text brings into the session: between it and everything stored
 * before it (the task, its context and earlier phases), and within the new text itself.
 * Earlier phases are not re-checked against each other: that happened when they were saved.
 */
export function detectContradictions(earlier: readonly Segment[], added: readonly Segment[], r: Ruleset): Contradiction[] {
  const before = factsOf(earlier, r);
  const now = factsOf(added, r);
  const found = [...pairs(before, now, r, false), ...pairs(now, now, r, true)];
  // The same pair can surface twice (a numeric bound is also a clause); keep the first.
  const seen = new Set<string>();
  return found.filter((c) => {
    const key = `${c.type}|${c.earlier.location}|${c.later.location}|${c.quantity ?? ""}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
