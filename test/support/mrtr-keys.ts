/**
 * What an edge main needs to start in a test: the keyring that seals multi-round-trip
 * requestState (the edge run alone has no default key), generated fresh into a temporary
 * directory. Edges that serve the same clients share one.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateMrtrKeyringFile } from "@chaos-core/edge";

export interface MrtrKeys {
  /** The environment an edge main needs for its keyring. */
  readonly env: { CHAOS_CORE_MRTR_KEYS_FILE: string };
  readonly kid: string;
  /** Removes the keyring file. */
  remove(): Promise<void>;
}

export async function createMrtrKeys(): Promise<MrtrKeys> {
  const dir = await mkdtemp(join(tmpdir(), "chaoscore-mrtr-keys-"));
  const path = join(dir, "mrtr-keyring.json");
  const kid = await generateMrtrKeyringFile(path);
  return { env: { CHAOS_CORE_MRTR_KEYS_FILE: path }, kid, remove: () => rm(dir, { recursive: true, force: true }) };
}
