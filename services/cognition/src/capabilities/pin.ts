import { readFile } from "node:fs/promises";
import { AttestationError, parseLock, type ContractSet } from "@chaos-core/contracts";
import type { CapabilityRegistry } from "./registry.js";

/**
 * Cognition's start-time contract check (docs/contracts.md §7): pins the registry to the lock at
 * `lockFile` and refuses (an {@link AttestationError} naming the file and every drifted
 * capability) when one does not match, or when the lock cannot be read. From then on the registry
 * holds every capability to the lock while serving.
 */
export async function pinCapabilitiesAtStart(registry: CapabilityRegistry, lockFile: string): Promise<void> {
  let text: string;
  try {
    text = await readFile(lockFile, "utf8");
  } catch (err) {
    throw new AttestationError(`CHAOS_CORE_CONTRACT_LOCK_FILE: cannot read the contracts lockfile ${lockFile} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  let lock: ContractSet;
  try {
    lock = parseLock(text).contracts;
  } catch (err) {
    throw new AttestationError(`${lockFile}: ${err instanceof Error ? err.message : String(err)}`);
  }
  pinCapabilities(registry, lock, lockFile);
}

/** Pins the registry to a lock already read from `lockFile`, refusing as {@link pinCapabilitiesAtStart} does when a capability drifted. */
export function pinCapabilities(registry: CapabilityRegistry, lock: ContractSet, lockFile: string): void {
  const drifted = registry.pin(lock);
  if (drifted.length > 0) throw new AttestationError(`${lockFile}: the registered capabilities drifted from the lock: ${drifted.join("; ")}`, drifted);
}
