import { describe, expect, it } from "vitest";
import { ChpFloat, chpFloat, pythonFloatRepr } from "./float.js";

// Expected texts are Python 3's repr(float(x)) for each input.
const REPR: ReadonlyArray<readonly [number, string]> = [
  [0.1, "0.1"],
  [1e16, "1e+16"],
  [1e-5, "1e-05"],
  // The integer literal is not a double; Python rounds it the same way when it converts it.
  [Number("123456789012345678"), "1.2345678901234568e+17"],
  [-50, "-50.0"],
  [0.55, "0.55"],
  [249.99, "249.99"],
  [5e-324, "5e-324"],
  [1.7976931348623157e308, "1.7976931348623157e+308"],
  [-0, "-0.0"],
  [0, "0.0"],
  [100, "100.0"],
  [1e15, "1000000000000000.0"],
  [9999999999999998, "9999999999999998.0"],
  [1e-4, "0.0001"],
  [0.00012, "0.00012"],
  [1.5e-5, "1.5e-05"],
  [1e22, "1e+22"],
  [1e100, "1e+100"],
  [2.5e-300, "2.5e-300"],
  [1 / 3, "0.3333333333333333"],
  [2 ** 53, "9007199254740992.0"],
  [-1e-7, "-1e-07"],
  [123.456, "123.456"],
  [1e21, "1e+21"],
  [1.0000000000000002, "1.0000000000000002"],
];

describe("pythonFloatRepr", () => {
  it.each(REPR)("renders %d as Python's repr %s", (n, text) => {
    expect(pythonFloatRepr(n)).toBe(text);
    // What Python prints must read back as the same double.
    expect(Object.is(Number(text), n)).toBe(true);
  });

  it("refuses NaN and the infinities with a clear error", () => {
    for (const bad of [Number.NaN, Infinity, -Infinity]) {
      expect(() => pythonFloatRepr(bad)).toThrow(expect.objectContaining({ code: "invalid_argument", message: expect.stringContaining("finite") }));
      expect(() => chpFloat(bad)).toThrow(expect.objectContaining({ code: "invalid_argument" }));
    }
  });
});

describe("ChpFloat", () => {
  it("compares and adds as its value and prints as Python does", () => {
    const f = chpFloat(250);
    expect(f).toBeInstanceOf(ChpFloat);
    expect(+f + 1).toBe(251);
    expect(f >= chpFloat(249.99)).toBe(true);
    expect(String(f)).toBe("250.0");
    expect(JSON.stringify({ f })).toBe('{"f":250}');
  });
});
