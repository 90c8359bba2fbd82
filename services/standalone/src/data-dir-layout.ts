import { existsSync, readdirSync, renameSync, rmSync } from "node:fs";
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

/** Where a database being created is built before it is renamed to {@link EMBEDDED_DB_DIR}. */
const CREATING_PREFIX = `${EMBEDDED_DB_DIR}.creating-`;

/**
 * Opens the embedded database of a data directory the caller holds (its lock), with the
 * extensions the stores need. The runtime creates it on a first run (`create: true`); an
 * operator command refuses a directory without one, whose server keeps its stores in Postgres.
 *
 * A new database is created whole or not at all: it is built in `pg.creating-<pid>` and renamed
 * to `pg` once complete, so a process killed mid-creation (a client that gives a first-run server
 * a few seconds to stop, then SIGKILL) leaves only a scratch directory, which the next creation
 * removes. An empty `pg` (what such a kill left before) counts as no database.
 */
export async function openEmbeddedDb(dataDir: string, options: { create?: boolean } = {}): Promise<Db> {
  const path = embeddedDbPath(dataDir);
  if (!options.create && !existsSync(path)) {
    throw new Error(`${dataDir} holds no embedded database: its server keeps its stores in Postgres (DATABASE_URL); use --database-url`);
  }
  // Loaded here: a command pays for the memory service's module only when it opens the database.
  const { MEMORY_PG_EXTENSIONS } = await import("@chaos-core/memory");
  const open = (dir: string) => createPgliteDb({ dataDir: dir, extensions: [...MEMORY_PG_EXTENSIONS] });
  if (!options.create || !isUncreated(path)) return open(path);
  // The caller holds the directory's lock: no other process is creating one now.
  for (const name of readdirSync(dataDir)) {
    if (name.startsWith(CREATING_PREFIX)) rmSync(join(dataDir, name), { recursive: true, force: true });
  }
  rmSync(path, { recursive: true, force: true });
  const scratch = join(dataDir, `${CREATING_PREFIX}${process.pid}`);
  try {
    await (await open(scratch)).close();
    renameSync(scratch, path);
  } catch (err) {
    rmSync(scratch, { recursive: true, force: true });
    throw err;
  }
  return open(path);
}

/** No database there yet: no directory, or an empty one. Anything else is opened as it is. */
function isUncreated(path: string): boolean {
  return !existsSync(path) || readdirSync(path).length === 0;
}
