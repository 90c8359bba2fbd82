import { createHash } from "node:crypto";
import { ChaosError } from "@chaos-core/kit";

/** Orders strings by Unicode code point (as Python's `sort_keys` does), not by UTF-16 unit. */
function compareCodePoints(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = (x[i] as string).codePointAt(0)! - (y[i] as string).codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function write(value: unknown, path: string): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      // JSON.stringify leaves non-ASCII as is and escapes only quotes, backslashes and controls.
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new ChaosError("invalid_argument", `${path}: ${value} is not a JSON number`);
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) return `[${value.map((v, i) => write(v, `${path}[${i}]`)).join(",")}]`;
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) {
        throw new ChaosError("invalid_argument", `${path}: a ${(value as object).constructor?.name ?? "non-plain"} object is not JSON`);
      }
      const entries = Object.entries(value as Record<string, unknown>)
        // Absent and undefined fields are the same call, as in JSON.stringify.
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => compareCodePoints(a, b));
      return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${write(v, `${path}.${k}`)}`).join(",")}}`;
    }
    default:
      throw new ChaosError("invalid_argument", `${path}: a ${typeof value} is not JSON`);
  }
}

/**
 * Canonical JSON: object keys sorted recursively by code point, separators `,` and `:` with no
 * whitespace, UTF-8 as is, arrays in order, undefined fields dropped; NaN, Infinity and
 * non-plain objects are refused (`invalid_argument`). Numbers render as JavaScript renders them.
 */
export function canonicalJson(value: unknown): string {
  return write(value, "input");
}

/**
 * The hash an approval (and later a receipt) is bound to: lowercase hex SHA-256 of the canonical
 * JSON of a step's validated input. Validated, so fields the schema strips (such as an agent's
 * `confirmed: true`) are not part of the call and cannot change its hash.
 */
export function argsHash(validatedInput: unknown): string {
  return createHash("sha256").update(canonicalJson(validatedInput), "utf8").digest("hex");
}
