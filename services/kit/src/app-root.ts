import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The name of the package at the root of every layout Chaos Core runs from. */
export const APP_PACKAGE_NAME = "chaos-core";

const roots = new Map<string, string>();

/**
 * The root of the Chaos Core this code runs in: the nearest directory above `from` whose
 * package.json is named `chaos-core`. That is the repository in a checkout, `/app` in the
 * image, and the package directory of an `npm install`ed tarball, where the workspace packages
 * sit under `node_modules/@chaos-core/` — one level deeper than in a checkout, so a fixed
 * `../../..` finds the wrong directory there. Files shipped beside the code (chaoscore.lock)
 * are found from it. Read once per starting directory.
 *
 * @param from where to start; by default this module's own directory (kit is one of the
 *   workspace packages, so it sits under the same root as every other).
 * @throws Error naming `from` when no directory above it holds such a package.json.
 */
export function appRoot(from: string = dirname(fileURLToPath(import.meta.url))): string {
  const known = roots.get(from);
  if (known) return known;
  for (let dir = from; ; dir = dirname(dir)) {
    if (packageName(join(dir, "package.json")) === APP_PACKAGE_NAME) {
      roots.set(from, dir);
      return dir;
    }
    if (dirname(dir) === dir) throw new Error(`no directory above ${from} holds the ${APP_PACKAGE_NAME} package (a package.json named "${APP_PACKAGE_NAME}")`);
  }
}

function packageName(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    // Most directories on the way up hold no package.json.
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const name: unknown = (JSON.parse(text) as { name?: unknown }).name;
  return typeof name === "string" ? name : undefined;
}
