import { chmod, readFile, rename, rm, writeFile } from "node:fs/promises";

/**
 * Writes a file only its owner can read (mode 0600): under a fresh name, then renamed over the
 * old one, so a reader never sees it half written and its secret is never readable by others.
 */
export async function writePrivateFile(file: string, content: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, content, { mode: 0o600, flag: "w" });
  await chmod(tmp, 0o600);
  await rename(tmp, file);
}

/** Removes `file` while it still holds `mark` (this process's secret): a later process may have replaced it. */
export async function removeIfOurs(file: string, mark: string): Promise<void> {
  const current = await readFile(file, "utf8").catch(() => "");
  if (current.includes(mark)) await rm(file, { force: true });
}
