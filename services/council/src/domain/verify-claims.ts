import { ChaosError } from "@chaos-core/kit";
import { checkClaims, type ClaimInput, type VerifyMode } from "./grounding.js";
import { requireText } from "./input-checks.js";
import type { Ruleset } from "./ruleset.js";
import type { CouncilSession } from "./session.js";

/**
 * Checks claims against what the session stored, under a given ruleset (`verifyClaims` in
 * engine.ts uses the current one).
 */
export function verifyClaimsWith(
  session: CouncilSession,
  input: { claims: Array<{ text: string; source?: string }>; mode: VerifyMode },
  r: Ruleset,
): Record<string, unknown> {
  const mode = input.mode;
  if (mode !== "contradiction" && mode !== "grounding" && mode !== "all") {
    throw new ChaosError("invalid_argument", `mode: must be one of contradiction, grounding, all (got ${JSON.stringify(mode)})`);
  }
  if (!Array.isArray(input.claims) || input.claims.length === 0) throw new ChaosError("invalid_argument", "claims: must be a non-empty list");
  if (input.claims.length > r.limits.maxClaimsToVerify) {
    throw new ChaosError("invalid_argument", `claims: too many items (at most ${r.limits.maxClaimsToVerify})`);
  }
  const claims: ClaimInput[] = input.claims.map((c, i) => {
    if (typeof c !== "object" || c === null) throw new ChaosError("invalid_argument", `claims[${i}]: must be an object {text, source?}`);
    const text = requireText(`claims[${i}].text`, c.text, r.limits.maxStringChars) as string;
    const source = requireText(`claims[${i}].source`, c.source, r.limits.maxStringChars, true);
    return { text, ...(source !== undefined ? { source } : {}) };
  });
  const results = checkClaims(session, claims, mode, r);
  const contradicted = results.filter((x) => x.status === "contradicted").length;
  const verified = results.filter((x) => x.status === "verified").length;
  const grounded = mode === "contradiction" ? undefined : { verified, unverified: results.length - verified };
  const pct = (n: number) => Math.round((100 * n) / results.length);
  const passed = results.filter((x) => (mode === "contradiction" ? x.status === "consistent" : x.status === "verified")).length;
  return {
    type: "council_verify",
    sessionId: session.id,
    mode,
    results: {
      claims: results,
      contradictions: results.flatMap((x) => x.contradictions),
      ...(grounded
        ? { grounding: { ...grounded, verifiedPct: pct(grounded.verified), unverifiedPct: pct(grounded.unverified) } }
        : {}),
    },
    summary: { total: results.length, passed, failed: results.length - passed, contradicted },
    ruleset: { version: r.version },
  };
}
