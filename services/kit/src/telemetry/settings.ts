import { z } from "zod";
import { parseEnv, type Env } from "../config.js";

/** What the telemetry bootstrap starts, read from the environment before anything else runs. */
export interface TelemetrySettings {
  /** OTLP export (traces and metrics) is on: an OTLP endpoint is set. */
  readonly otlp: boolean;
  /** A Prometheus scrape endpoint (`GET /metrics`) to serve, when asked for. */
  readonly prometheus?: { readonly host: string; readonly port: number };
}

const schema = z.object({
  OTEL_SDK_DISABLED: z.string().optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.string().optional(),
  CHAOS_CORE_METRICS_PROMETHEUS_PORT: z.coerce
    .number({ error: "must be a port number" })
    .int("must be a whole number")
    .min(1, "must be between 1 and 65535")
    .max(65535, "must be between 1 and 65535")
    .optional(),
  // Loopback unless told otherwise: metrics name tenants and tools, so exposing them is a choice.
  CHAOS_CORE_METRICS_PROMETHEUS_HOST: z.string().min(1).default("127.0.0.1"),
});

/**
 * Reads the telemetry settings: the standard `OTEL_*` variables decide OTLP export,
 * `CHAOS_CORE_METRICS_PROMETHEUS_PORT` (with `CHAOS_CORE_METRICS_PROMETHEUS_HOST`, default
 * 127.0.0.1) a Prometheus scrape endpoint. `OTEL_SDK_DISABLED=true` turns both off. A bad value
 * throws a `ConfigError` naming the variable.
 */
export function telemetrySettings(env: Env): TelemetrySettings {
  const parsed = parseEnv(schema, env);
  if (parsed.OTEL_SDK_DISABLED === "true") return { otlp: false };
  const otlp = Boolean(parsed.OTEL_EXPORTER_OTLP_ENDPOINT ?? parsed.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const port = parsed.CHAOS_CORE_METRICS_PROMETHEUS_PORT;
  return {
    otlp,
    ...(port === undefined ? {} : { prometheus: { host: parsed.CHAOS_CORE_METRICS_PROMETHEUS_HOST, port } }),
  };
}
