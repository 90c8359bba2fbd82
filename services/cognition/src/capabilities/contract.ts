import { capabilityContract, sectionDigests, type CapabilitySource, type ContractSet } from "@chaos-core/contracts";
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

interface Checked {
  readonly input: z.ZodType;
  readonly output: z.ZodType;
  readonly key: string;
  readonly drift: string | undefined;
}

const cheapKey = (c: Capability) => JSON.stringify([c.name, c.description, c.risk, c.annotations, c.implies ?? [], c.internal ?? false]);

/**
 * The run-time rug-pull guard for capabilities (docs/contracts.md §7): each capability the
 * registry offers or the executor is about to run, against the contract the lock pins — surface
 * and behavior recomputed from the definition, entitlements from the lock (they are derived from
 * source at lock time). Each definition object's answer is kept until its schemas' objects or its
 * plain fields change, so a listing converts no schema twice.
 */
export class CapabilityGuard {
  private readonly checked = new WeakMap<Capability, Checked>();

  constructor(private readonly lock: ContractSet) {}

  /** `capabilities/<name> (<sections>)` when the definition no longer matches its pinned contract, else undefined. */
  drift(c: Capability): string | undefined {
    const key = cheapKey(c);
    const seen = this.checked.get(c);
    if (seen && seen.input === c.inputSchema && seen.output === c.outputSchema && seen.key === key) return seen.drift;
    const drift = this.compute(c);
    this.checked.set(c, { input: c.inputSchema, output: c.outputSchema, key, drift });
    return drift;
  }

  private compute(c: Capability): string | undefined {
    const pinned = this.lock.capabilities[c.name];
    if (!pinned) return `capabilities/${c.name} (not in the lock)`;
    const now = sectionDigests(capabilityContract(capabilitySource(c), pinned.entitlements));
    const was = sectionDigests(pinned);
    const bad = Object.keys(now).filter((s) => was[s] !== now[s]);
    return bad.length > 0 ? `capabilities/${c.name} (${bad.join(", ")})` : undefined;
  }
}
