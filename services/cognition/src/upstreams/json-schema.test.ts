import { describe, expect, it } from "vitest";
import { describeIssues } from "../executor/evaluate.js";
import { zodFromJsonSchema } from "./json-schema.js";

describe("an upstream's pinned input schema", () => {
  it("checks input in the dialect it declares, naming each field at its depth", () => {
    // As server-everything publishes it: draft-07.
    const draft07 = zodFromJsonSchema({
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: { message: { type: "string" }, options: { type: "object", properties: { times: { type: "integer", minimum: 1 } } } },
      required: ["message"],
      additionalProperties: false,
    });
    expect(draft07.safeParse({ message: "hi" }).success).toBe(true);
    const bad = draft07.safeParse({ options: { times: 0 }, extra: 1 });
    expect(bad.success).toBe(false);
    const problems = describeIssues("input", bad.error!);
    expect(problems).toEqual(expect.arrayContaining(["input.message: required", "input.extra: unknown field", "input.options.times: must be >= 1"]));
  });

  it("takes 2020-12, the dialect MCP names, when the schema declares none", () => {
    const schema = zodFromJsonSchema({ type: "object", properties: { items: { type: "array", prefixItems: [{ type: "string" }], items: false } } });
    expect(schema.safeParse({ items: ["a"] }).success).toBe(true);
    expect(schema.safeParse({ items: ["a", "b"] }).success).toBe(false);
  });
});
