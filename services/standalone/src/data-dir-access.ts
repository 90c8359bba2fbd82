import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
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
    return { running: false, release: await lockDataDirAfterCrash(dataDir) };
  } catch (err) {
    if (!isDataDirInUse(err)) throw err;
    return { running: true, admin: await readAdminFile(dataDir) };
  }
}

/** How long a lock whose holder died is waited for: kit's lock goes stale 10 s after its last refresh. */
const DEAD_HOLDER_WAIT_MS = 15_000;
const DEAD_HOLDER_POLL_MS = 250;

/** Whether a process with this id exists (EPERM: it does, owned by another user). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * {@link lockDataDir}, except after a crash: when the directory's lock is held but the server
 * that `admin.json` names no longer exists (killed, crashed, the machine restarted), its lock is
 * left to go stale — at most 10 s after that server's last refresh — and then taken, instead of
 * refusing with "in use". `onWait` hears the dead server's pid once, before the wait. A lock held
 * by a live process, or by one no `admin.json` names, is refused as before.
 */
export async function lockDataDirAfterCrash(dataDir: string, onWait?: (pid: number) => void): Promise<() => Promise<void>> {
  try {
    return await lockDataDir(dataDir);
  } catch (err) {
    if (!isDataDirInUse(err)) throw err;
    const holder = await readAdminFile(dataDir).catch(() => undefined);
    if (!holder || processExists(holder.pid)) throw err;
    onWait?.(holder.pid);
    const deadline = Date.now() + DEAD_HOLDER_WAIT_MS;
    for (;;) {
      await sleep(DEAD_HOLDER_POLL_MS);
      try {
        return await lockDataDir(dataDir);
      } catch (again) {
        if (!isDataDirInUse(again) || Date.now() > deadline) throw again;
      }
    }
  }
}
