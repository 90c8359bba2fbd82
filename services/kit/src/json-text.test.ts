import { describe, expect, it } from "vitest";
import { scanJsonText } from "./json-text.js";

const nest = (n: number, inner = "1") => "[".repeat(n) + inner + "]".repeat(n);

describe("scanJsonText", () => {
  it("finds the first place nesting goes beyond the limit, with its path", () => {
    expect(scanJsonText(nest(3), { maxDepth: 3 }).tooDeep).toBeUndefined();
    expect(scanJsonText(nest(4), { maxDepth: 3 }).tooDeep).toEqual([0, 0, 0]);
    const text = `{"a":[1,{"b":${nest(3)}}],"c":2}`;
    expect(scanJsonText(text, { maxDepth: 4 }).tooDeep).toEqual(["a", 1, "b", 0]);
    expect(scanJsonText(text, { maxDepth: 6 }).tooDeep).toBeUndefined();
  });

  it("reads a million levels without recursion or a frame per level", () => {
    const scan = scanJsonText(`{"id":7,"x":${nest(1_000_000)}}`, { maxDepth: 64 });
    expect(scan.tooDeep).toHaveLength(64);
    expect(scan.top.get("id")).toBe(7);
  });

  it("reports nesting inside `within` apart from the rest", () => {
    const call = (args: string, meta = "{}") =>
      `{"jsonrpc":"2.0","id":"r1","method":"tools/call","params":{"_meta":${meta},"name":"t","arguments":${args}}}`;
    const inside = scanJsonText(call(`{"v":${nest(10)}}`), { maxDepth: 8, within: ["params", "arguments"] });
    expect(inside.tooDeep).toBeUndefined();
    expect(inside.tooDeepWithin?.slice(0, 3)).toEqual(["params", "arguments", "v"]);
    const outside = scanJsonText(call("{}", `{"m":${nest(10)}}`), { maxDepth: 8, within: ["params", "arguments"] });
    expect(outside.tooDeep?.slice(0, 3)).toEqual(["params", "_meta", "m"]);
    expect(outside.tooDeepWithin).toBeUndefined();
  });

  it("keeps the top-level id and method even when the text is not valid JSON", () => {
    const scan = scanJsonText('{"jsonrpc":"2.0","method":"tools/call","params":{"id":99,"x":NaN},"id":"a\\"b",}', { maxDepth: 64 });
    expect(scan.top.get("id")).toBe('a"b');
    expect(scan.top.get("method")).toBe("tools/call");
    expect(scan.notJson).toEqual({ token: "NaN", path: ["params", "x"] });
    expect(scanJsonText('{"id":12,"params":[1,-Infinity]}', { maxDepth: 64 }).notJson).toEqual({ token: "-Infinity", path: ["params", 1] });
    // Nested ids are not the request's.
    expect(scanJsonText('{"params":{"id":5}}', { maxDepth: 64 }).top.has("id")).toBe(false);
  });

  it("says which string the text ended in", () => {
    expect(scanJsonText('{"params":{"arguments":{"value":"abc', { maxDepth: 64 }).unterminated).toEqual({
      path: ["params", "arguments", "value"],
      inKey: false,
    });
    expect(scanJsonText('{"params":{"list":["a","b', { maxDepth: 64 }).unterminated).toEqual({ path: ["params", "list", 1], inKey: false });
    expect(scanJsonText('{"params":{"ke', { maxDepth: 64 }).unterminated).toEqual({ path: ["params"], inKey: true });
    expect(scanJsonText('{"a":"b"}', { maxDepth: 64 }).unterminated).toBeUndefined();
  });

  it("is not fooled by brackets, quotes and escapes inside strings", () => {
    const scan = scanJsonText(`{"s":"[[[[\\"{{{{\\\\","id":3}`, { maxDepth: 2 });
    expect(scan.tooDeep).toBeUndefined();
    expect(scan.top.get("id")).toBe(3);
  });
});
