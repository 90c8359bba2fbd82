import { watch as watchFs, type FSWatcher } from "node:fs";
import { basename, dirname } from "node:path";
import type { Logger } from "./logger.js";

/** Options of {@link watchFile}. */
export interface WatchFileOptions {
  logger: Logger;
  /** How the file's directory is named in log lines, e.g. "the policy directory". */
  what: string;
  /**
   * How often `onChange` runs even without a change event: editors that replace the file,
   * network file systems, Kubernetes volumes (which swap a symlink) and some containers do not
   * deliver `fs.watch` events for the file reliably.
   */
  pollMs: number;
  /** How long to wait after a change event before `onChange`, so a half-written file is rarely seen. */
  debounceMs: number;
}

/** A running {@link watchFile}. */
export interface FileWatch {
  close(): void;
}

/**
 * Calls `onChange` soon after `path` may have changed: `fs.watch` on its directory (editors
 * replace files, so the file itself is not watched), debounced, plus a poll as a fallback.
 * `onChange` must find out itself whether anything changed (compare contents or a hash). Holds
 * no timer or handle that keeps the process alive.
 */
export function watchFile(path: string, onChange: () => void, options: WatchFileOptions): FileWatch {
  const dir = dirname(path);
  const fileName = basename(path);
  const { logger, what } = options;
  let debounce: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  try {
    watcher = watchFs(dir, (_event, name) => {
      if (name !== null && name !== fileName) return;
      clearTimeout(debounce);
      debounce = setTimeout(onChange, options.debounceMs);
    });
    watcher.on("error", (err) => {
      logger.warn({ err, dir }, `watching ${what} failed; polling only`);
      watcher?.close();
      watcher = undefined;
    });
    watcher.unref();
  } catch (err) {
    logger.warn({ err, dir }, `cannot watch ${what}; polling only`);
  }
  const poll = setInterval(onChange, options.pollMs);
  poll.unref();
  return {
    close() {
      clearInterval(poll);
      clearTimeout(debounce);
      watcher?.close();
    },
  };
}
