import { ChaosError } from "@chaos-core/kit";
import type { ExecutorDeps } from "./executor-deps.js";

// Registered capabilities a step still may not run: an internal one named by a plan, and one
// whose definition drifted from its pinned contract.

/** The refusal of an internal capability named by a plan or an explicit step. */
export function internalRefusal(stepId: string, capability: string): ChaosError {
  return new ChaosError(
    "invalid_argument",
    `step ${stepId}: "${capability}" is an internal capability (the cognitive core's own bookkeeping); plans and explicit steps cannot call it`,
  );
}

/**
 * The run-time rug-pull guard's refusal (docs/contracts.md §7): a capability whose definition no
 * longer matches the contract the lock pins is not run (`contract_drift`, naming the sections).
 */
export function driftRefusal(name: string, deps: ExecutorDeps): ChaosError | undefined {
  const drifted = deps.registry.drift(name);
  return drifted === undefined ? undefined : new ChaosError("contract_drift", `${drifted}: this capability no longer matches its pinned contract and is not run`);
}
