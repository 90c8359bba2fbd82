import { Risk } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";

/**
 * The capabilities the edge's own tools exercise, with their risk. Policy decides on them
 * before the tool touches a service. The full capability registry arrives with cognition.
 */
export const EDGE_CAPABILITIES = {
  "memory.remember": Risk.LOW,
  "memory.recall": Risk.LOW,
} as const satisfies Record<string, Risk>;

export type EdgeCapability = keyof typeof EDGE_CAPABILITIES;

/** The risk of a capability the edge knows, or undefined. */
export function knownRisk(capability: string): Risk | undefined {
  return Object.hasOwn(EDGE_CAPABILITIES, capability) ? EDGE_CAPABILITIES[capability as EdgeCapability] : undefined;
}
