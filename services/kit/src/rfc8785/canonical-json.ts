import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { ChaosError } from "../errors.js";

/**
 * RFC 8785 (JSON Canonicalization Scheme) through the `canonicalize` package, written by the
 * RFC's co-author: members sorted by UTF-16 code unit, ECMAScript number formatting, minimal
 * string escapes, no whitespace. It stands beside the CHP canonical form (`../chp/`), which follows
 * Python's `json.dumps` and stays as it is: the two are different formats for different peers.
 *
 * The value is checked first so a value that is not I-JSON fails with the field's path named;
 * the library would otherwise drop `undefined`, call `toJSON` or throw without a path.
 */
export function canonicalJsonRfc8785(value: unknown): string {
  check(value, "$");
  const text = canonicalize(value);
  // check() refuses every value canonicalize maps to undefined, so this is only a guard.
  if (text === undefined) throw new ChaosError("invalid_argument", "$: the value has no JSON form");
  return text;
}

/** Lowercase hex SHA-256 of the RFC 8785 form's UTF-8 bytes. */
export function sha256Rfc8785(value: unknown): string {
  return createHash("sha256").update(canonicalJsonRfc8785(value), "utf8").digest("hex");
}

// In a `u` regex a surrogate range matches only unpaired surrogates.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

function fail(path: string, what: string): never {
  throw new ChaosError("invalid_argument", `${path}: ${what}`);
}

function check(value: unknown, path: string): void {
  if (value === null) return;
  switch (typeof value) {
    case "boolean":
      return;
    case "string":
      if (LONE_SURROGATE.test(value)) fail(path, "a string with an unpaired surrogate is not I-JSON (RFC 8785 §3.2.2.2)");
      return;
    case "number":
      if (!Number.isFinite(value)) fail(path, `${value} is not a JSON number`);
      return;
    case "object": {
      if (Array.isArray(value)) {
        value.forEach((v, i) => {
          if (v === undefined) fail(`${path}[${i}]`, "undefined is not a JSON value");
          check(v, `${path}[${i}]`);
        });
        return;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) {
        fail(path, `a ${(value as object).constructor?.name ?? "non-plain"} object is not JSON`);
      }
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        const at = `${path}.${k}`;
        if (LONE_SURROGATE.test(k)) fail(at, "a member name with an unpaired surrogate is not I-JSON");
        // An absent member and an undefined one are the same value, as in JSON.stringify.
        if (v === undefined) continue;
        check(v, at);
      }
      return;
    }
    default:
      fail(path, `a ${typeof value} is not a JSON value`);
  }
}
