import { parse } from "lossless-json";
import { ChaosError } from "../errors.js";
import { ChpFloat } from "./float.js";

/**
 * Maps the text of a JSON number to the value CHP hashes, the way Python's `json.loads` reads
 * it: with a `.`, `e` or `E` it is a float ({@link ChpFloat}); otherwise an integer — a plain
 * number when it is a safe integer, else an exact `bigint` (Python ints are unbounded, so the
 * hash of `12345678901234567890` keeps every digit instead of silently rounding).
 * A float that overflows to infinity (`1e400`) is refused: Python would read `inf`, which
 * canonical JSON cannot write.
 */
export function losslessNumberValue(text: string, path = "input"): number | bigint | ChpFloat {
  if (/[.eE]/.test(text)) {
    const n = Number(text);
    if (!Number.isFinite(n)) throw new ChaosError("invalid_argument", `${path}: the number ${text} is out of the float range`);
    return new ChpFloat(n);
  }
  const big = BigInt(text);
  if (big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER)) {
    // -0 as an integer is 0 in Python too.
    return Number(big);
  }
  return big;
}

/**
 * Parses JSON text for CHP hashing without losing what a number was written as: `100.0`
 * becomes a {@link ChpFloat} (hashes as `100.0`), `100` a number (hashes as `100`), an integer
 * beyond ±(2^53−1) an exact `bigint`. Invalid JSON, and a key repeated with a different value
 * (Python would keep the last one silently, so two readers could hash different objects), are
 * refused with `invalid_argument`.
 */
export function parseChpJson(text: string): unknown {
  try {
    // lossless-json refuses a key repeated with a different value by default.
    return parse(text, null, (n) => losslessNumberValue(n));
  } catch (err) {
    if (err instanceof ChaosError) throw err;
    throw new ChaosError("invalid_argument", `not valid JSON: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}
