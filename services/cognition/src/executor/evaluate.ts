import { z } from "zod";
import { canonicalJson } from "./canonical-json.js";

/** The verdict on a step, reached by code alone: a model never grades its own execution. */
export interface Evaluation {
  readonly succeeded: boolean;
  /** Why it did not succeed, each naming the field or check at fault; empty on success. */
  readonly problems: readonly string[];
}

/**
 * A check a plan may declare on a step's output: the value at `path` (dot-separated keys, array
 * indexes as numbers, e.g. `items.0.key`) must equal `equals` (deep JSON equality).
 */
export const stepCheckSchema = z.strictObject({
  expect: z.strictObject({
    path: z.string().min(1).max(256),
    equals: z.json(),
  }),
});

export type StepCheck = z.output<typeof stepCheckSchema>;

export const SUCCEEDED: Evaluation = Object.freeze({ succeeded: true, problems: Object.freeze([]) as readonly string[] });

/** A failed evaluation with these problems. */
export function failed(...problems: string[]): Evaluation {
  return { succeeded: false, problems };
}

/** Zod issues as `<prefix>.<path>: <message>` lines, so a re-planner knows which field to fix. */
export function describeIssues(prefix: string, error: z.ZodError): string[] {
  return error.issues.map((issue) => {
    const path = [prefix, ...issue.path.map(String)].join(".");
    return `${path}: ${issue.message}`;
  });
}

function valueAt(root: unknown, path: string): { found: boolean; value?: unknown } {
  let current = root;
  for (const segment of path.split(".")) {
    if (Array.isArray(current) && /^(0|[1-9][0-9]*)$/.test(segment) && Number(segment) < current.length) {
      current = current[Number(segment)];
    } else if (current !== null && typeof current === "object" && !Array.isArray(current) && Object.hasOwn(current, segment)) {
      current = (current as Record<string, unknown>)[segment];
    } else {
      return { found: false };
    }
  }
  return { found: true, value: current };
}

function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

/**
 * Evaluates what a handler returned: it succeeded when the output validates against the
 * capability's output schema and every declared check holds. Returns the parsed output (fields
 * the schema does not declare are dropped) only on success.
 */
export function evaluateOutput(
  outputSchema: z.ZodType,
  output: unknown,
  checks: readonly StepCheck[] = [],
): { evaluation: Evaluation; output?: unknown } {
  const parsed = outputSchema.safeParse(output);
  if (!parsed.success) return { evaluation: failed(...describeIssues("output", parsed.error)) };
  const problems: string[] = [];
  for (const { expect } of checks) {
    const at = valueAt(parsed.data, expect.path);
    if (!at.found) problems.push(`check output.${expect.path}: no value at this path`);
    else if (!sameJson(at.value, expect.equals)) {
      problems.push(`check output.${expect.path}: expected ${canonicalJson(expect.equals)}, got ${describe(at.value)}`);
    }
  }
  return problems.length > 0 ? { evaluation: failed(...problems) } : { evaluation: SUCCEEDED, output: parsed.data };
}

function describe(value: unknown): string {
  try {
    const text = canonicalJson(value);
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  } catch {
    return "a value that is not JSON";
  }
}
