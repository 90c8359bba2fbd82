import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalJson as chpCanonicalJson } from "../chp/canonical-json.js";
import { canonicalJsonRfc8785, sha256Rfc8785 } from "./canonical-json.js";

/** A double from its IEEE 754 bit pattern, as RFC 8785 Appendix B lists them. */
function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

describe("RFC 8785 canonical JSON", () => {
  it("formats numbers as RFC 8785 Appendix B lists them", () => {
    const vectors: Array<[string, string]> = [
      ["0000000000000000", "0"],
      ["8000000000000000", "0"],
      ["0000000000000001", "5e-324"],
      ["8000000000000001", "-5e-324"],
      ["7fefffffffffffff", "1.7976931348623157e+308"],
      ["ffefffffffffffff", "-1.7976931348623157e+308"],
      ["4340000000000000", "9007199254740992"],
      ["c340000000000000", "-9007199254740992"],
      ["4430000000000000", "295147905179352830000"],
      ["44b52d02c7e14af5", "9.999999999999997e+22"],
      ["44b52d02c7e14af6", "1e+23"],
      ["44b52d02c7e14af7", "1.0000000000000001e+23"],
      ["444b1ae4d6e2ef4e", "999999999999999700000"],
      ["444b1ae4d6e2ef4f", "999999999999999900000"],
      ["444b1ae4d6e2ef50", "1e+21"],
      ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
      ["3eb0c6f7a0b5ed8d", "0.000001"],
      ["41b3de4355555553", "333333333.3333332"],
      ["41b3de4355555554", "333333333.33333325"],
      ["41b3de4355555555", "333333333.3333333"],
      ["41b3de4355555556", "333333333.3333334"],
      ["41b3de4355555557", "333333333.33333343"],
      ["becbf647612f3696", "-0.0000033333333333333333"],
      ["43143ff3c1cb0959", "1424953923781206.2"],
    ];
    for (const [bits, text] of vectors) expect([bits, canonicalJsonRfc8785(fromBits(bits))]).toEqual([bits, text]);
  });

  it("refuses NaN and the infinities (Appendix B), naming the field", () => {
    expect(() => canonicalJsonRfc8785({ a: [1, Number.NaN] })).toThrow("$.a[1]: NaN is not a JSON number");
    expect(() => canonicalJsonRfc8785({ b: Number.POSITIVE_INFINITY })).toThrow("$.b: Infinity is not a JSON number");
    expect(() => canonicalJsonRfc8785(-Infinity)).toThrow("$: -Infinity is not a JSON number");
  });

  it("serialises the §3.2.2 example exactly (numbers, string escapes, literals)", () => {
    const input = JSON.parse(
      '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],' +
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}',
    ) as unknown;
    expect(canonicalJsonRfc8785(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it("sorts members by UTF-16 code unit (§3.2.3): the emoji's surrogates before U+FB33", () => {
    const input = {
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis",
    };
    expect(canonicalJsonRfc8785(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it("refuses what is not I-JSON, naming the path", () => {
    expect(() => canonicalJsonRfc8785({ s: "a\ud800" })).toThrow("$.s: a string with an unpaired surrogate");
    expect(() => canonicalJsonRfc8785({ d: new Date(0) })).toThrow("$.d: a Date object is not JSON");
    expect(() => canonicalJsonRfc8785({ n: 1n })).toThrow("$.n: a bigint is not a JSON value");
    expect(() => canonicalJsonRfc8785([undefined])).toThrow("$[0]: undefined is not a JSON value");
    expect(() => canonicalJsonRfc8785(undefined)).toThrow("$: a undefined is not a JSON value");
  });

  it("drops undefined members, as an absent member is the same value", () => {
    expect(canonicalJsonRfc8785({ b: 1, a: undefined })).toBe('{"b":1}');
  });

  it("differs from the CHP form where the two specifications differ, which stays as it was", () => {
    // CHP writes Python's float repr and sorts by code point; RFC 8785 writes ECMAScript's.
    expect(canonicalJsonRfc8785({ x: 1e21 })).toBe('{"x":1e+21}');
    expect(chpCanonicalJson({ x: 1e21 })).not.toBe('{"x":1e+21}');
  });

  it("hashes the canonical form's UTF-8 bytes with SHA-256", () => {
    const hex = createHash("sha256").update('{"a":"€","b":[1,2]}', "utf8").digest("hex");
    expect(sha256Rfc8785({ b: [1, 2], a: "€" })).toBe(hex);
  });
});
