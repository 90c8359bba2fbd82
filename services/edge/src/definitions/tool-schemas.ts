import { z } from "zod";
import type { StandardSchemaWithJSON } from "@modelcontextprotocol/server";
import { compactSchema, publishedResultSchema } from "./published-schema.js";

/*
 * What a tool definition's zod schemas are registered, published and pinned as: the server
 * registers them (server/register-tools.ts), its argument check holds calls to them
 * (server/tool-arguments.ts) and the contracts pin them (contracts/sources.ts), so all three read
 * one definition.
 */

const strict = new WeakMap<z.ZodObject, z.ZodObject>();

/**
 * The schema a tool's arguments are held to and published as: its input with unknown fields
 * refused (`additionalProperties: false`), so a misspelt field is named instead of dropped.
 */
export function argumentsSchema(input: z.ZodObject): z.ZodObject {
  let schema = strict.get(input);
  if (!schema) {
    schema = input.strict();
    const meta = z.globalRegistry.get(input);
    if (meta) schema = schema.meta(meta);
    strict.set(input, schema);
  }
  return schema;
}

/**
 * The JSON Schema a zod object is published as: zod's draft-07 conversion (as SDK v1 asked for it,
 * whatever target the SDK asks for now), without the keywords that constrain nothing
 * ({@link compactSchema}), which leaves a schema that reads the same as draft-07 and as 2020-12,
 * MCP's default dialect. Built once.
 */
function draft07(schema: z.ZodObject, io: "input" | "output"): () => Record<string, unknown> {
  let json: Record<string, unknown> | undefined;
  return () => (json ??= compactSchema(z.toJSONSchema(schema, { target: "draft-7", io }) as Record<string, unknown>));
}

const publishedInputs = new WeakMap<z.ZodObject, StandardSchemaWithJSON>();

/**
 * What a tool's `inputSchema` is registered as: {@link argumentsSchema} for `tools/list`, and a
 * validation that accepts anything, because `checkToolArguments` (server/tool-arguments.ts)
 * checks in the handler.
 */
export function publishedArguments(input: z.ZodObject): StandardSchemaWithJSON {
  let published = publishedInputs.get(input);
  if (!published) {
    const json = draft07(argumentsSchema(input), "input");
    published = {
      "~standard": {
        version: 1,
        vendor: "chaos-core",
        validate: (value: unknown) => ({ value }),
        jsonSchema: { input: json, output: json },
      },
    };
    publishedInputs.set(input, published);
  }
  return published;
}

const publishedUpstream = new WeakMap<Record<string, unknown>, StandardSchemaWithJSON>();

/**
 * What an upstream tool's `inputSchema` is registered as (docs/federation.md §6): the JSON Schema
 * it published and its pin holds, as it is, and a validation that accepts anything, because
 * cognition's executor checks the arguments against that schema (Ajv, the dialect it declares).
 */
export function publishedUpstreamArguments(schema: Record<string, unknown>): StandardSchemaWithJSON {
  let published = publishedUpstream.get(schema);
  if (!published) {
    published = {
      "~standard": { version: 1, vendor: "chaos-core", validate: (value: unknown) => ({ value }), jsonSchema: { input: () => schema, output: () => schema } },
    };
    publishedUpstream.set(schema, published);
  }
  return published;
}

const resultSchemas = new WeakMap<z.ZodObject, () => Record<string, unknown>>();

/**
 * The JSON Schema of every result `output` admits, whole ({@link draft07}): what a tool's
 * contract pins as its behaviour (docs/contracts.md §2), while `tools/list` publishes its top
 * level ({@link publishedResult}).
 */
export function resultSchema(output: z.ZodObject): Record<string, unknown> {
  let json = resultSchemas.get(output);
  if (!json) resultSchemas.set(output, (json = draft07(output, "output")));
  return json();
}

const publishedOutputs = new WeakMap<z.ZodObject, StandardSchemaWithJSON>();

/**
 * What a tool's `outputSchema` is registered as: `output` itself, which checks every result
 * whole where it is made, published as the top level of {@link resultSchema}
 * ({@link publishedResultSchema}).
 */
export function publishedResult(output: z.ZodObject): StandardSchemaWithJSON {
  let published = publishedOutputs.get(output);
  if (!published) {
    const zod = output["~standard"];
    let json: Record<string, unknown> | undefined;
    const publishedJson = () => (json ??= publishedResultSchema(resultSchema(output)));
    published = {
      "~standard": {
        version: 1,
        vendor: zod.vendor,
        validate: (value: unknown, options) => zod.validate(value, options),
        jsonSchema: { input: publishedJson, output: publishedJson },
      },
    };
    publishedOutputs.set(output, published);
  }
  return published;
}

/**
 * Kit's error shape. Its code is always one of kit's error codes (`toMcpErrorResult` sets it),
 * published as a string: a client reads the code a failure carries, and listing all sixteen in
 * every tool's schema cost 6 KB of each `tools/list` and told a model nothing it acts on.
 */
const toolErrorOutput = z.object({ code: z.string(), message: z.string() });

/**
 * The output schema a tool publishes: its result, or kit's error shape. A failed call carries
 * `structuredContent: {error: {code, message}}` (from `toMcpErrorResult`), and clients validate
 * structuredContent against the output schema even when `isError` is set (the SDK's Client
 * does), so the schema must admit both. The JSON Schema says exactly that: the result's own
 * required fields, or `error`.
 */
export function withErrorAlternative(output: z.ZodObject): z.ZodObject {
  let published = widened.get(output);
  if (!published) {
    const required = (z.toJSONSchema(output, { io: "output" }).required ?? []) as string[];
    published = output
      .partial()
      .extend({ error: toolErrorOutput.optional() })
      .meta({ anyOf: [{ required }, { required: ["error"] }] });
    widened.set(output, published);
  }
  return published;
}

/** Built once per definition, not once per session. */
const widened = new WeakMap<z.ZodObject, z.ZodObject>();
