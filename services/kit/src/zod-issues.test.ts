import { describe, expect, it } from "vitest";
import { z } from "zod";
import { describeZodIssues, withIssueNote, zodProblems } from "./zod-issues.js";

function problems(schema: z.ZodType, value: unknown): string[] {
  const parsed = schema.safeParse(value, { reportInput: true });
  if (parsed.success) throw new Error("expected the value to fail");
  return describeZodIssues(parsed.error, schema, "arguments");
}

const order = z.strictObject({
  policy: z.string(),
  action: z.strictObject({ action: z.string().max(8), notional: z.number(), confidence: z.number().min(0).max(1).optional() }),
  tags: z.array(z.string().max(4)).max(2).optional(),
  side: z.enum(["BUY", "SELL"]).optional(),
  quantity: z.number().int().positive().optional(),
  symbol: z.string().regex(/^[A-Z]+$/).optional(),
  memo: z.string().max(3, "must be at most 3 characters").optional(),
  value: z.json().optional(),
  limits: z.record(z.string().max(3), z.number()).optional(),
});

describe("describeZodIssues", () => {
  it("names each field at its real depth with what it expects and what it got", () => {
    expect(problems(order, { policy: 1, action: { action: "BUY", notional: "12" } })).toEqual([
      "policy: expected string, got number",
      "action.notional: expected number, got string",
    ]);
  });

  it("says a required field is missing", () => {
    expect(problems(order, { action: { action: "BUY" } })).toEqual([
      "policy: required, expected string",
      "action.notional: required, expected number",
    ]);
    expect(problems(z.strictObject({ side: z.enum(["BUY", "SELL"]) }), {})).toEqual(['side: required, expected one of "BUY", "SELL"']);
    // A field of any type is just required (zod's own word for it, "nonoptional", names no type).
    expect(problems(z.object({ value: z.unknown(), extra: z.any() }), {})).toEqual(["value: required", "extra: required"]);
  });

  it("names an unknown field and the fields its object accepts, at any depth", () => {
    expect(problems(order, { policy: "p", action: { action: "BUY", notional: 1, extra: true }, bogus: 1 })).toEqual([
      "action.extra: unknown field; accepted fields: action, notional, confidence",
      "bogus: unknown field; accepted fields: policy, action, tags, side, quantity, symbol, memo, value, limits",
    ]);
  });

  it("names the fields a preprocessed object accepts, at the top and inside it", () => {
    const renamed = z.preprocess((v) => v, z.strictObject({ whatIKnow: z.array(z.string()).default([]), whatIAssume: z.array(z.string()).optional() }));
    const output = z.preprocess((v) => v, z.strictObject({ summary: z.string(), knowledgeBoundary: renamed.optional() }));
    expect(problems(output, { summary: "s", verdict: "approve", knowledgeBoundary: { whatIWonder: ["why"] } })).toEqual([
      "knowledgeBoundary.whatIWonder: unknown field; accepted fields: whatIKnow, whatIAssume",
      "verdict: unknown field; accepted fields: summary, knowledgeBoundary",
    ]);
  });

  it("adds a schema's note to what it expects, and can write paths from the root and suggest a misspelt field", () => {
    const anyCase = withIssueNote(z.preprocess((v) => (typeof v === "string" ? v.toLowerCase() : v), z.enum(["low", "high"])), "(any case)");
    const item = withIssueNote(z.strictObject({ name: z.string(), severity: anyCase }), "(or a plain string)");
    const output = z.strictObject({ riskLevel: anyCase.optional(), approaches: z.array(item) });
    const parsed = output.safeParse({ riskLevel: "severe", approaches: [{ name: "a", severity: "HIGH", title: "x" }, 5, { name: "b" }] }, { reportInput: true });
    expect(describeZodIssues(parsed.error!, output, "output", { underRoot: true })).toEqual([
      'output.riskLevel: expected one of "low", "high" (any case), got "severe"',
      "output.approaches[0].title: unknown field; accepted fields: name, severity (or a plain string)",
      "output.approaches[1]: expected object (or a plain string), got number",
      'output.approaches[2].severity: required, expected one of "low", "high" (any case)',
    ]);
    const policy = z.strictObject({ deniedCapabilities: z.array(z.string()).optional(), comment: z.never().optional() });
    const typo = policy.safeParse({ deniedCapabilites: [], remark: "x" }, { reportInput: true });
    expect(zodProblems(typo.error!, policy, "", { suggest: true })).toEqual([
      { path: "deniedCapabilites", message: 'unknown field (did you mean "deniedCapabilities"?); accepted fields: deniedCapabilities, comment' },
      { path: "remark", message: "unknown field; accepted fields: deniedCapabilities, comment" },
    ]);
    expect(describeZodIssues(z.strictObject({}).safeParse([], { reportInput: true }).error!, undefined, "")).toEqual(["expected object, got array"]);
  });

  it("spells out bounds, enumerations, integers and patterns", () => {
    const base = { policy: "p", action: { action: "TOO-LONG-ACTION", notional: 1, confidence: 2 } };
    expect(problems(order, { ...base, tags: ["a", "b", "c"], side: "HOLD", quantity: 1.5, symbol: "abc" })).toEqual([
      "action.action: expected at most 8 characters, got 15",
      "action.confidence: expected at most 1, got 2",
      "tags: expected at most 2 items, got 3",
      'side: expected one of "BUY", "SELL", got "HOLD"',
      "quantity: expected integer, got 1.5",
      "symbol: expected text matching /^[A-Z]+$/",
    ]);
    expect(problems(order, { ...base, action: { action: "A", notional: 1 }, tags: ["toolong"], quantity: 0 })).toEqual([
      "tags[0]: expected at most 4 characters, got 7",
      "quantity: expected more than 0, got 0",
    ]);
  });

  it("keeps a message the schema wrote itself", () => {
    expect(problems(order, { policy: "p", action: { action: "A", notional: 1 }, memo: "long" })).toEqual([
      "memo: must be at most 3 characters",
    ]);
    const refined = z.strictObject({ a: z.string().optional(), b: z.string().optional() }).superRefine((v, ctx) => {
      if (!v.a === !v.b) ctx.addIssue({ code: "custom", path: ["a"], message: "give exactly one of a or b" });
    });
    expect(problems(refined, {})).toEqual(["a: give exactly one of a or b"]);
  });

  it("describes a union by the accepted types, or by the alternative the value came closest to", () => {
    expect(problems(order, { policy: "p", action: { action: "A", notional: 1 }, value: undefined, limits: { abcd: 1 } })).toEqual([
      'limits: field name "abcd": expected at most 3 characters, got 4',
    ]);
    const item = z.union([z.string(), z.strictObject({ name: z.string(), why: z.string().optional() })]);
    const list = z.strictObject({ approaches: z.array(item) });
    expect(problems(list, { approaches: [5] })).toEqual(["approaches[0]: expected string or object, got number"]);
    expect(problems(list, { approaches: ["fine", { why: "x" }] })).toEqual(["approaches[1].name: required, expected string"]);
    expect(problems(z.strictObject({ value: z.json() }), {})).toEqual([
      "value: required, expected string or number or boolean or null or array or object",
    ]);
  });

  it("names the value itself when the problem has no path, and never dumps zod's issue list", () => {
    const lines = problems(order, null);
    expect(lines).toEqual(["arguments: expected object, got null"]);
    expect(lines.join("\n")).not.toMatch(/"code"|"path"|\[\s*\{/);
  });

  it("counts what it does not spell out", () => {
    const wide = z.strictObject(Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`f${i}`, z.string()])));
    const lines = problems(wide, {});
    expect(lines).toHaveLength(11);
    expect(lines[10]).toBe("… and 5 more problems");
  });
});
