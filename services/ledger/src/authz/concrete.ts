import { z } from "zod";

/**
 * Words that name a set instead of one thing. An approval must be for exactly one tool, one
 * resource, one actor and one policy version, so these are never read as literal names.
 */
const SET_WORDS = new Set(["any", "all"]);

/**
 * Why `value` is not one concrete name, or undefined when it is: empty, padded with whitespace
 * (two spellings of one name), a `*` wildcard anywhere, or `any` / `all` in any case.
 */
export function ambiguityProblem(value: string): string | undefined {
  if (value.trim() === "") return "is empty";
  if (value.trim() !== value) return `"${value}" has surrounding whitespace`;
  if (value.includes("*")) return `"${value}" is a wildcard; name exactly one`;
  if (SET_WORDS.has(value.toLowerCase())) return `"${value}" names a set; name exactly one`;
  return undefined;
}

/** A zod string that must be one concrete name (see {@link ambiguityProblem}), at most `max` long. */
export function concreteName(max: number): z.ZodString {
  return z
    .string()
    .max(max, `must be at most ${max} characters`)
    .superRefine((value, ctx) => {
      const problem = ambiguityProblem(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });
}
