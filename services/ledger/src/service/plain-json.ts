import { isChpFloat } from "@chaos-core/kit";

/**
 * A ledger value as plain JSON for callers outside the ledger (proto Struct, MCP output): a CHP
 * float becomes its number and an exact big integer its nearest number. The stored, hashed text
 * is unchanged; this is only how it is shown.
 */
export function toPlainJson(value: unknown): unknown {
  if (isChpFloat(value)) return value.value;
  if (typeof value === "bigint") return Number(value);
  if (Array.isArray(value)) return value.map(toPlainJson);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, toPlainJson(v)]));
  }
  return value;
}
