import { NodeSDK } from "@opentelemetry/sdk-node";
import { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import { OTLPMetricExporter as OtlpHttpJsonMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPMetricExporter as OtlpProtoMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { PeriodicExportingMetricReader, type MetricReader } from "@opentelemetry/sdk-metrics";
import { envDetector, hostDetector, processDetector, type ResourceDetector } from "@opentelemetry/resources";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import { PgInstrumentation } from "@opentelemetry/instrumentation-pg";
import { IORedisInstrumentation } from "@opentelemetry/instrumentation-ioredis";
import type { TelemetrySettings } from "./settings.js";

/**
 * Serves `GET /metrics` for Prometheus on `host:port`; resolves once it listens, and rejects
 * (naming the variables) when it cannot, so a process never runs without the endpoint it was
 * asked for.
 */
export async function startPrometheusReader(host: string, port: number): Promise<PrometheusExporter> {
  const reader = new PrometheusExporter({ host, port, preventServerStart: true });
  try {
    await reader.startServer();
  } catch (err) {
    throw new Error(
      `CHAOS_CORE_METRICS_PROMETHEUS_PORT=${port} (CHAOS_CORE_METRICS_PROMETHEUS_HOST=${host}): cannot serve Prometheus metrics: ${(err as Error).message}`,
      { cause: err },
    );
  }
  return reader;
}

/**
 * The process detector without the command line: a process started with a secret on it (say
 * `chaos-core migrate --database-url postgres://user:password@…`) must not send it to every
 * trace backend and scrape. The executable, its path, pid and runtime stay.
 */
const processWithoutCommandLine: ResourceDetector = {
  detect(config) {
    const detected = processDetector.detect(config);
    const attributes = { ...detected.attributes };
    delete attributes["process.command_args"];
    delete attributes["process.command_line"];
    return { ...detected, attributes };
  },
};

/**
 * Query parameters whose values never go into `url.query`: the instrumentation's defaults (signed
 * URL credentials) and the approval console's one-time sign-in link token (`/sign-in/link?t=…`).
 */
const REDACTED_QUERY_PARAMS = ["sig", "Signature", "AWSAccessKeyId", "X-Goog-Signature", "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "t", "token"];

/**
 * Redis statements name the command and its key only. The instrumentation's default records
 * every argument of EVAL/EVALSHA (our stores' Lua scripts take records and plans as arguments).
 */
function redisStatement(command: string, args: ReadonlyArray<unknown>): string {
  const scripted = /^EVAL(SHA)?(_RO)?$/i.test(command);
  const key = scripted ? args[2] : args[0];
  const rest = args.length - (scripted ? 3 : 1);
  if (typeof key !== "string") return command;
  return rest > 0 ? `${command} ${key} [${rest} other arguments]` : `${command} ${key}`;
}

/** The OTLP metric reader NodeSDK would build from OTEL_* (it builds none once readers are given). */
function otlpMetricReader(env: Record<string, string | undefined>): MetricReader | undefined {
  const exporters = (env.OTEL_METRICS_EXPORTER ?? "otlp").split(",").map((s) => s.trim());
  if (!exporters.includes("otlp") || exporters.includes("none")) return undefined;
  const protocol = (env.OTEL_EXPORTER_OTLP_METRICS_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? "http/protobuf").trim();
  const exporter = protocol === "http/json" ? new OtlpHttpJsonMetricExporter() : new OtlpProtoMetricExporter();
  const interval = Number(env.OTEL_METRIC_EXPORT_INTERVAL) || 60_000;
  return new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: interval, exportTimeoutMillis: Math.min(interval, 30_000) });
}

/**
 * Starts the Node SDK. Traces and metrics go to OTLP as the standard OTEL_* variables say
 * (endpoint, `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER`, …);
 * with a Prometheus port set, metrics are also served for scraping. gRPC spans come from kit's
 * RPC adapter (one place for both transports, in-process calls included), so the gRPC
 * instrumentation is not loaded; HTTP, pg and ioredis are. Service name and resource come from
 * OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES.
 */
export async function startTelemetry(settings: TelemetrySettings, env: Record<string, string | undefined>): Promise<void> {
  const readers: MetricReader[] = [];
  if (settings.prometheus) readers.push(await startPrometheusReader(settings.prometheus.host, settings.prometheus.port));
  const otlpMetrics = settings.otlp ? otlpMetricReader(env) : undefined;
  if (otlpMetrics) readers.push(otlpMetrics);
  const sdk = new NodeSDK({
    instrumentations: [
      new HttpInstrumentation({ redactedQueryParamsServer: REDACTED_QUERY_PARAMS, redactedQueryParams: REDACTED_QUERY_PARAMS }),
      // Statement text with $n placeholders only: parameter values are never recorded.
      new PgInstrumentation({ enhancedDatabaseReporting: false }),
      new IORedisInstrumentation({ dbStatementSerializer: redisStatement }),
    ],
    // NodeSDK's default detectors, minus the command line; OTEL_NODE_RESOURCE_DETECTORS still overrides.
    ...(env.OTEL_NODE_RESOURCE_DETECTORS ? {} : { resourceDetectors: [envDetector, processWithoutCommandLine, hostDetector] }),
    // Without an OTLP endpoint nothing is exported but the scrape endpoint's metrics: no spans, no logs.
    ...(settings.otlp ? {} : { spanProcessors: [], logRecordProcessors: [] }),
    ...(settings.prometheus ? { metricReaders: readers } : {}),
  });
  sdk.start();
  const stop = () => void sdk.shutdown().catch(() => undefined);
  process.once("SIGTERM", stop);
  process.once("beforeExit", stop);
}
