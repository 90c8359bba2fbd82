import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { argsHash, canonicalJson } from "./canonical-json.js";

// Canonical JSON itself is tested in services/kit/src/chp; this pins what approvals depend on.
describe("the argument hash", () => {
  it("is the SHA-256 of the CHP canonical JSON, with the DESIGN.md vector", () => {
    expect(argsHash({ b: 1, a: 2 })).toBe("d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772");
    const input = { text: "ship it", n: 3, ratio: 0.5, nested: { z: 1, y: [true, null] } };
    expect(argsHash(input)).toBe(createHash("sha256").update(canonicalJson(input), "utf8").digest("hex"));
    expect(canonicalJson(input)).toBe('{"n":3,"nested":{"y":[true,null],"z":1},"ratio":0.5,"text":"ship it"}');
  });

  it("ignores key order and undefined fields and refuses what is not JSON", () => {
    expect(argsHash({ a: 1, b: undefined, c: "x" })).toBe(argsHash({ c: "x", a: 1 }));
    for (const bad of [{ n: Number.NaN }, { d: new Date(0) }]) {
      expect(() => argsHash(bad)).toThrow(expect.objectContaining({ code: "invalid_argument" }));
    }
  });
});
