/**
 * The two shape checks a JSON value meets everywhere: one definition, so the services agree on
 * what "an object" is.
 */

/** Any object but null and arrays — what a JSON object parses to, class instances included. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * An object literal or a parsed JSON object: its prototype is `Object.prototype` or null, so no
 * array, class instance (Date, Map, Buffer) or value with a prototype of its own passes.
 */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (!isObject(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}
