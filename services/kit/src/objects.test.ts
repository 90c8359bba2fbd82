import { describe, expect, it } from "vitest";
import { isObject, isPlainObject } from "./objects.js";

describe("isObject and isPlainObject", () => {
  class Thing {}
  const cases: Array<[string, unknown, boolean, boolean]> = [
    ["{}", {}, true, true],
    ["parsed JSON object", JSON.parse('{"a":[1]}'), true, true],
    ["null-prototype object", Object.create(null), true, true],
    ["null", null, false, false],
    ["array", [], false, false],
    ["string", "x", false, false],
    ["number", 1, false, false],
    ["undefined", undefined, false, false],
    ["Date", new Date(0), true, false],
    ["Map", new Map(), true, false],
    ["class instance", new Thing(), true, false],
    ["object with a prototype of its own", Object.create({ inherited: 1 }), true, false],
  ];
  it.each(cases)("%s", (_name, value, object, plain) => {
    expect(isObject(value)).toBe(object);
    expect(isPlainObject(value)).toBe(plain);
  });
});
