import { DEFAULT_SHUTDOWN_GRACE_SECONDS } from "./config.js";
import type { Logger } from "./logger.js";

/**
 * Runs `drain` once on SIGTERM or SIGINT, then exits 0 (1 when the drain failed). `drain` gets the
 * grace it may spend on in-flight calls; should it still hang a few seconds past it, the process
 * exits 1 anyway. A second signal exits at once, so an operator is never stuck behind a hung drain.
 */
export function onShutdown(logger: Logger, drain: (graceMs: number) => Promise<void>, graceMs = DEFAULT_SHUTDOWN_GRACE_SECONDS * 1000): void {
  let draining = false;
  const handler = (signal: NodeJS.Signals) => {
    if (draining) process.exit(1);
    draining = true;
    logger.info({ signal, graceMs }, "draining");
    setTimeout(() => {
      logger.error({ graceMs }, "drain did not finish within the shutdown grace");
      process.exit(1);
    }, graceMs + 5_000).unref();
    drain(graceMs).then(
      () => {
        logger.info("stopped");
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, "drain failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", handler);
  process.on("SIGINT", handler);
}
