import { type Ruleset } from "../ruleset.js";
import { type Check, type DimensionResult, fromChecks, type PhaseContext, share, stringLists } from "./checklist.js";

/** Structure: a summary of sensible length, list items that are neither trivial, huge nor repeated. */
export function scoreStructure(ctx: PhaseContext, r: Ruleset): DimensionResult {
  const o = ctx.output;
  const s = r.structure;
  const lists = stringLists(o);
  const items = lists.flatMap(([, v]) => v);
  const trivial = lists.flatMap(([k, v]) => v.filter((x) => x.length < s.minItemChars).map(() => k));
  const huge = lists.flatMap(([k, v]) => v.filter((x) => x.length > s.maxItemChars).map(() => k));
  const duplicated = lists.filter(([, v]) => new Set(v.map((x) => x.toLowerCase())).size !== v.length).map(([k]) => k);
  const claimTexts = (o.claims ?? []).map((c) => c.text.toLowerCase());
  if (new Set(claimTexts).size !== claimTexts.length) duplicated.push("claims");
  const checks: Check[] = [
    {
      ok: o.summary.length <= s.maxSummaryChars,
      label: `summary is at most ${s.maxSummaryChars} characters`,
      fix: "Shorten the summary; put detail in the lists.",
    },
    {
      ok: trivial.length === 0,
      label: `no list item is shorter than ${s.minItemChars} characters`,
      fix: `Expand or remove the near-empty items in ${[...new Set(trivial)].join(", ")}.`,
    },
    {
      ok: huge.length === 0,
      label: `no list item is longer than ${s.maxItemChars} characters`,
      fix: `Split the long items in ${[...new Set(huge)].join(", ")} into several.`,
    },
    {
      ok: duplicated.length === 0,
      label: "no list repeats an item",
      fix: `Remove the repeated items in ${duplicated.join(", ")}.`,
    },
  ];
  if (o.criticalQuestions) {
    checks.push({
      ok: o.criticalQuestions.every((x) => x.trim().endsWith("?")),
      label: "critical questions are phrased as questions",
      fix: "End each critical question with a question mark: it is a question, not a finding.",
    });
  }
  return fromChecks(checks, share(r, "structure"), { items: items.length });
}
