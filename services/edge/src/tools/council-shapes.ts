import { z } from "zod";

/**
 * The council service's input limits (its ruleset's `limits`), mirrored here so an oversized
 * argument is refused by the schema, naming the field, before any call is made. The edge's
 * tests check these against the service's ruleset, so the two cannot drift apart silently.
 */
export const COUNCIL_INPUT_LIMITS = {
  maxTaskChars: 20_000,
  maxTitleChars: 200,
  maxContextChars: 20_000,
  /** A phase output, measured as its JSON text. */
  maxOutputChars: 200_000,
  maxClaimsToVerify: 100,
  /** Longest string anywhere in a phase output, and of a claim's text or source. */
  maxStringChars: 20_000,
} as const;

/** The five phases, in the only order they may run. */
export const COUNCIL_PHASES = ["decompile", "design", "critique", "synthesis", "verify"] as const;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A session id as council_init returns it. */
export const sessionIdSchema = z
  .string()
  .regex(UUID, "sessionId must be a session id returned by council_init (a lowercase UUID)")
  .describe("The sessionId council_init returned");

/** A bounded string with a message that names the field. */
export function boundedText(field: string, max: number, min = 1): z.ZodString {
  return z
    .string()
    .min(min, `${field} must not be empty`)
    .max(max, `${field} must be at most ${max} characters`);
}

/**
 * A phase output: any JSON object, at most {@link COUNCIL_INPUT_LIMITS.maxOutputChars} characters
 * as JSON. Its fields are validated per phase by the council service, which names the field.
 */
export const phaseOutputSchema = z.record(z.string(), z.unknown()).superRefine((output, ctx) => {
  const chars = JSON.stringify(output).length;
  if (chars > COUNCIL_INPUT_LIMITS.maxOutputChars) {
    ctx.addIssue({
      code: "custom",
      message: `output is ${chars} characters as JSON; the limit is ${COUNCIL_INPUT_LIMITS.maxOutputChars}`,
    });
  }
});

/**
 * A claim to check against a session. A plain string is the claim's text, as the council takes a
 * plain string for any item of a list of objects; the published schema shows the object.
 */
export const claimSchema = z.preprocess(
  (v) => (typeof v === "string" ? { text: v } : v),
  z.strictObject({
    text: boundedText("claim text", COUNCIL_INPUT_LIMITS.maxStringChars).describe("The statement to check"),
    source: z
      .string()
      .max(COUNCIL_INPUT_LIMITS.maxStringChars, `claim source must be at most ${COUNCIL_INPUT_LIMITS.maxStringChars} characters`)
      .optional()
      .describe("A phase, a document, a measurement"),
  }),
);

/** A result's remaining members: the council's full answer, shaped by its versioned ruleset. */
export const COUNCIL_RESULT_NOTE =
  "Every other member is the council's full result (scoring dimensions with passed and failed checks, handoffs, " +
  "phase plan, instructions, ruleset version).";

/** `""` from a typed proto field means "none"; tools say null. */
export function orNull(value: string): string | null {
  return value === "" ? null : value;
}
