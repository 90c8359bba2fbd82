import { type Ruleset } from "../ruleset.js";
import { containsPhrase, sameName } from "../text.js";
import { failedCheckCount } from "../validation.js";
import { type Check, type DimensionResult, fromChecks, type PhaseContext, share } from "./checklist.js";

/**
 * Decision quality: decisions carry reasons and alternatives, a design recommends one of its
 * approaches with a justification, serious risks have mitigations, an implementation can be
 * rolled back, and a verify decision follows from its checks.
 */
export function scoreDecisionQuality(ctx: PhaseContext, r: Ruleset): DimensionResult {
  const o = ctx.output;
  const q = r.decisionQuality;
  const checks: Check[] = [];
  const decisions = o.decisions ?? [];
  if (decisions.length > 0) {
    const reasoned = decisions.filter((d) => (d.rationale?.length ?? 0) >= q.minRationaleChars).length;
    checks.push({
      ok: reasoned === decisions.length,
      label: `decisions carry a rationale of at least ${q.minRationaleChars} characters (${reasoned}/${decisions.length})`,
      fix: "Give every decision a rationale: why this and not something else.",
    });
  }
  if (ctx.phase === "decompile" || ctx.phase === "design") {
    checks.push({
      ok: decisions.some((d) => (d.alternatives?.length ?? 0) > 0) || (o.approaches?.length ?? 0) > 1,
      label: "alternatives were considered",
      fix: "Name the alternatives considered for at least one decision.",
    });
  }
  if (o.approaches && o.recommended !== undefined) {
    const recommended = o.recommended;
    checks.push({
      ok: o.approaches.some((a) => sameName(a.name, recommended)),
      label: "recommended names one of the approaches",
      fix: "Set recommended to the name of one of the approaches.",
    });
    checks.push({
      ok: o.approaches.every((a) => a.pros.length > 0 && a.cons.length > 0),
      label: "every approach lists pros and cons",
      fix: "List at least one pro and one con for every approach.",
    });
    checks.push({
      ok: (o.justification?.length ?? 0) >= q.minJustificationChars,
      label: `justification has at least ${q.minJustificationChars} characters`,
      fix: "Justify the recommendation against the constraints.",
    });
  }
  if (o.vulnerabilities) {
    const serious = o.vulnerabilities.filter((v) => v.severity === "high" || v.severity === "critical");
    const covered = serious.filter((v) => v.mitigation !== undefined).length + (o.mitigation?.length ?? 0);
    checks.push({
      ok: covered >= serious.length,
      label: `high and critical vulnerabilities have mitigations (${serious.length} serious)`,
      fix: "Give each high or critical vulnerability a mitigation.",
    });
  }
  if (ctx.phase === "synthesis") {
    const text = [...(o.implementation ?? []), ...(o.warnings ?? [])].join("\n");
    checks.push({
      ok: q.rollbackWords.some((w) => containsPhrase(text, w)),
      label: "a rollback path is described",
      fix: "Add the step that rolls the change back if it fails.",
    });
    checks.push({
      ok: (o.testing?.length ?? 0) > 0,
      label: "a test plan accompanies the steps",
      fix: "Add the tests that prove each step worked.",
    });
  }
  if (o.failedCount !== undefined) {
    // A verify without a decision is decided by its checks, so only a stated one can disagree with them.
    if (o.decision !== undefined) {
      const failed = failedCheckCount(o);
      checks.push({
        ok: o.decision === "approve" ? failed === 0 : failed > 0,
        label: `the ${o.decision} decision follows from ${failed} failed check(s)`,
        fix: o.decision === "approve" ? "Do not approve with failed checks: reject, or fix and re-run them." : "A rejection needs at least one failed check as evidence.",
      });
    }
    const failedChecks = (o.checks ?? []).filter((c) => !c.passed);
    checks.push({
      ok: failedChecks.every((c) => c.details !== undefined),
      label: "every failed check explains why",
      fix: "Add details to every failed check.",
    });
  }
  return fromChecks(checks, share(r, "decisionQuality"));
}
