import { trace } from "@opentelemetry/api";
import { destination, pino, stdTimeFunctions, type Logger, type LevelWithSilent } from "pino";

export type { Logger };

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/**
 * A JSON logger that writes to stderr only: under stdio, stdout belongs to JSON-RPC.
 * Every line carries the service name and, inside a span, its trace and span ids.
 */
export function createLogger(service: string, level: LevelWithSilent = "info"): Logger {
  return pino(
    {
      level,
      base: { service },
      timestamp: stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      mixin() {
        const span = trace.getActiveSpan();
        if (!span) return {};
        const { traceId, spanId } = span.spanContext();
        return { trace_id: traceId, span_id: spanId };
      },
    },
    destination({ fd: 2, sync: true }),
  );
}
