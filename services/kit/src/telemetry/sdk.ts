import { NodeSDK } from "@opentelemetry/sdk-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { HttpInstrumentation } from "@opentelemetry/instrumentation-http";
import { PgInstrumentation } from "@opentelemetry/instrumentation-pg";
import { IORedisInstrumentation } from "@opentelemetry/instrumentation-ioredis";

/**
 * Starts the Node SDK with an OTLP trace exporter. gRPC spans come from kit's RPC adapter
 * (one place for both transports), so the gRPC instrumentation is not loaded; HTTP, pg and
 * ioredis are. Service name and resource come from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES.
 */
export async function startTelemetry(): Promise<void> {
  const sdk = new NodeSDK({
    traceExporter: new OTLPTraceExporter(),
    instrumentations: [new HttpInstrumentation(), new PgInstrumentation(), new IORedisInstrumentation()],
  });
  sdk.start();
  const stop = () => void sdk.shutdown().catch(() => undefined);
  process.once("SIGTERM", stop);
  process.once("beforeExit", stop);
}
