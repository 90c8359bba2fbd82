import { RISKS as KIT_RISKS } from "@chaos-core/kit";
import { z } from "zod";
import type { CapabilityRisk } from "../capabilities/capability.js";
import type { CapabilityRegistry } from "../capabilities/registry.js";

/** Least to most dangerous: kit's one list of the risk classes. */
const RISK_ORDER: readonly CapabilityRisk[] = KIT_RISKS;

/** The higher of two risks. */
export function maxRisk(a: CapabilityRisk, b: CapabilityRisk): CapabilityRisk {
  return RISK_ORDER.indexOf(a) >= RISK_ORDER.indexOf(b) ? a : b;
}

/** Every risk, least to most dangerous, for schemas. */
export const RISKS = RISK_ORDER as readonly [CapabilityRisk, ...CapabilityRisk[]];

function inputJsonSchema(schema: z.ZodType): unknown {
  try {
    return z.toJSONSchema(schema, { unrepresentable: "any", io: "input" });
  } catch {
    // A schema JSON Schema cannot express still validates the model's answer; the model just
    // gets less help writing it.
    return { type: "object" };
  }
}

/**
 * The registry as a model planner sees it: name, description, risk and the JSON Schema of each
 * offered capability's input (internal ones are never offered). Never a handler.
 */
export function capabilityCatalog(registry: CapabilityRegistry): string {
  return JSON.stringify(
    registry.offered().map((c) => ({ name: c.name, description: c.description, risk: c.risk, input: inputJsonSchema(c.inputSchema) })),
  );
}

/** Text cut to `max` characters, marked when cut. */
export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
