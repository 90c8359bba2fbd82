import { describe, expect, it } from "vitest";
import { argsHash, canonicalJson } from "./canonical-json.js";

describe("canonical JSON and the argument hash", () => {
  it("matches the reference vector of DESIGN.md", () => {
    expect(canonicalJson({ b: 1, a: 2 })).toBe('{"a":2,"b":1}');
    expect(argsHash({ b: 1, a: 2 })).toBe("d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772");
  });

  it("sorts keys recursively by code point, keeps array order and UTF-8, drops undefined fields", () => {
    expect(canonicalJson({ z: [3, { y: 1, x: "é✓" }], "\u{1F600}": 1, "\uFF61": 2, a: undefined })).toBe(
      '{"z":[3,{"x":"é✓","y":1}],"\uFF61":2,"\u{1F600}":1}',
    );
    expect(argsHash({ a: 1, b: undefined })).toBe(argsHash({ a: 1 }));
  });

  it("refuses what is not JSON", () => {
    for (const bad of [{ n: Number.NaN }, { n: Infinity }, { d: new Date(0) }, { f: () => 1 }, [1n]]) {
      expect(() => canonicalJson(bad)).toThrow(expect.objectContaining({ code: "invalid_argument" }));
    }
  });
});
