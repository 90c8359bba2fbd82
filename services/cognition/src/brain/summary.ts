import { isObject } from "@chaos-core/kit";
import type { StepResult } from "../executor/step-types.js";
import type { PlanStep } from "../plans/plan.js";
import { CONFIGURE_MODEL, NEEDS_MODEL } from "../providers/objective-parser.js";
import { truncate } from "./catalog.js";

/** How many recalled items a summary names before it says how many more there are. */
export const SUMMARY_ITEMS = 10;

type Item = { key: string; value: unknown; tags?: string[] };

function shown(value: unknown): string {
  return truncate(typeof value === "string" ? value : JSON.stringify(value), 200);
}

function itemsOf(output: unknown): Item[] {
  if (!isObject(output) || !Array.isArray(output.items)) return [];
  return output.items.filter((i): i is Item => isObject(i) && typeof i.key === "string");
}

/** What a summary knows beyond the steps: see {@link summarizeRun}. */
export interface SummaryOptions {
  /**
   * The queries of recalls read from a question ("what is X?") while no model is configured.
   * Memory is all that can answer them: when it holds nothing, the question is unanswered.
   */
  readonly offlineQuestions?: ReadonlySet<string>;
}

/** The answer to a question memory holds nothing about, when no model is there to answer beyond it. */
export function unansweredOffline(query: string): string {
  return `Memory holds nothing about "${query}". A question beyond what memory holds ${NEEDS_MODEL} (${CONFIGURE_MODEL}; see docs/cognition.md).`;
}

const queryOf = (input: Record<string, unknown>): string =>
  typeof input.query === "string" ? input.query : typeof input.key === "string" ? input.key : "";

/** Whether `result` is a recall of an offline question that found nothing. */
function unanswered(result: StepResult, input: Record<string, unknown>, options: SummaryOptions): boolean {
  if (result.capability !== "memory.recall" || result.status !== "executed") return false;
  return options.offlineQuestions?.has(queryOf(input)) === true && itemsOf(result.output).length === 0;
}

function recallSentence(input: Record<string, unknown>, output: unknown): string {
  const items = itemsOf(output);
  const query = queryOf(input);
  const tags = Array.isArray(input.tags) ? input.tags.filter((t): t is string => typeof t === "string") : [];
  const what = [query !== "" ? `"${query}"` : "", tags.length > 0 ? `tagged ${tags.join(", ")}` : ""].filter(Boolean).join(" ");
  if (items.length === 0) return what === "" ? "Nothing stored yet." : `Nothing stored matches ${what}.`;
  const exact = items.find((i) => i.key === query);
  if (exact) {
    const others = items.length - 1;
    return `${exact.key}: ${shown(exact.value)}${others > 0 ? ` (and ${others} more item${others === 1 ? "" : "s"} matching)` : ""}.`;
  }
  const listed = items.slice(0, SUMMARY_ITEMS).map((i) => `${i.key}: ${shown(i.value)}`).join("; ");
  const more = items.length > SUMMARY_ITEMS ? `; and ${items.length - SUMMARY_ITEMS} more` : "";
  const page = isObject(output) && typeof output.next_cursor === "string" ? " (more on the next page)" : "";
  return `${items.length} item${items.length === 1 ? "" : "s"}${what === "" ? "" : ` for ${what}`}: ${listed}${more}${page}.`;
}

function sentence(result: StepResult, input: Record<string, unknown>, options: SummaryOptions): string | undefined {
  if (unanswered(result, input, options)) return unansweredOffline(queryOf(input));
  const out = result.output;
  switch (result.capability) {
    case "memory.recall":
      return recallSentence(input, out);
    case "memory.remember": {
      const item = isObject(out) && isObject(out.item) ? out.item : undefined;
      return item && typeof item.key === "string" ? `Remembered ${item.key}: ${shown(item.value)}.` : undefined;
    }
    case "memory.forget":
      if (!isObject(out) || typeof out.key !== "string") return undefined;
      return out.deleted === true ? `Forgot ${out.key}.` : `Nothing was stored under ${out.key}; nothing was forgotten.`;
    case "http.request":
      return isObject(out) && typeof out.status === "number" ? `GET ${String(out.url)} answered ${out.status} (${String(out.bytes)} bytes).` : undefined;
    case "cognition.generate_text":
      return isObject(out) && typeof out.text === "string" ? truncate(out.text, 2_000) : undefined;
    default:
      return undefined;
  }
}

/**
 * The run's answer in words, from its executed steps in order (recall: the value under the exact
 * key asked for, or what matched, or that nothing did — for an offline question, that memory holds
 * nothing and a model would be needed; remember and forget: what changed; fetch: the status).
 * Deterministic; values are cut to 200 characters. Empty when nothing executed.
 */
export function summarizeRun(results: readonly StepResult[], steps: readonly PlanStep[], options: SummaryOptions = {}): string {
  const inputs = new Map(steps.map((s) => [s.id, s.input as Record<string, unknown>]));
  return results
    .filter((r) => r.status === "executed")
    .map((r) => sentence(r, inputs.get(r.stepId) ?? {}, options))
    .filter((s): s is string => s !== undefined && s !== "")
    .join(" ");
}

/** The sentences of {@link unansweredOffline} for the run's offline questions memory held nothing about, in order. */
export function unansweredQuestions(results: readonly StepResult[], steps: readonly PlanStep[], options: SummaryOptions): string[] {
  const inputs = new Map(steps.map((s) => [s.id, s.input as Record<string, unknown>]));
  return results.flatMap((r) => {
    const input = inputs.get(r.stepId) ?? {};
    return unanswered(r, input, options) ? [unansweredOffline(queryOf(input))] : [];
  });
}
