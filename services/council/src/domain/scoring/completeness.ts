import { type Ruleset } from "../ruleset.js";
import { type Check, type DimensionResult, fromChecks, type PhaseContext, share } from "./checklist.js";

function filled(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === "object") return Object.values(value).some(filled);
  return true;
}

/**
 * Completeness: the summary says something, every list holds at least the items this depth
 * calls for, and the recommended optional fields are there.
 */
export function scoreCompleteness(ctx: PhaseContext, r: Ruleset): DimensionResult {
  const { phase, output, depth } = ctx;
  const rec = output as unknown as Record<string, unknown>;
  const minChars = r.completeness.minSummaryChars;
  const checks: Check[] = [
    {
      ok: output.summary.length >= minChars,
      label: `summary has at least ${minChars} characters (${output.summary.length})`,
      fix: `Write a summary of at least ${minChars} characters that states the result of the ${phase} phase.`,
    },
  ];
  let minimums = 0;
  let met = 0;
  for (const field of r.fields[phase].required) {
    const value = rec[field];
    if (!Array.isArray(value)) continue;
    const min = r.completeness.minItems[depth][`${phase}.${field}`] ?? 1;
    minimums++;
    if (value.length >= min) met++;
    checks.push({
      ok: value.length >= min,
      label: `${field} has at least ${min} item${min === 1 ? "" : "s"} (${value.length})`,
      fix: `Add ${field}: at least ${min} at ${depth} depth (now ${value.length}).`,
    });
  }
  for (const field of r.completeness.recommended[phase]) {
    checks.push({
      ok: filled(rec[field]),
      label: `optional ${field} provided`,
      fix: `Provide ${field}.`,
    });
  }
  // The item minimums depend on depth, so the session's adaptability score reads them.
  return fromChecks(checks, share(r, "completeness"), { itemMinimums: { met, total: minimums } });
}
