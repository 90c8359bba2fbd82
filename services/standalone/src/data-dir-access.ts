import { existsSync } from "node:fs";
import { join } from "node:path";
import { createPgliteDb, isDataDirInUse, lockDataDir, type Db } from "@chaos-core/kit";
import { readAdminFile, type AdminFile } from "./admin-client.js";

/** Where the standalone runtime keeps its embedded database inside the data directory. */
export const EMBEDDED_DB_DIR = "pg";

/**
 * How an operator command reaches a data directory: a running server holds it (the command
 * goes through its admin endpoint), or nothing does and the command holds it while it works.
 */
export type DataDirAccess =
  | { readonly running: true; readonly admin: AdminFile }
  | { readonly running: false; release(): Promise<void> };

/**
 * Takes the data directory the way the runtime does ({@link lockDataDir}), or finds the running
 * server that holds it. A directory that does not exist is an error, never created: a mistyped
 * `--data-dir` must not look like an empty ledger.
 */
export async function accessDataDir(dataDir: string): Promise<DataDirAccess> {
  if (!existsSync(dataDir)) {
    throw new Error(`there is no chaos-core data directory at ${dataDir}: point --data-dir (or CHAOS_CORE_DATA_DIR) at the server's`);
  }
  try {
    return { running: false, release: await lockDataDir(dataDir) };
  } catch (err) {
    if (!isDataDirInUse(err)) throw err;
    return { running: true, admin: await readAdminFile(dataDir) };
  }
}

/** Opens the embedded database of a data directory the caller holds (see {@link accessDataDir}). */
export async function openEmbeddedDb(dataDir: string): Promise<Db> {
  const dir = join(dataDir, EMBEDDED_DB_DIR);
  if (!existsSync(dir)) {
    throw new Error(`${dataDir} holds no embedded database: its server keeps its stores in Postgres (DATABASE_URL); use --database-url`);
  }
  // Loaded here: only the commands that open the database pay for the memory service's module.
  const { MEMORY_PG_EXTENSIONS } = await import("@chaos-core/memory");
  return createPgliteDb({ dataDir: dir, extensions: [...MEMORY_PG_EXTENSIONS] });
}
