/**
 * Process bootstrap: `.env`, then OpenTelemetry. Load it first, as a preload (`node --import
 * @chaos-core/kit/telemetry ...`) or as the first dynamic import of a launcher, so the ESM
 * loader hook is in place before pg, ioredis or http are imported: without the hook their
 * spans silently never appear.
 *
 * A `.env` in the working directory is loaded here, before anything reads the environment, so
 * OTEL_* set there take effect too (variables already set win over the file).
 *
 * Configured by the standard OTEL_* variables, plus `CHAOS_CORE_METRICS_PROMETHEUS_PORT` for a
 * Prometheus scrape endpoint (settings.ts). With neither an OTLP endpoint nor that port, nothing
 * is started and nothing is printed; the OpenTelemetry API then stays a no-op.
 */
import { existsSync } from "node:fs";
import { register } from "node:module";
import { telemetrySettings } from "./settings.js";

if (existsSync(".env")) process.loadEnvFile(".env");

const settings = telemetrySettings(process.env);

if (settings.otlp || settings.prometheus) {
  register("@opentelemetry/instrumentation/hook.mjs", import.meta.url);
  const { startTelemetry } = await import("./sdk.js");
  await startTelemetry(settings, process.env);
}
