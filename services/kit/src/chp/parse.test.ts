import { describe, expect, it } from "vitest";
import { canonicalJson, contentHash } from "./canonical-json.js";
import { ChpFloat } from "./float.js";
import { parseChpJson } from "./parse.js";

describe("parseChpJson", () => {
  it("keeps floats floats and integers integers, as Python's json.loads does", () => {
    const text = '{"n":100.0,"m":100,"big":12345678901234567890123,"x":[1e2,-0.0,1E-5,-0],"s":"é\\u00e9"}';
    const value = parseChpJson(text) as Record<string, unknown>;
    expect(value.n).toBeInstanceOf(ChpFloat);
    expect(value.m).toBe(100);
    expect(value.big).toBe(12345678901234567890123n);
    // Python: json.dumps(json.loads(text), sort_keys=True, separators=(",",":"), ensure_ascii=False) and its sha256.
    expect(canonicalJson(value)).toBe('{"big":12345678901234567890123,"m":100,"n":100.0,"s":"éé","x":[100.0,-0.0,1e-05,0]}');
    expect(contentHash(value)).toBe("98195f853f257c29729cd0331d43d30f0e9322c3c1ae3f7af583aed45364807d");
  });

  it("keeps the largest safe integer a number and the next one exact", () => {
    expect(parseChpJson("[9007199254740991,9007199254740993,-9007199254740993]")).toEqual([
      9007199254740991,
      9007199254740993n,
      -9007199254740993n,
    ]);
  });

  it("refuses invalid JSON, out-of-range floats and conflicting duplicate keys", () => {
    for (const bad of ["{", "{'a':1}", "[NaN]", "[1e400]", '{"a":1,"a":2}', ""]) {
      expect(() => parseChpJson(bad)).toThrow(expect.objectContaining({ code: "invalid_argument" }));
    }
    expect(() => parseChpJson("[1e400]")).toThrow(/out of the float range/);
  });
});
