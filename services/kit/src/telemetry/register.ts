/**
 * Process bootstrap: `.env`, then OpenTelemetry. Load it first, as a preload (`node --import
 * @chaos-core/kit/telemetry ...`) or as the first dynamic import of a launcher, so the ESM
 * loader hook is in place before pg, ioredis or http are imported: without the hook their
 * spans silently never appear.
 *
 * A `.env` in the working directory is loaded here, before anything reads the environment, so
 * OTEL_* set there take effect too (variables already set win over the file).
 *
 * Configured only by the standard OTEL_* variables. Without OTEL_EXPORTER_OTLP_ENDPOINT (or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) nothing is started and nothing is printed; the
 * OpenTelemetry API then stays a no-op.
 */
import { existsSync } from "node:fs";
import { register } from "node:module";

if (existsSync(".env")) process.loadEnvFile(".env");

const env = process.env;
const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;

if (endpoint && env.OTEL_SDK_DISABLED !== "true") {
  register("@opentelemetry/instrumentation/hook.mjs", import.meta.url);
  const { startTelemetry } = await import("./sdk.js");
  await startTelemetry();
}
