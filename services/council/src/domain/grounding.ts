import { type Contradiction, detectContradictions } from "./contradictions.js";
import { type Ruleset } from "./ruleset.js";
import { type CouncilSession, records } from "./session.js";
import { excerpt, type Segment, segmentsOf, stems, taskSegments } from "./text.js";

/** A claim to check against the session. */
export interface ClaimInput {
  text: string;
  source?: string | undefined;
}

/** Verification modes: find contradictions, find grounds, or all of it (the seed's word). */
export type VerifyMode = "contradiction" | "grounding" | "all";

/** The verdict on one claim and why. */
export interface ClaimResult {
  text: string;
  source?: string | undefined;
  status: "verified" | "unverified" | "contradicted" | "consistent";
  reason: string;
  grounding?: { overlap: number; matchedIn?: string | undefined; matchedText?: string | undefined; sourceMatched: boolean };
  contradictions: Contradiction[];
}

/** A stored string that may ground a claim, with the source its author cited, if any. */
interface Ground {
  segment: Segment;
  stems: Set<string>;
  citedSource?: string | undefined;
}

function groundsOf(session: CouncilSession, r: Ruleset): Ground[] {
  const grounds: Ground[] = [];
  const add = (segment: Segment, citedSource?: string) => {
    // A question asserts nothing, so it cannot ground a claim.
    if (segment.kind !== "question") grounds.push({ segment, stems: new Set(stems(segment.text, r)), citedSource });
  };
  for (const seg of taskSegments(session.task, session.context)) add(seg);
  for (const rec of records(session)) {
    for (const seg of segmentsOf(rec.phase, rec.output)) {
      const m = /\.claims\[(\d+)\]\.text$/.exec(seg.location);
      add(seg, m ? rec.output.claims?.[Number(m[1])]?.source : undefined);
    }
  }
  return grounds;
}

function sourceMatches(source: string, g: Ground): boolean {
  const s = source.trim().toLowerCase();
  if (s.length === 0) return false;
  const loc = g.segment.location.toLowerCase();
  if (g.segment.origin === s || loc === s || loc.startsWith(`${s}.`) || loc.startsWith(`${s}[`)) return true;
  const cited = g.citedSource?.trim().toLowerCase();
  return cited !== undefined && cited.length > 0 && (cited === s || cited.includes(s) || s.includes(cited));
}

function ground(claim: ClaimInput, grounds: readonly Ground[], r: Ruleset): NonNullable<ClaimResult["grounding"]> & { verified: boolean; reason: string } {
  const words = [...new Set(stems(claim.text, r))];
  if (words.length === 0) return { overlap: 0, sourceMatched: false, verified: false, reason: "the claim has no content words to match" };
  let best: { g: Ground; overlap: number } | undefined;
  let bestSourced: { g: Ground; overlap: number } | undefined;
  for (const g of grounds) {
    const overlap = words.filter((w) => g.stems.has(w)).length / words.length;
    if (!best || overlap > best.overlap) best = { g, overlap };
    if (claim.source && sourceMatches(claim.source, g) && (!bestSourced || overlap > bestSourced.overlap)) bestSourced = { g, overlap };
  }
  const pct = (x: number) => `${Math.round(x * 100)}%`;
  const v = r.grounding;
  if (best && best.overlap >= v.verifiedOverlap) {
    return {
      overlap: Math.round(best.overlap * 100) / 100,
      matchedIn: best.g.segment.location,
      matchedText: excerpt(best.g.segment.text),
      sourceMatched: bestSourced?.g === best.g,
      verified: true,
      reason: `${pct(best.overlap)} of its words appear in ${best.g.segment.location} (at least ${pct(v.verifiedOverlap)} needed)`,
    };
  }
  if (bestSourced && bestSourced.overlap >= v.sourceOverlap) {
    return {
      overlap: Math.round(bestSourced.overlap * 100) / 100,
      matchedIn: bestSourced.g.segment.location,
      matchedText: excerpt(bestSourced.g.segment.text),
      sourceMatched: true,
      verified: true,
      reason: `its source "${claim.source ?? ""}" matches ${bestSourced.g.segment.location}, which holds ${pct(bestSourced.overlap)} of its words (at least ${pct(v.sourceOverlap)} needed with a matching source)`,
    };
  }
  return {
    overlap: Math.round((best?.overlap ?? 0) * 100) / 100,
    matchedIn: best?.g.segment.location,
    matchedText: best ? excerpt(best.g.segment.text) : undefined,
    sourceMatched: false,
    verified: false,
    reason: best
      ? `best match is ${best.g.segment.location} with ${pct(best.overlap)} of its words (at least ${pct(v.verifiedOverlap)} needed${claim.source ? `, or ${pct(v.sourceOverlap)} in a place its source names` : ""})`
      : "the session stores nothing to match",
  };
}

/**
 * Checks claims against what the session stored: contradictions (the same numerical,
 * polarity and constraint rules as between phases) and grounding (the share of a claim's
 * content words found in one stored item, with a lower bar when the claim's source names it).
 */
export function checkClaims(session: CouncilSession, claims: readonly ClaimInput[], mode: VerifyMode, r: Ruleset): ClaimResult[] {
  const grounds = mode === "contradiction" ? [] : groundsOf(session, r);
  const stored = mode === "grounding" ? [] : grounds.length > 0 ? grounds.map((g) => g.segment) : groundsOf(session, r).map((g) => g.segment);
  return claims.map((claim, i) => {
    const seg: Segment = { origin: "claim", location: `claims[${i}]`, kind: "claim", text: claim.text };
    const contradictions = mode === "grounding" ? [] : detectContradictions(stored, [seg], r);
    const g = mode === "contradiction" ? undefined : ground(claim, grounds, r);
    const base = { text: claim.text, ...(claim.source !== undefined ? { source: claim.source } : {}), contradictions };
    if (contradictions.length > 0) {
      return { ...base, status: "contradicted", reason: contradictions.map((c) => c.explanation).join(" "), ...(g ? { grounding: strip(g) } : {}) };
    }
    if (!g) return { ...base, status: "consistent", reason: "no contradiction with the session" };
    return { ...base, status: g.verified ? "verified" : "unverified", reason: g.reason, grounding: strip(g) };
  });
}

function strip(g: ReturnType<typeof ground>): NonNullable<ClaimResult["grounding"]> {
  return { overlap: g.overlap, matchedIn: g.matchedIn, matchedText: g.matchedText, sourceMatched: g.sourceMatched };
}
