import { ChaosError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { escapeLike, resolveLimit, serializeValue, validateKey, validateTags, validateTtlSeconds } from "./validation.js";

function invalid(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    expect((err as ChaosError).code).toBe("invalid_argument");
    return (err as ChaosError).message;
  }
  throw new Error("expected invalid_argument");
}

describe("memory validation", () => {
  it("counts key length in characters, not UTF-16 units or bytes", () => {
    expect(validateKey("🎉".repeat(512))).toHaveLength(1024);
    expect(invalid(() => validateKey("🎉".repeat(513)))).toBe("key is 513 characters; the limit is 512");
    expect(invalid(() => validateKey("a\u007fb"))).toMatch(/control characters/);
    expect(invalid(() => validateKey("a\u0085b"))).toMatch(/control characters/);
    expect(invalid(() => validateKey(42))).toBe("key must be a string");
  });

  it("keeps tags distinct and in order, and limits them after dropping repeats", () => {
    expect(validateTags(undefined)).toEqual([]);
    expect(validateTags(["x", "y", "x"])).toEqual(["x", "y"]);
    const many = Array.from({ length: 40 }, (_, i) => `t${i % 32}`);
    expect(validateTags(many)).toHaveLength(32);
  });

  it("serialises values compactly and measures them in UTF-8 bytes", () => {
    expect(serializeValue({ a: [1, "é"] })).toBe('{"a":[1,"é"]}');
    expect(serializeValue(null)).toBe("null");
    // 'é' is two bytes: 524287 of them plus quotes is 1048576 bytes, exactly the limit.
    expect(() => serializeValue("é".repeat(524_287))).not.toThrow();
    expect(invalid(() => serializeValue("é".repeat(524_288)))).toMatch(/1048578 bytes as JSON; the limit is 1048576 bytes \(1 MiB\)/);
    expect(invalid(() => serializeValue({ f: () => 1 }))).toMatch(/value\.f is function/);
    expect(invalid(() => serializeValue(10n))).toMatch(/bigint/);
    expect(invalid(() => serializeValue(new Map()))).toMatch(/not a plain JSON object/);
    expect(serializeValue(Object.create(null) as object)).toBe("{}");
  });

  it("checks TTLs and resolves page sizes", () => {
    expect(validateTtlSeconds(undefined)).toBe(0);
    expect(validateTtlSeconds(4_294_967_295)).toBe(4_294_967_295);
    expect(invalid(() => validateTtlSeconds(4_294_967_296))).toMatch(/ttl_seconds/);
    expect(invalid(() => validateTtlSeconds("10"))).toMatch(/ttl_seconds/);
    expect(resolveLimit(undefined)).toBe(20);
    expect(resolveLimit(0)).toBe(20);
    expect(resolveLimit(7)).toBe(7);
    expect(resolveLimit(101)).toBe(100);
    expect(invalid(() => resolveLimit(2.5))).toMatch(/limit/);
  });

  it("escapes LIKE wildcards and the escape character", () => {
    expect(escapeLike("100%_a\\b")).toBe("100\\%\\_a\\\\b");
    expect(escapeLike("plain")).toBe("plain");
  });
});
