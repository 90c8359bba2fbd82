import { createHash } from "node:crypto";
import { isLosslessNumber } from "lossless-json";
import { ChaosError } from "../errors.js";
import { isChpFloat, pythonFloatRepr } from "./float.js";
import { losslessNumberValue } from "./parse.js";

/** Orders strings by Unicode code point (as Python's `sort_keys` does), not by UTF-16 unit. */
function compareCodePoints(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

// In a `u` regex a surrogate range matches only unpaired surrogates.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

function writeString(s: string, path: string): string {
  // Unpaired surrogates have no UTF-8 encoding; Python's encoder fails on them as well.
  if (LONE_SURROGATE.test(s)) throw new ChaosError("invalid_argument", `${path}: a string with an unpaired surrogate has no UTF-8 form`);
  // JSON.stringify leaves non-ASCII as is and escapes only `"`, `\` and C0 controls, with the
  // same short forms and lowercase \u00xx that Python's json.dumps(ensure_ascii=False) uses.
  return JSON.stringify(s);
}

function writeNumber(n: number, path: string): string {
  if (!Number.isFinite(n)) throw new ChaosError("invalid_argument", `${path}: ${n} is not a JSON number`);
  if (Number.isInteger(n)) {
    // BigInt spells every digit (1e21 → 1000000000000000000000), as a Python int would; -0 is 0.
    return BigInt(n).toString();
  }
  return pythonFloatRepr(n);
}

function write(value: unknown, path: string): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return writeString(value, path);
    case "number":
      return writeNumber(value, path);
    case "bigint":
      // An integer beyond 2^53 from parseChpJson: kept exact, as Python keeps its ints.
      return value.toString();
    case "object": {
      if (isChpFloat(value)) return pythonFloatRepr(value.value);
      if (isLosslessNumber(value)) return write(losslessNumberValue(value.value, path), path);
      if (Array.isArray(value)) return `[${value.map((v, i) => write(v, `${path}[${i}]`)).join(",")}]`;
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) {
        throw new ChaosError("invalid_argument", `${path}: a ${(value as object).constructor?.name ?? "non-plain"} object is not JSON`);
      }
      const entries = Object.entries(value as Record<string, unknown>)
        // Absent and undefined fields are the same value, as in JSON.stringify.
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => compareCodePoints(a, b));
      return `{${entries.map(([k, v]) => `${writeString(k, `${path} key`)}:${write(v, `${path}.${k}`)}`).join(",")}}`;
    }
    default:
      throw new ChaosError("invalid_argument", `${path}: a ${typeof value} is not JSON`);
  }
}

/**
 * CHP canonical JSON: object keys sorted recursively by code point, separators `,` and `:`
 * with no whitespace, UTF-8 as is, arrays in order, undefined fields dropped. Numbers: a
 * {@link ChpFloat} renders as Python's `repr(float)` (`100.0`); a plain number renders as an
 * integer when it is one (`100`) and as `repr(float)` otherwise (`0.55`, `1e-05`); a bigint or
 * a lossless-json number from {@link parseChpJson} keeps its exact integer or float form.
 * NaN, Infinity, unpaired surrogates and non-plain objects are refused (`invalid_argument`).
 */
export function canonicalJson(value: unknown): string {
  return write(value, "input");
}

/** Lowercase hex SHA-256 of the canonical JSON's UTF-8 bytes (CHP `content_hash`). */
export function contentHash(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value), "utf8").digest("hex");
}

/**
 * One link of a CHP hash chain: `contentHash({prev_sig, entry})`. The first link of a chain
 * has `prevSig` `""`.
 */
export function chainHash(prevSig: string, entry: unknown): string {
  return contentHash({ prev_sig: prevSig, entry });
}
