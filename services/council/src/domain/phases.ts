/** The five council phases, in the only order they may run. */
export const PHASES = ["decompile", "design", "critique", "synthesis", "verify"] as const;

/** One council phase. */
export type Phase = (typeof PHASES)[number];

/** True when `value` names a phase. */
export function isPhase(value: unknown): value is Phase {
  return typeof value === "string" && (PHASES as readonly string[]).includes(value);
}
