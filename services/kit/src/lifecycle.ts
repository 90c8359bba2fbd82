import type { Logger } from "./logger.js";

/**
 * Runs `drain` once on SIGTERM or SIGINT, then exits. A second signal exits at once, so an
 * operator is never stuck behind a hung drain.
 */
export function onShutdown(logger: Logger, drain: () => Promise<void>): void {
  let draining = false;
  const handler = (signal: NodeJS.Signals) => {
    if (draining) process.exit(1);
    draining = true;
    logger.info({ signal }, "draining");
    drain().then(
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
