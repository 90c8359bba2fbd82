import { LosslessNumber } from "lossless-json";
import { describe, expect, it } from "vitest";
import { auditEntryChainHash, canonicalJson, chainHash, contentHash } from "./canonical-json.js";
import { chpFloat } from "./float.js";

describe("canonicalJson", () => {
  it("matches the DESIGN.md vector", () => {
    expect(canonicalJson({ b: 1, a: 2 })).toBe('{"a":2,"b":1}');
    expect(contentHash({ b: 1, a: 2 })).toBe("d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772");
  });

  it("sorts keys recursively by code point, keeps array order and UTF-8, drops undefined fields", () => {
    // U+FF61 sorts before U+1F600 by code point although its UTF-16 unit is larger.
    expect(canonicalJson({ z: [3, { y: 1, x: "é✓" }], "\u{1F600}": 1, "\uFF61": 2, a: undefined })).toBe(
      '{"z":[3,{"x":"é✓","y":1}],"\uFF61":2,"\u{1F600}":1}',
    );
    expect(contentHash({ a: 1, b: undefined })).toBe(contentHash({ a: 1 }));
  });

  it("escapes only what JSON requires, like json.dumps(ensure_ascii=False)", () => {
    // Python: json.dumps({"z":[1.0,2,{"é":"✓\n\x01\x7f"}],"a":None,"b":True}, sort_keys=True, separators=(",",":"), ensure_ascii=False)
    expect(canonicalJson({ z: [chpFloat(1), 2, { é: "✓\n\u0001\u007f" }], a: null, b: true })).toBe(
      '{"a":null,"b":true,"z":[1.0,2,{"é":"✓\\n\\u0001\u007f"}]}',
    );
  });

  it("renders integers as integers, other plain numbers and CHP floats as Python floats", () => {
    expect(canonicalJson({ i: 100, f: chpFloat(100), x: 0.55, e: 1.5e-5, big: 1e21, neg: -0 })).toBe(
      '{"big":1000000000000000000000,"e":1.5e-05,"f":100.0,"i":100,"neg":0,"x":0.55}',
    );
    expect(canonicalJson([chpFloat(-0), chpFloat(1e16), 12345678901234567890123n])).toBe("[-0.0,1e+16,12345678901234567890123]");
  });

  it("accepts lossless-json numbers with the same float/integer reading as parseChpJson", () => {
    expect(canonicalJson([new LosslessNumber("100.0"), new LosslessNumber("100"), new LosslessNumber("12345678901234567890")])).toBe(
      "[100.0,100,12345678901234567890]",
    );
  });

  it("refuses what is not JSON, naming where", () => {
    for (const bad of [{ n: Number.NaN }, { n: Infinity }, { d: new Date(0) }, { f: () => 1 }, { s: Symbol("x") }, { m: new Map() }, { u: "\uD800x" }]) {
      expect(() => canonicalJson(bad)).toThrow(expect.objectContaining({ code: "invalid_argument", message: expect.stringMatching(/^input\.\w/) }));
    }
    const cases: Array<[unknown, string]> = [
      [{ a: { b: [1, { c: Number.NaN }] } }, "input.a.b[1].c: NaN is not a JSON number"],
      [{ "k\uD800": 1 }, "input key: a string with an unpaired surrogate has no UTF-8 form"],
      [{ a: [new Date(0)] }, "input.a[0]: a Date object is not JSON"],
      [[1, [2, Infinity]], "input[1][1]: Infinity is not a JSON number"],
      [{ x: { y: new LosslessNumber("1e999") } }, "input.x.y: the number 1e999 is out of the float range"],
      [{ s: "ok", t: ["\uDC00"] }, "input.t[0]: a string with an unpaired surrogate has no UTF-8 form"],
      [Symbol("q"), "input: a symbol is not JSON"],
    ];
    for (const [bad, message] of cases) expect(() => canonicalJson(bad)).toThrow(message);
  });

  it("orders any keys as code points do, surrogate pairs included", () => {
    // Units drawn from ranges where UTF-16 order and code point order agree and where they do not.
    const units = ["a", "Z", "é", "\uD7FF", "\uE000", "\uFF61", "\uFFFF", "\u{10000}", "\u{1F600}", "\u{10FFFF}"];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % units.length;
    for (let round = 0; round < 200; round++) {
      const keys = Array.from({ length: 6 }, () => Array.from({ length: 1 + (next() % 3) }, () => units[next()]).join(""));
      const object = Object.fromEntries(keys.map((k, i) => [k, i]));
      const byCodePoints = [...new Set(keys)].sort((a, b) => {
        const x = [...a].map((c) => c.codePointAt(0)!);
        const y = [...b].map((c) => c.codePointAt(0)!);
        for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
        return x.length - y.length;
      });
      expect(Object.keys(JSON.parse(canonicalJson(object)) as object)).toEqual(byCodePoints);
    }
  });
});

describe("auditEntryChainHash", () => {
  it("is chainHash over the entry with its event, for awkward events and field values", () => {
    const events: unknown[] = [
      { kind: "tool.executed", decision: "ALLOW", step: 3 },
      { z: [chpFloat(1), 2, { é: "✓\n\"q\"" }], "\u{1F600}": null, "\uFF61": true, n: 12345678901234567890123n },
      { text: 'quote " backslash \\ tab \t ctl \u0001 line sep \u2028' },
      {},
    ];
    const strings = ["", "acme", 'a"b', "back\\slash", "ctl\u001f", "ünïcödé", "\u{1F600} pair"];
    let prev = "";
    for (const event of events) {
      for (const s of strings) {
        const fields = { seq: 7, ts: "2026-12-06T06:41:16.123Z", tenant: `t${s}`, session: s, principal: `${s}@example.com`, content_hash: contentHash(event) };
        const sig = auditEntryChainHash(prev, fields, canonicalJson(event));
        expect(sig).toBe(chainHash(prev, { ...fields, event }));
        prev = sig;
      }
    }
  });

  it("refuses a field with an unpaired surrogate, as canonicalJson does", () => {
    const fields = { seq: 1, ts: "t", tenant: "t", session: "bad \uD800", principal: "p", content_hash: "h" };
    expect(() => auditEntryChainHash("", fields, "{}")).toThrow(/unpaired surrogate/);
  });
});

describe("chainHash", () => {
  it("matches the DESIGN.md chain link vector", () => {
    expect(chainHash("", { seq: 1, event: "decision.locked", decision_id: "d-001" })).toBe(
      "9b45b4c2aa09ffc8bf507448b2db317711686aa6a51b99d1371e3e98220e97f7",
    );
  });

  it("depends on the previous signature", () => {
    const entry = { seq: 2, event: "x" };
    expect(chainHash("a", entry)).not.toBe(chainHash("b", entry));
    expect(chainHash("a", entry)).toBe(contentHash({ entry, prev_sig: "a" }));
  });
});
