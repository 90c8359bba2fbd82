import { hash } from "node:crypto";
import { isLosslessNumber } from "lossless-json";
import { ChaosError } from "../errors.js";
import { type ChpFloat, isChpFloat, pythonFloatRepr } from "./float.js";
import { losslessNumberValue } from "./parse.js";

/** Code point order the long way: for strings whose first difference involves a surrogate. */
function compareCodePointsSpread(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

const isSurrogate = (unit: number) => unit >= 0xd800 && unit <= 0xdfff;

/**
 * Orders strings by Unicode code point (as Python's `sort_keys` does), not by UTF-16 unit. Where
 * neither unit at the first difference is a surrogate the two orders agree (the prefix before it
 * is equal, so both code points start there): only a difference at a surrogate takes the long way.
 */
function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    return isSurrogate(x) || isSurrogate(y) ? compareCodePointsSpread(a, b) : x - y;
  }
  return a.length - b.length;
}

// In a `u` regex a surrogate range matches only unpaired surrogates.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * What {@link write} refuses, thrown up through the values that hold it: each adds its step
 * (`.key`, `[i]`, ` key`) on the way, so no path is built unless something is refused.
 */
class Refusal {
  readonly steps: string[] = [];
  constructor(readonly explain: (path: string) => string) {}
  at(step: string): Refusal {
    this.steps.push(step);
    return this;
  }
}

/** `err` with `step` added when it is a {@link Refusal}; anything else as it is. */
const via = (err: unknown, step: string): unknown => (err instanceof Refusal ? err.at(step) : err);

/** What JSON must escape in a string: a quote, a backslash, a C0 control. */
// eslint-disable-next-line no-control-regex -- the C0 controls are what it looks for
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

function writeString(s: string): string {
  // Unpaired surrogates have no UTF-8 encoding; Python's encoder fails on them as well.
  if (LONE_SURROGATE.test(s)) throw new Refusal((path) => `${path}: a string with an unpaired surrogate has no UTF-8 form`);
  // JSON.stringify leaves non-ASCII as is and escapes only `"`, `\` and C0 controls, with the
  // same short forms and lowercase \u00xx that Python's json.dumps(ensure_ascii=False) uses. A
  // string with none of those is written as is, at a third of JSON.stringify's cost.
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

function writeNumber(n: number): string {
  if (!Number.isFinite(n)) throw new Refusal((path) => `${path}: ${n} is not a JSON number`);
  // A safe integer prints every digit as is (and -0 as 0), as a Python int would.
  if (Number.isSafeInteger(n)) return String(n);
  if (Number.isInteger(n)) {
    // BigInt spells every digit (1e21 → 1000000000000000000000), where String would not.
    return BigInt(n).toString();
  }
  return pythonFloatRepr(n);
}

function writeObject(value: Record<string, unknown>): string {
  const keys = Object.keys(value).sort(compareCodePoints);
  let out = "{";
  for (const key of keys) {
    const v = value[key];
    // Absent and undefined fields are the same value, as in JSON.stringify.
    if (v === undefined) continue;
    let k: string;
    try {
      k = writeString(key);
    } catch (err) {
      throw via(err, " key");
    }
    try {
      out += `${out.length > 1 ? "," : ""}${k}:${write(v)}`;
    } catch (err) {
      throw via(err, `.${key}`);
    }
  }
  return `${out}}`;
}

function writeArray(value: readonly unknown[]): string {
  let out = "[";
  for (let i = 0; i < value.length; i++) {
    try {
      out += `${i > 0 ? "," : ""}${write(value[i])}`;
    } catch (err) {
      throw via(err, `[${i}]`);
    }
  }
  return `${out}]`;
}

function write(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return writeString(value);
    case "number":
      return writeNumber(value);
    case "bigint":
      // An integer beyond 2^53 from parseChpJson: kept exact, as Python keeps its ints.
      return value.toString();
    case "object": {
      if (isChpFloat(value)) return pythonFloatRepr(value.value);
      if (isLosslessNumber(value)) {
        let number: number | bigint | ChpFloat;
        try {
          number = losslessNumberValue(value.value);
        } catch (err) {
          // Its message names the root ("input: …"); the refusal names where the number is.
          throw new Refusal((path) => (err as Error).message.replace(/^input/, path));
        }
        return write(number);
      }
      if (Array.isArray(value)) return writeArray(value);
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) {
        const name = (value as object).constructor?.name ?? "non-plain";
        throw new Refusal((path) => `${path}: a ${name} object is not JSON`);
      }
      return writeObject(value as Record<string, unknown>);
    }
    default: {
      const type = typeof value;
      throw new Refusal((path) => `${path}: a ${type} is not JSON`);
    }
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
  try {
    return write(value);
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    throw new ChaosError("invalid_argument", err.explain(`input${err.steps.reverse().join("")}`));
  }
}

/** Lowercase hex SHA-256 of the canonical JSON's UTF-8 bytes (CHP `content_hash`). */
export function contentHash(value: unknown): string {
  return canonicalJsonAndHash(value).hash;
}

/**
 * The canonical JSON and its {@link contentHash}, serialised once: for a caller that keeps the
 * text too (the ledger stores it, the executor passes it to policy).
 */
export function canonicalJsonAndHash(value: unknown): { readonly text: string; readonly hash: string } {
  const text = canonicalJson(value);
  // The one-shot hash: half the cost of createHash().update().digest() on an entry's few hundred bytes.
  return { text, hash: hash("sha256", text, "hex") };
}

/**
 * One link of a CHP hash chain: `contentHash({prev_sig, entry})`. The first link of a chain
 * has `prevSig` `""`.
 */
export function chainHash(prevSig: string, entry: unknown): string {
  return contentHash({ prev_sig: prevSig, entry });
}

/** The signed fields of a CHP audit-log entry other than its event. */
export interface AuditEntryFields {
  seq: number;
  ts: string;
  tenant: string;
  session: string;
  principal: string;
  content_hash: string;
}

/**
 * `chainHash(prevSig, {...fields, event})` for an audit-log entry whose event's canonical text
 * (what {@link canonicalJson} returned for it) is `eventText`: the text written out in its fixed
 * key order, each field through canonicalJson, the event's text as is. The same hash at a
 * quarter of the cost of sorting the keys and re-walking the event for every entry appended.
 * Text that did not come from canonicalJson makes the hash wrong.
 */
export function auditEntryChainHash(prevSig: string, fields: AuditEntryFields, eventText: string): string {
  const c = canonicalJson;
  return hash(
    "sha256",
    `{"entry":{"content_hash":${c(fields.content_hash)},"event":${eventText},"principal":${c(fields.principal)},"seq":${c(fields.seq)},` +
      `"session":${c(fields.session)},"tenant":${c(fields.tenant)},"ts":${c(fields.ts)}},"prev_sig":${c(prevSig)}}`,
    "hex",
  );
}
