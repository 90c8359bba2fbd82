import { existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createPgliteDb, type Db } from "@chaos-core/kit";

// What the standalone runtime keeps in its data directory, named once for the runtime and the
// operator commands that open the same stores while no server runs. The other entries belong to
// their owners: the lock to kit's `lockDataDir`, `admin.json` to admin-client.ts (ADMIN_FILE),
// `agent.json` (the endpoint offered to relaying stdio processes) to agent-endpoint.ts (AGENT_FILE),
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

/** Present while a database is being created: a `pg/` beside it is incomplete. */
const CREATING_MARKER = `${EMBEDDED_DB_DIR}.creating`;

/**
 * Opens the embedded database of a data directory the caller holds (its lock), with the
 * extensions the stores need. The runtime creates it on a first run (`create: true`); an
 * operator command refuses a directory without one, whose server keeps its stores in Postgres.
 *
 * A database is never used half-created: `pg.creating` is written before its creation starts and
 * removed once the database is complete, so after a process killed mid-creation (a client that
 * gives a first-run server a few seconds to stop, then SIGKILL) the next creation finds the
 * marker, removes the incomplete `pg/` and starts again. An empty `pg/` counts as no database.
 */
export async function openEmbeddedDb(dataDir: string, options: { create?: boolean } = {}): Promise<Db> {
  const path = embeddedDbPath(dataDir);
  if (!options.create && !existsSync(path)) {
    throw new Error(`${dataDir} holds no embedded database: its server keeps its stores in Postgres (DATABASE_URL); use --database-url`);
  }
  // Loaded here: a command pays for the memory service's module only when it opens the database.
  const { MEMORY_PG_EXTENSIONS } = await import("@chaos-core/memory");
  const open = () => createPgliteDb({ dataDir: path, extensions: [...MEMORY_PG_EXTENSIONS] });
  const marker = join(dataDir, CREATING_MARKER);
  if (!options.create || !(existsSync(marker) || isUncreated(path))) return open();
  // The caller holds the directory's lock: no other process is creating one now.
  writeFileSync(marker, `${process.pid}\n`);
  rmSync(path, { recursive: true, force: true });
  // A creation that fails keeps the marker: the next one starts from nothing again.
  const db = await open();
  rmSync(marker, { force: true });
  return db;
}

/** No database there yet: no directory, or an empty one. Anything else is opened as it is. */
function isUncreated(path: string): boolean {
  return !existsSync(path) || readdirSync(path).length === 0;
}
