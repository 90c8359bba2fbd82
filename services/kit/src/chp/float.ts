import { ChaosError } from "../errors.js";

/**
 * A number that CHP hashes as a float. JSON has one number type but the reference
 * implementation (Python) hashes `100.0` and `100` differently, so a gate number is wrapped to
 * say which one it is; {@link canonicalJson} renders it with {@link pythonFloatRepr}.
 */
export class ChpFloat {
  /** The IEEE-754 value; always finite. */
  readonly value: number;

  constructor(value: number) {
    assertFinite(value, "a CHP float");
    this.value = value;
  }

  /** Lets arithmetic and comparisons (`a < b`, `a + b`) use the plain value. */
  valueOf(): number {
    return this.value;
  }

  /** The Python `repr(float)` text, e.g. `100.0`. */
  toString(): string {
    return pythonFloatRepr(this.value);
  }

  /** `JSON.stringify` of a float gives its Python text as a number, not a string. */
  toJSON(): number {
    return this.value;
  }
}

/** Marks `n` as a CHP float (`chpFloat(100)` hashes as `100.0`). NaN and ±Infinity throw. */
export function chpFloat(n: number): ChpFloat {
  return new ChpFloat(n);
}

/** True when `value` is a {@link ChpFloat}. */
export function isChpFloat(value: unknown): value is ChpFloat {
  return value instanceof ChpFloat;
}

function assertFinite(n: number, what: string): void {
  if (typeof n !== "number" || !Number.isFinite(n)) {
    // Python's json.dumps(allow_nan=False) refuses these too; a hash over "NaN" is not JSON.
    throw new ChaosError("invalid_argument", `${what} must be a finite number, got ${String(n)}`);
  }
}

/**
 * Renders `n` exactly as Python's `repr(float(n))`: the shortest digits that round-trip
 * (the same digits JavaScript chooses), in fixed notation with at least one fractional digit
 * when the decimal exponent is in [-4, 16) (`100.0`, `0.0001`, `-0.0`), otherwise in exponent
 * notation with a sign and at least two exponent digits (`1e+16`, `1.5e-05`, `5e-324`).
 * NaN and ±Infinity are refused (`invalid_argument`).
 */
export function pythonFloatRepr(n: number): string {
  assertFinite(n, "a float");
  if (n === 0) return Object.is(n, -0) ? "-0.0" : "0.0";
  const sign = n < 0 ? "-" : "";
  // toExponential() without a precision yields the shortest round-trip digits (ECMA-262
  // Number::toString), which is the digit string Python's repr picks as well.
  const match = /^(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(Math.abs(n).toExponential());
  if (match === null) throw new ChaosError("internal", `cannot decompose ${n}`);
  const digits = match[1]! + (match[2] ?? "");
  const exp = Number(match[3]);
  if (exp >= -4 && exp < 16) {
    if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
    const whole = digits.slice(0, exp + 1).padEnd(exp + 1, "0");
    const frac = digits.slice(exp + 1);
    return `${sign}${whole}.${frac === "" ? "0" : frac}`;
  }
  const mantissa = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  const expText = String(Math.abs(exp)).padStart(2, "0");
  return `${sign}${mantissa}e${exp < 0 ? "-" : "+"}${expText}`;
}
