import type { LoggingLevel } from "@modelcontextprotocol/server";
import type { Logger } from "@chaos-core/kit";

/** MCP log levels from least to most severe (RFC 5424 order, as the spec lists them). */
const SEVERITY: Record<LoggingLevel, number> = {
  debug: 0,
  info: 1,
  notice: 2,
  warning: 3,
  error: 4,
  critical: 5,
  alert: 6,
  emergency: 7,
};

/** What a session receives before its client sets a level: enough to see denials, no chatter. */
export const DEFAULT_CLIENT_LOG_LEVEL: LoggingLevel = "info";

/** Whether a line at `level` reaches a client that asked for `minimum`. */
export function reachesClient(level: LoggingLevel, minimum: LoggingLevel | undefined): boolean {
  return SEVERITY[level] >= SEVERITY[minimum ?? DEFAULT_CLIENT_LOG_LEVEL];
}

/** Writes an MCP-levelled line to the process log (pino has fewer levels). */
export function logAtMcpLevel(logger: Logger, level: LoggingLevel, data: Record<string, unknown>, message: string): void {
  switch (level) {
    case "debug":
      return logger.debug(data, message);
    case "info":
    case "notice":
      return logger.info(data, message);
    case "warning":
      return logger.warn(data, message);
    case "error":
      return logger.error(data, message);
    default:
      return logger.fatal(data, message);
  }
}
