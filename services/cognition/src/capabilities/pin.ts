import { readFile } from "node:fs/promises";
import { AttestationError, parseLock } from "@chaos-core/contracts";
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
  let drifted: readonly string[];
  try {
    drifted = registry.pin(parseLock(text).contracts);
  } catch (err) {
    throw new AttestationError(`${lockFile}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (drifted.length > 0) throw new AttestationError(`${lockFile}: the registered capabilities drifted from the lock: ${drifted.join("; ")}`, drifted);
}
