/**
 * Risk of a capability, least to most dangerous. `unspecified` is what a caller sends when it
 * does not know (proto `RISK_UNSPECIFIED`, or an enum value this build does not recognise).
 */
export type Risk = "unspecified" | "low" | "medium" | "high" | "critical";

/** The known risk levels, in increasing order. */
export const RISK_LEVELS = ["low", "medium", "high", "critical"] as const;

/** A known risk level. */
export type RiskLevel = (typeof RISK_LEVELS)[number];

/** A threshold of a risk rule: a level, or `never` to switch the rule off. */
export type RiskThreshold = RiskLevel | "never";

/** Every value a risk rule accepts, for schemas and messages. */
export const RISK_THRESHOLDS = [...RISK_LEVELS, "never"] as const;

/**
 * The level a risk counts as in threshold rules. An unspecified risk counts as the highest
 * level: the engine cannot prove that an unknown risk is below a threshold, and treating it as
 * lower would let a capability missing from the registry, or a caller that forgot the field,
 * slip past approval and deny rules. Failing closed costs an extra approval at worst.
 */
export function effectiveRisk(risk: Risk): RiskLevel {
  return risk === "unspecified" ? "critical" : risk;
}

/** True when `risk` is at or above `threshold`; a `never` threshold matches nothing. */
export function isAtOrAbove(risk: Risk, threshold: RiskThreshold): boolean {
  if (threshold === "never") return false;
  return RISK_LEVELS.indexOf(effectiveRisk(risk)) >= RISK_LEVELS.indexOf(threshold);
}
