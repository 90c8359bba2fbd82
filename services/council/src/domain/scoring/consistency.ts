import { type Ruleset } from "../ruleset.js";
import { sameName } from "../text.js";
import { SEVERITIES, type Claim } from "../validation.js";
import { type DimensionResult, type PhaseContext, share } from "./checklist.js";

function internalWarnings(ctx: PhaseContext, r: Ruleset): string[] {
  const o = ctx.output;
  const warnings: string[] = [];
  if (o.approaches && o.recommended !== undefined && !o.approaches.some((a) => sameName(a.name, o.recommended ?? ""))) {
    warnings.push(`recommended "${o.recommended}" is not one of the approaches (${o.approaches.map((a) => a.name).join(", ")})`);
  }
  if (o.vulnerabilities && o.riskLevel) {
    const worst = Math.max(-1, ...o.vulnerabilities.map((v) => SEVERITIES.indexOf(v.severity)));
    if (SEVERITIES.indexOf(o.riskLevel) < worst) {
      warnings.push(`riskLevel "${o.riskLevel}" is below the worst vulnerability severity "${SEVERITIES[worst] ?? ""}"`);
    }
  }
  if (o.checks && o.passedCount !== undefined && o.failedCount !== undefined) {
    const passed = o.checks.filter((c) => c.passed).length;
    const failed = o.checks.length - passed;
    if (o.passedCount !== passed || o.failedCount !== failed) {
      warnings.push(`passedCount/failedCount (${o.passedCount}/${o.failedCount}) do not match the checks (${passed}/${failed})`);
    }
  }
  const confidence = o.confidence ?? o.finalConfidence;
  const claims: Claim[] = o.claims ?? [];
  const shaky = claims.filter((c) => c.certainty === "uncertain" || c.certainty === "unknown").length;
  if (confidence !== undefined && confidence > r.consistency.overconfidence && claims.length > 0 && shaky * 2 > claims.length) {
    warnings.push(`confidence ${confidence} is high while ${shaky} of ${claims.length} claims are uncertain or unknown`);
  }
  return warnings;
}

/**
 * Consistency: no contradiction with the task or earlier phases (numerical, polarity,
 * constraint) and an output that agrees with itself. Each contradiction and each internal
 * warning costs points, as the ruleset says.
 */
export function scoreConsistency(ctx: PhaseContext, r: Ruleset): DimensionResult {
  const warnings = internalWarnings(ctx, r);
  const passed: string[] = [];
  const failed: string[] = [];
  const improve: string[] = [];
  for (const type of ["numerical", "polarity", "constraint"] as const) {
    const found = ctx.contradictions.filter((c) => c.type === type);
    if (found.length === 0) passed.push(`no ${type} contradictions`);
    for (const c of found) {
      failed.push(c.explanation);
      improve.push(`Resolve the ${type} contradiction between ${c.earlier.location} and ${c.later.location}, or explain it as a claim.`);
    }
  }
  if (warnings.length === 0) passed.push("the output is internally consistent");
  for (const w of warnings) {
    failed.push(w);
    improve.push(`Fix: ${w}.`);
  }
  const score = Math.max(0, 100 - ctx.contradictions.length * r.consistency.contradictionPenalty - warnings.length * r.consistency.warningPenalty);
  return { score, weight: share(r, "consistency"), passed, failed, improve, details: { contradictions: ctx.contradictions, warnings } };
}
