import { existsSync } from "node:fs";
import { join } from "node:path";
import { createPgliteDb, type Db } from "@chaos-core/kit";

// What the standalone runtime keeps in its data directory, named once for the runtime and the
// operator commands that open the same stores while no server runs. The other entries belong to
// their owners: the lock to kit's `lockDataDir`, `admin.json` to admin-client.ts (ADMIN_FILE),
// the generated ledger keyring to the ledger (STANDALONE_KEYRING_FILE), the generated keyring that
// seals multi-round-trip requestState (`mrtr-keyring.json`) to the edge (MRTR_KEYRING_FILE).

/** The directory of the embedded database (PGlite) inside a data directory. */
const EMBEDDED_DB_DIR = "pg";

/** The capability policy file inside a data directory (the runtime's file policy store). */
export const POLICY_FILE = "policy.json";

/** Where a data directory's embedded database lives. */
export function embeddedDbPath(dataDir: string): string {
  return join(dataDir, EMBEDDED_DB_DIR);
}

/** Where a data directory's policy file lives. */
export function policyFilePath(dataDir: string): string {
  return join(dataDir, POLICY_FILE);
}

/**
 * Opens the embedded database of a data directory the caller holds (its lock), with the
 * extensions the stores need. The runtime creates it on a first run (`create: true`); an
 * operator command refuses a directory without one, whose server keeps its stores in Postgres.
 */
export async function openEmbeddedDb(dataDir: string, options: { create?: boolean } = {}): Promise<Db> {
  const path = embeddedDbPath(dataDir);
  if (!options.create && !existsSync(path)) {
    throw new Error(`${dataDir} holds no embedded database: its server keeps its stores in Postgres (DATABASE_URL); use --database-url`);
  }
  // Loaded here: a command pays for the memory service's module only when it opens the database.
  const { MEMORY_PG_EXTENSIONS } = await import("@chaos-core/memory");
  return createPgliteDb({ dataDir: path, extensions: [...MEMORY_PG_EXTENSIONS] });
}
