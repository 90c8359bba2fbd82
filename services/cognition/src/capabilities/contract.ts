import { cachedPerDefinition, capabilityContract, sectionDrift, type CapabilitySource, type ContractSet } from "@chaos-core/contracts";
import { z } from "zod";
import type { Capability } from "./capability.js";

/** A zod schema as the contract holds it: JSON Schema, data only. */
const jsonSchema = (schema: z.ZodType, io: "input" | "output") =>
  JSON.parse(JSON.stringify(z.toJSONSchema(schema, { io, unrepresentable: "any" }))) as Record<string, unknown>;

/**
 * One capability as its contract's source (docs/contracts.md §2): what `chaos-core contracts lock`
 * pins and what the run-time guard recomputes. Converting the schemas is the costly part.
 */
export function capabilitySource(c: Capability): CapabilitySource {
  return {
    name: c.name,
    description: c.description,
    risk: c.risk,
    inputSchema: jsonSchema(c.inputSchema, "input"),
    outputSchema: jsonSchema(c.outputSchema, "output"),
    annotations: { ...c.annotations },
    implies: [...(c.implies ?? [])],
    internal: c.internal ?? false,
  };
}

/** What a capability's contract is recomputed on: its schemas by identity, the rest by value. */
const capabilityParts = (c: Capability) => [c.inputSchema, c.outputSchema, JSON.stringify([c.name, c.description, c.risk, c.annotations, c.implies ?? [], c.internal ?? false])];

/**
 * The run-time rug-pull guard for capabilities (docs/contracts.md §7): each capability the
 * registry offers or the executor is about to run, against the contract the lock pins — surface
 * and behavior recomputed from the definition, entitlements from the lock (they are derived from
 * source at lock time). Each definition object's answer is kept until its schemas' objects or its
 * plain fields change, so a listing converts no schema twice.
 */
export class CapabilityGuard {
  private readonly checked = cachedPerDefinition(capabilityParts, (c: Capability) => this.compute(c));

  constructor(private readonly lock: ContractSet) {}

  /** `capabilities/<name> (<sections>)` when the definition no longer matches its pinned contract, else undefined. */
  drift(c: Capability): string | undefined {
    return this.checked(c);
  }

  private compute(c: Capability): string | undefined {
    return sectionDrift("capabilities", c.name, this.lock.capabilities[c.name], (pinned) => capabilityContract(capabilitySource(c), pinned.entitlements));
  }
}
