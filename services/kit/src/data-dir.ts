import { mkdirSync } from "node:fs";
import lockfile from "proper-lockfile";
import { ChaosError } from "./errors.js";

/** A lock not refreshed for this long belongs to a process that is gone, and may be taken. */
const STALE_MS = 10_000;
const lockPath = (dataDir: string) => `${dataDir}/.chaos-core.lock`;

/**
 * Takes the data directory for this process alone. PGlite has no cross-process lock and two
 * processes on one directory lose writes, so a second process must fail at once, before it
 * opens or writes anything there. The lock is refreshed while the process lives and goes
 * stale (is reclaimable) within seconds after a crash.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  try {
    // The first write into the directory: an unwritable one fails here, named, not as a bare EACCES later.
    mkdirSync(dataDir, { recursive: true });
    return await lockfile.lock(dataDir, {
      lockfilePath: lockPath(dataDir),
      stale: STALE_MS,
      update: 2_000,
      retries: 0,
      realpath: false,
      onCompromised: (err) => {
        // Another process took the directory: continuing would risk losing writes.
        process.stderr.write(`chaos-core: lost the lock on ${dataDir}: ${err.message}\n`);
        process.exit(70);
      },
    });
  } catch (err) {
    if ((err as { code?: string }).code === "ELOCKED") {
      throw new ChaosError(
        "failed_precondition",
        `the data directory ${dataDir} is in use by another chaos-core process; stop that process or point CHAOS_CORE_DATA_DIR elsewhere`,
        { cause: err },
      );
    }
    throw new ChaosError(
      "failed_precondition",
      `cannot use the data directory ${dataDir} (${err instanceof Error ? err.message : String(err)}): ` +
        "set CHAOS_CORE_DATA_DIR to a directory this user can write",
      { cause: err },
    );
  }
}

/** Whether `err` is {@link lockDataDir}'s refusal because another process holds the directory. */
export function isDataDirInUse(err: unknown): boolean {
  return err instanceof ChaosError && (err.cause as { code?: string } | undefined)?.code === "ELOCKED";
}

/** Whether a live process holds the data directory ({@link lockDataDir}), without taking it. */
export async function isDataDirLocked(dataDir: string): Promise<boolean> {
  try {
    return await lockfile.check(dataDir, { lockfilePath: lockPath(dataDir), stale: STALE_MS, realpath: false });
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return false;
    throw err;
  }
}
