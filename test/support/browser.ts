import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

/** Where Debian's `chromium` package puts the browser; playwright-core downloads none. */
export const CHROMIUM = "/usr/bin/chromium";

/** The command that installs it (what `.ci/run`'s `ensure_chromium` runs when it is missing). */
export const INSTALL_CHROMIUM = "apt-get install -y --no-install-recommends chromium";

/** Browser tests are skipped only when asked to, never because the browser is missing. */
export const SKIP_BROWSER_TESTS = process.env.CHAOS_CORE_SKIP_BROWSER_TESTS === "1";

/**
 * Launches Debian's headless Chromium through playwright-core. Fails naming the install command
 * when it is not there (set CHAOS_CORE_SKIP_BROWSER_TESTS=1 to skip the browser tests instead):
 * a missing browser must not pass as a green run.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}: install it with \`${INSTALL_CHROMIUM}\`, or set CHAOS_CORE_SKIP_BROWSER_TESTS=1 to skip the browser tests`,
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}
