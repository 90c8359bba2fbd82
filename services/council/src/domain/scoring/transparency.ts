import { type Ruleset } from "../ruleset.js";
import { type Check, type DimensionResult, type PhaseContext, share } from "./checklist.js";

function part(checks: Check[], points: number): { points: number; checks: Check[] } {
  const ok = checks.filter((c) => c.ok).length;
  return { points: checks.length === 0 ? points : (points * ok) / checks.length, checks };
}

/**
 * Transparency, in three parts weighted by the ruleset: certainty (claims exist, confirmed
 * ones cite a source, levels are not all "confirmed"), the knowledge boundary (stated, with
 * what is known and what is not), and assumptions (made explicit and marked for verification).
 */
export function scoreTransparency(ctx: PhaseContext, r: Ruleset): DimensionResult {
  const o = ctx.output;
  const claims = o.claims ?? [];
  const kb = o.knowledgeBoundary;
  const confirmedNoSource = claims.filter((c) => c.certainty === "confirmed" && !c.source).length;
  const certainty = part(
    [
      { ok: claims.length > 0, label: "claims with certainty levels are given", fix: "Add claims with a certainty level each." },
      {
        ok: confirmedNoSource === 0,
        label: `every confirmed claim cites a source (${confirmedNoSource} without)`,
        fix: "Give a source for every confirmed claim, or lower its certainty.",
      },
      {
        ok: claims.length < 3 || claims.some((c) => c.certainty !== "confirmed"),
        label: "certainty levels are calibrated (not everything confirmed)",
        fix: "Mark what is likely, uncertain or assumed as such instead of confirmed.",
      },
    ],
    r.transparency.certainty,
  );
  const boundary = part(
    [
      { ok: kb !== undefined, label: "knowledgeBoundary is stated", fix: "Add a knowledgeBoundary." },
      { ok: (kb?.whatIKnow.length ?? 0) > 0, label: "whatIKnow is filled", fix: "List what you know in knowledgeBoundary.whatIKnow." },
      {
        ok: (kb?.whatIDontKnow.length ?? 0) + (kb?.whatNeedsVerification.length ?? 0) > 0,
        label: "the unknowns are admitted (whatIDontKnow or whatNeedsVerification)",
        fix: "List what you do not know or what needs verification.",
      },
    ],
    r.transparency.knowledgeBoundary,
  );
  const shaky = claims.filter((c) => c.certainty === "uncertain" || c.certainty === "unknown").length;
  const assumptions = part(
    [
      {
        ok: (kb?.whatIAssume.length ?? 0) > 0 || claims.some((c) => c.certainty === "assumption"),
        label: "assumptions are made explicit",
        fix: "State your working assumptions (knowledgeBoundary.whatIAssume or claims marked assumption).",
      },
      {
        ok: shaky === 0 || (kb?.whatNeedsVerification.length ?? 0) > 0,
        label: "uncertain and unknown claims are marked for verification",
        fix: "List what must be verified in knowledgeBoundary.whatNeedsVerification.",
      },
    ],
    r.transparency.assumptions,
  );
  const all = [...certainty.checks, ...boundary.checks, ...assumptions.checks];
  const total = r.transparency.certainty + r.transparency.knowledgeBoundary + r.transparency.assumptions;
  const score = total > 0 ? Math.round((100 * (certainty.points + boundary.points + assumptions.points)) / total) : 100;
  return {
    score,
    weight: share(r, "transparency"),
    passed: all.filter((c) => c.ok).map((c) => c.label),
    failed: all.filter((c) => !c.ok).map((c) => c.label),
    improve: all.filter((c) => !c.ok).map((c) => c.fix),
    details: {
      certainty: Math.round(certainty.points),
      knowledgeBoundary: Math.round(boundary.points),
      assumptions: Math.round(assumptions.points),
      claimsByCertainty: Object.fromEntries(
        ["confirmed", "likely", "uncertain", "unknown", "assumption"].map((l) => [l, claims.filter((c) => c.certainty === l).length]),
      ),
    },
  };
}
