import { Risk } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";

/**
 * The capabilities the edge's own tools exercise, with their risk. Policy decides on them
 * before the tool touches a service. The cognition service's registry is the source of risk;
 * this table stays only until chaoscore_remember and chaoscore_recall run through cognition's
 * executor (docs/cognition.md), and goes then.
 */
export const EDGE_CAPABILITIES = {
  "memory.remember": Risk.LOW,
  "memory.recall": Risk.LOW,
} as const satisfies Record<string, Risk>;

export type EdgeCapability = keyof typeof EDGE_CAPABILITIES;
