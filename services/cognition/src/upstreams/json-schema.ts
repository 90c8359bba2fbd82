import { Ajv, type ValidateFunction } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import { z } from "zod";

/**
 * An upstream's pinned JSON Schemas as zod schemas, so the executor checks an upstream step's
 * input (and a declared output) as it checks every capability's: with Ajv, in the dialect the
 * schema declares (`$schema`: the npm servers publish draft-07, newer ones 2020-12; none: 2020-12,
 * the dialect MCP names), and every problem named at its field (`input.path: must be string`).
 * Compiled once per pinned schema.
 */

const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/;

// strict: false — an upstream's schema may use keywords Ajv does not know; they are annotations,
// never a reason to refuse the tool. No remote $ref is ever fetched.
const draft07 = new Ajv({ allErrors: true, strict: false, validateFormats: false });
const draft2020 = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });

/** Compiles a pinned schema in its dialect; a schema Ajv cannot compile is refused at pin time, naming why. */
export function compileUpstreamSchema(schema: Record<string, unknown>): ValidateFunction {
  const dialect = typeof schema.$schema === "string" && DRAFT_07.test(schema.$schema) ? draft07 : draft2020;
  // A schema is compiled without its $schema when Ajv's instance does not carry that meta-schema
  // by that exact URI (http vs https, a trailing #): the dialect was chosen above.
  const { $schema: _ignored, ...body } = schema;
  return dialect.compile(body);
}

/** A zod schema that passes a value through unchanged when the pinned JSON Schema accepts it. */
export function zodFromJsonSchema(schema: Record<string, unknown>): z.ZodType<Record<string, unknown>> {
  const validate = compileUpstreamSchema(schema);
  return z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
    if (validate(value)) return;
    for (const e of validate.errors ?? []) {
      const path = e.instancePath === "" ? [] : e.instancePath.split("/").slice(1).map((p) => (/^\d+$/.test(p) ? Number(p) : p.replace(/~1/g, "/").replace(/~0/g, "~")));
      const extra = e.keyword === "required" ? [(e.params as { missingProperty: string }).missingProperty] : e.keyword === "additionalProperties" ? [(e.params as { additionalProperty: string }).additionalProperty] : [];
      const message = e.keyword === "required" ? "required" : e.keyword === "additionalProperties" ? "unknown field" : (e.message ?? e.keyword);
      ctx.addIssue({ code: "custom", path: [...path, ...extra], message });
    }
  });
}
