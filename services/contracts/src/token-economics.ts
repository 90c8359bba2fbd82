import { fieldCount, unboundedCollections, type JsonSchema } from "./json-schema.js";

/** How likely a tool's results are to flood a model's context. */
export type InflationRisk = "low" | "medium" | "high";

export const INFLATION_RISK_ORDER: readonly InflationRisk[] = ["low", "medium", "high"];

/** The token-economics section of a tool contract. */
export interface TokenEconomics {
  readonly inputFieldCount: number;
  readonly outputFieldCount: number;
  /** JSON Pointers (into the output schema) of the collections without a bound, sorted. */
  readonly unboundedCollections: readonly string[];
  readonly inflationRisk: InflationRisk;
}

/** More output fields than this is `medium`. */
export const MEDIUM_FIELD_COUNT = 25;
/** More output fields than this is `high`. */
export const HIGH_FIELD_COUNT = 60;

/**
 * The inflation-risk grade, by the rules of docs/contracts.md §2, first match wins: `high` for an
 * unbounded collection of objects, more than two unbounded collections or more than 60 output
 * fields; `medium` for any unbounded collection or more than 25 fields; `low` otherwise.
 */
export function tokenEconomics(inputSchema: JsonSchema, outputSchema: JsonSchema): TokenEconomics {
  const unbounded = unboundedCollections(outputSchema);
  const outputFieldCount = fieldCount(outputSchema);
  let inflationRisk: InflationRisk = "low";
  if (unbounded.some((c) => c.objectItems) || unbounded.length > 2 || outputFieldCount > HIGH_FIELD_COUNT) inflationRisk = "high";
  else if (unbounded.length > 0 || outputFieldCount > MEDIUM_FIELD_COUNT) inflationRisk = "medium";
  return {
    inputFieldCount: fieldCount(inputSchema),
    outputFieldCount,
    unboundedCollections: [...new Set(unbounded.map((c) => c.pointer))].sort(),
    inflationRisk,
  };
}
