import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { JSONRPCMessage } from "@modelcontextprotocol/server";
import { TOOL_DEFINITIONS } from "../tools/index.js";
import { compactSchema } from "../definitions/published-schema.js";
import { checkToolArguments, structuralProblems, toolCallRefusal } from "./tool-arguments.js";
import { argumentsSchema, publishedArguments } from "../definitions/tool-schemas.js";

const tools = new Map(TOOL_DEFINITIONS.map((t) => [t.name, t]));

function call(params: unknown, id: string | number = 1): JSONRPCMessage {
  return { jsonrpc: "2.0", id, method: "tools/call", params } as JSONRPCMessage;
}

type Refused = { isError: boolean; structuredContent: { error: { code: string; message: string } } };

/**
 * What a call gets: the guard's JSON-RPC error (`error`), or, for a call the guard lets through,
 * the handler's refusal (`result`) from the guard's structural findings and the tool's schema;
 * undefined when the tool runs.
 */
function refusal(params: unknown): { error?: { code: number; message: string }; result?: Refused; id?: unknown; jsonrpc?: string } | undefined {
  const screened = toolCallRefusal(call(params), tools);
  if (screened.refusal) return screened.refusal as never;
  const p = params as { name: string; arguments?: unknown };
  const tool = tools.get(p.name);
  if (!tool) return undefined;
  const checked = checkToolArguments(tool, p.arguments ?? {}, screened.structural);
  return "refusal" in checked ? { result: checked.refusal as Refused } : undefined;
}

function problem(name: string, args: unknown): string | undefined {
  const reply = refusal({ name, arguments: args });
  if (!reply) return undefined;
  expect(reply.result?.isError).toBe(true);
  expect(reply.result?.structuredContent.error.code).toBe("invalid_argument");
  return reply.result?.structuredContent.error.message;
}

const nest = (n: number): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = [v];
  return v;
};

describe("toolCallRefusal", () => {
  it("lets through what is not a tools/call, and a call its tool can take", () => {
    expect(toolCallRefusal({ jsonrpc: "2.0", id: 1, method: "ping" }, tools)).toEqual({});
    expect(toolCallRefusal({ jsonrpc: "2.0", method: "notifications/initialized" }, tools)).toEqual({});
    expect(refusal({ name: "chaoscore_remember", arguments: { key: "k", value: { nested: [1, "two"] } } })).toBeUndefined();
    expect(refusal({ name: "chp_version" })).toBeUndefined();
  });

  it("answers arguments that are not an object, an unknown tool and a missing name with -32602", () => {
    for (const [args, got] of [
      [null, "null"],
      [[], "array"],
      ["", "string"],
      [7, "number"],
    ] as const) {
      expect(refusal({ name: "chp_version", arguments: args })).toEqual({
        jsonrpc: "2.0",
        id: 1,
        error: { code: -32602, message: `Invalid params: arguments: expected object, got ${got}` },
      });
    }
    expect(refusal({ name: "no_such_tool", arguments: {} })?.error).toEqual({ code: -32602, message: "Unknown tool: no_such_tool" });
    // A misspelt name is answered with the tool it likely means, among those the caller is served.
    expect(refusal({ name: "chaoscore_remeber", arguments: {} })?.error?.message).toBe('Unknown tool: chaoscore_remeber (did you mean "chaoscore_remember"?)');
    const withheld = toolCallRefusal(call({ name: "chaoscore_remeber" }), tools, undefined, (t) => (t.name === "chaoscore_remember" ? "withheld" : undefined));
    expect((withheld.refusal as { error: { message: string } }).error.message).toBe("Unknown tool: chaoscore_remeber");
    expect(refusal({ arguments: {} })?.error).toEqual({ code: -32602, message: "Invalid params: name: required, expected the tool's name (string)" });
    expect(refusal({ name: 5 })?.error?.message).toBe("Invalid params: name: expected the tool's name (string), got number");
    expect(refusal({ name: "x".repeat(10_000) })?.error?.message.length).toBeLessThan(120);
  });

  it("answers a schema failure with an invalid_argument result naming each field, at its real depth", () => {
    expect(problem("chaoscore_remember", { key: 42, value: "v" })).toBe("key: expected string, got number");
    expect(problem("chaoscore_remember", { key: "k" })).toMatch(/^value: required/);
    expect(problem("chaoscore_remember", { key: "k", value: 1, bogus: true })).toBe(
      "bogus: unknown field; accepted fields: key, value, tags, ttl_seconds",
    );
    expect(problem("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "X", notional: "12" } })).toBe(
      "action.notional: expected number, got string",
    );
    // Absent arguments are checked as no arguments.
    expect(refusal({ name: "chaoscore_remember" })?.result?.structuredContent.error.message).toMatch(/key: required.*value: required/);
  });

  it("takes a field written loosely (any case, with or without _ and -) under the tool's own name", () => {
    const remember = tools.get("chaoscore_remember")!;
    const checked = checkToolArguments(remember, { Key: "k", VALUE: { n: 1 }, ttlSeconds: 60, Tags: ["a"] }, undefined);
    expect(checked).toEqual({ args: { key: "k", value: { n: 1 }, ttl_seconds: 60, tags: ["a"] } });
    expect(checkToolArguments(remember, { key: "k", value: 1, "ttl-seconds": 5 }, undefined)).toEqual({ args: { key: "k", value: 1, ttl_seconds: 5 } });
    expect(checkToolArguments(tools.get("chaoscore_execute")!, { planId: "p-1" }, undefined)).toMatchObject({ args: { plan_id: "p-1" } });
    // What the value then fails is named under the tool's name.
    expect(problem("chaoscore_remember", { key: "k", value: 1, ttlSeconds: 0 })).toBe("ttl_seconds: expected at least 1, got 0");
  });

  it("refuses a field given twice, once loosely, and names the field it likely meant for a misspelt one", () => {
    expect(problem("chaoscore_remember", { key: "k", value: 1, ttl_seconds: 5, ttlSeconds: 6 })).toBe("ttlSeconds: the same field as ttl_seconds; give it once");
    expect(problem("chaoscore_remember", { key: "k", value: 1, TtlSeconds: 5, TTL_SECONDS: 6 })).toBe("TTL_SECONDS: the same field as ttl_seconds; give it once");
    expect(problem("chaoscore_remember", { key: "k", value: 1, ttl_second: 5 })).toBe(
      'ttl_second: unknown field (did you mean "ttl_seconds"?); accepted fields: key, value, tags, ttl_seconds',
    );
  });

  it("refuses nesting beyond 64 levels, a __proto__ field and an overflowed number before any schema runs", () => {
    expect(problem("chp_content_hash", { value: nest(63) })).toBeUndefined();
    expect(problem("chp_content_hash", { value: nest(64) })).toBe("value[0][0][0][0][0][0][0]…: nests deeper than 64 levels");
    // 10 000 levels would overflow zod's stack; it never gets to run.
    expect(problem("evaluate_tool_approval", { call: { tool: "t", resource: "r", arguments: { a: nest(10_000) } } })).toMatch(
      /^call\.arguments\.a\[0\]\[0\]\[0\]\[0\]\[0\]…: nests deeper than 64 levels$/,
    );
    const withProto = JSON.parse('{"key":"k","value":{"ok":1,"__proto__":{"polluted":true}}}') as Record<string, unknown>;
    expect(problem("chaoscore_remember", withProto)).toBe('value.__proto__: "__proto__" is not accepted as a field name');
    expect(problem("chaoscore_remember", JSON.parse('{"key":"k","value":[1e400]}'))).toBe(
      "value[0]: the number is out of range (at most about ±1.8e308)",
    );
  });

  it("can check every tool's schema without throwing", () => {
    for (const tool of TOOL_DEFINITIONS) {
      expect(() => toolCallRefusal(call({ name: tool.name, arguments: { zz_unknown: 1 } }), tools), tool.name).not.toThrow();
      expect(problem(tool.name, { zz_unknown: 1 }), tool.name).toMatch(/zz_unknown: unknown field/);
    }
  });
});

describe("structuralProblems", () => {
  it("walks a million levels without recursion", () => {
    expect(structuralProblems({ v: nest(1_000_000) as never })).toEqual(["v[0][0][0][0][0][0][0]…: nests deeper than 64 levels"]);
  });

  it("refuses arguments holding more values than any call needs, before zod walks them", () => {
    expect(structuralProblems({ v: new Array<number>(99_999).fill(0) })).toEqual([]);
    expect(structuralProblems({ v: new Array<number>(100_000).fill(0) })).toEqual([
      "arguments: more than 100000 values (objects, arrays and their members); send less at once",
    ]);
    // Counted at every depth, not only at the top.
    const wide = { v: Array.from({ length: 1000 }, () => ({ a: new Array<number>(100).fill(1) })) };
    expect(structuralProblems(wide)).toEqual(["arguments: more than 100000 values (objects, arrays and their members); send less at once"]);
  });

  it("names each problem at its real path, in the order the fields were written", () => {
    const args = JSON.parse('{"a":{"b":[0,{"c":1e400}]},"d":{"__proto__":{}},"e":[-1e999]}') as Record<string, unknown>;
    expect(structuralProblems(args)).toEqual([
      "a.b[1].c: the number is out of range (at most about ±1.8e308)",
      'd.__proto__: "__proto__" is not accepted as a field name',
      "e[0]: the number is out of range (at most about ±1.8e308)",
    ]);
  });
});

describe("argumentsSchema", () => {
  it("publishes every tool's arguments with unknown fields refused", () => {
    for (const tool of TOOL_DEFINITIONS) {
      expect(argumentsSchema(tool.input).safeParse({ zz_unknown: 1 }).success, tool.name).toBe(false);
      expect(argumentsSchema(tool.input)).toBe(argumentsSchema(tool.input));
    }
  });

  it("is what the SDK publishes, zod's draft-07 conversion compacted, while the SDK's own check lets every call through to the handler", async () => {
    for (const tool of TOOL_DEFINITIONS) {
      const published = publishedArguments(tool.input)["~standard"];
      expect(published.jsonSchema.input({ target: "draft-2020-12" }), tool.name).toEqual(
        compactSchema(z.toJSONSchema(argumentsSchema(tool.input), { target: "draft-7", io: "input" }) as Record<string, unknown>),
      );
      expect(published.jsonSchema.input({ target: "draft-2020-12" })).toMatchObject({ additionalProperties: false });
      expect(await published.validate({ zz_unknown: 1 })).toEqual({ value: { zz_unknown: 1 } });
    }
  });
});
