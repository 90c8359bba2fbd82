/**
 * What a ledger main needs to start in a test: an operator keyring file (the ledger has no
 * default key), generated fresh into a temporary directory.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateKeyringFile } from "@chaos-core/ledger";

export interface LedgerKeys {
  /** The environment the ledger main needs for its keyring. */
  readonly env: { CHAOS_CORE_LEDGER_KEYS_FILE: string };
  readonly kid: string;
  /** Removes the keyring file. */
  remove(): Promise<void>;
}

export async function createLedgerKeys(): Promise<LedgerKeys> {
  const dir = await mkdtemp(join(tmpdir(), "chaoscore-ledger-keys-"));
  const path = join(dir, "keyring.json");
  const kid = await generateKeyringFile(path);
  return { env: { CHAOS_CORE_LEDGER_KEYS_FILE: path }, kid, remove: () => rm(dir, { recursive: true, force: true }) };
}
