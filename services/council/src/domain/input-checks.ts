import { ChaosError } from "@chaos-core/kit";

// Checks of what a caller hands the domain, each refusal naming the field.

export function requireText(field: string, value: unknown, max: number, optional = false): string | undefined {
  if (value === undefined && optional) return undefined;
  if (typeof value !== "string") throw new ChaosError("invalid_argument", `${field}: must be a string`);
  const text = value.trim();
  if (text.length === 0) {
    if (optional) return undefined;
    throw new ChaosError("invalid_argument", `${field}: must not be empty`);
  }
  if (text.length > max) throw new ChaosError("invalid_argument", `${field}: too long (at most ${max} characters)`);
  return text;
}

export function iso(now: Date): string {
  if (!(now instanceof Date) || Number.isNaN(now.getTime())) throw new ChaosError("invalid_argument", "now: must be a valid date");
  return now.toISOString();
}
