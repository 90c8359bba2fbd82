import { ChaosError } from "@chaos-core/kit";
import { z } from "zod";
import type { AIProvider, JsonRequest } from "./ai-provider.js";

/** A model answer that parsed and validated. */
export interface ValidatedJson<T> {
  readonly value: T;
  readonly raw: string;
  readonly model: string;
  readonly providerId: string;
  /** 1 when the first answer was valid, 2 when the retry was needed. */
  readonly attempts: 1 | 2;
}

// Models often wrap JSON in a Markdown fence even when told not to; accept exactly that wrapping.
const FENCE = /^```[a-zA-Z]*\s*\n?([\s\S]*?)\n?\s*```$/;

/** Removes one surrounding Markdown code fence (```json … ```), if there is one. */
export function stripJsonFence(raw: string): string {
  const trimmed = raw.trim();
  const match = FENCE.exec(trimmed);
  return match ? (match[1] ?? "").trim() : trimmed;
}

type Check<T> = { ok: true; value: T } | { ok: false; problem: string };

function check<S extends z.ZodType>(schema: S, raw: string): Check<z.output<S>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(stripJsonFence(raw));
  } catch (err) {
    return { ok: false, problem: `the answer is not valid JSON (${(err as Error).message})` };
  }
  const result = schema.safeParse(parsed);
  if (result.success) return { ok: true, value: result.data };
  return { ok: false, problem: `the JSON does not have the expected shape:\n${z.prettifyError(result.error)}` };
}

/**
 * Asks a provider for JSON and never trusts the answer: it is parsed (one Markdown fence is
 * tolerated) and validated with `schema`. An invalid answer is retried once, with the validation
 * problem appended to the instructions so the model can correct itself; a second invalid answer
 * is reported as a ChaosError `internal` naming both problems — the fault is the model's output,
 * not the caller's request. Provider errors (unavailable, rate limits, timeouts) are not retried
 * here: the provider's client already retries those.
 */
export async function generateValidated<S extends z.ZodType>(
  provider: AIProvider,
  schema: S,
  request: JsonRequest,
): Promise<ValidatedJson<z.output<S>>> {
  const first = await provider.generateJson(request);
  const firstCheck = check(schema, first.raw);
  if (firstCheck.ok) return { value: firstCheck.value, raw: first.raw, model: first.model, providerId: first.providerId, attempts: 1 };

  const second = await provider.generateJson({
    ...request,
    instructions:
      `${request.instructions}\n\nYour previous answer was rejected because ${firstCheck.problem}\n` +
      "Answer again with only one JSON object of the requested shape, and nothing else.",
  });
  const secondCheck = check(schema, second.raw);
  if (secondCheck.ok) return { value: secondCheck.value, raw: second.raw, model: second.model, providerId: second.providerId, attempts: 2 };

  throw new ChaosError(
    "internal",
    `the model (${second.providerId}/${second.model}) did not return valid JSON for the expected shape after 2 attempts; ` +
      `first: ${firstCheck.problem}; second: ${secondCheck.problem}`,
  );
}
