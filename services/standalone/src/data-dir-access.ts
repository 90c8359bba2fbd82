import { existsSync } from "node:fs";
import { isDataDirInUse, lockDataDir } from "@chaos-core/kit";
import { readAdminFile, type AdminFile } from "./admin-client.js";

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
