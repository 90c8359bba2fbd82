import { describe, expect, it } from "vitest";
import { z } from "zod";
import { compactSchema, publishedResultSchema } from "./published-schema.js";

const draft07 = (schema: z.ZodType, io: "input" | "output" = "input") => z.toJSONSchema(schema, { target: "draft-7", io }) as Record<string, unknown>;

describe("compactSchema", () => {
  it("leaves out what constrains nothing, and only that", () => {
    const schema = z.strictObject({
      // Field names that are also keywords are fields, kept whatever they hold.
      propertyNames: z.record(z.string(), z.number()),
      $schema: z.string().describe("a field named $schema"),
      seq: z.number().int().min(1),
      any: z.number().int(),
      limited: z.record(z.string().max(8), z.string()),
      tags: z.array(z.string()).max(3),
      value: z.json().describe("Any JSON value"),
      // A map says so: any members, where a collapsed object's fields are only described elsewhere.
      document: z.record(z.string(), z.unknown()),
    });
    expect(compactSchema(draft07(schema))).toEqual({
      type: "object",
      properties: {
        propertyNames: { type: "object", additionalProperties: { type: "number" } },
        $schema: { type: "string", description: "a field named $schema" },
        seq: { type: "integer", minimum: 1 },
        any: { type: "integer" },
        limited: { type: "object", propertyNames: { type: "string", maxLength: 8 }, additionalProperties: { type: "string" } },
        tags: { type: "array", maxItems: 3, items: { type: "string" } },
        value: { description: "Any JSON value" },
        document: { type: "object", additionalProperties: {} },
      },
      required: ["propertyNames", "$schema", "seq", "any", "limited", "tags", "value", "document"],
      additionalProperties: false,
    });
  });

  it("keeps a definition that is not zod's JSON value, and the references to it", () => {
    const node: z.ZodType = z.lazy(() => z.object({ name: z.string(), children: z.array(node) }));
    const compacted = compactSchema(draft07(z.object({ tree: node, extra: z.json() })));
    expect(JSON.stringify(compacted)).toContain('"$ref":"#/definitions/');
    expect(Object.keys(compacted["definitions"] as object)).toHaveLength(1);
    expect((compacted["properties"] as Record<string, unknown>)["extra"]).toEqual({});
  });
});

describe("publishedResultSchema", () => {
  const result = z
    .object({
      status: z.enum(["done", "failed"]).describe("How it ended"),
      steps: z.array(z.object({ id: z.string(), ran: z.boolean() })).describe("One per step"),
      approval: z.object({ approval_id: z.string() }).optional(),
      notes: z.array(z.string()),
      receipt: z.record(z.string(), z.unknown()).optional(),
      error: z.object({ code: z.string(), message: z.string() }).optional(),
    })
    .meta({ anyOf: [{ required: ["status", "steps", "notes"] }, { required: ["error"] }] });

  it("publishes the result's own fields, objects among them by type, and the error's two fields", () => {
    expect(publishedResultSchema(compactSchema(draft07(result, "output")))).toEqual({
      type: "object",
      properties: {
        status: { type: "string", enum: ["done", "failed"], description: "How it ended" },
        steps: { type: "array", items: { type: "object" }, description: "One per step" },
        approval: { type: "object" },
        notes: { type: "array", items: { type: "string" } },
        receipt: { type: "object", additionalProperties: {} },
        error: { type: "object", properties: { code: { type: "string" }, message: { type: "string" } }, required: ["code", "message"] },
      },
      required: ["status", "steps", "notes"],
      anyOf: [{ required: ["status", "steps", "notes"] }, { required: ["error"] }],
    });
  });
});
