// Baseline for the stdio start-up benchmark: `chaos-core stdio` as it started before issue 9,
// every store open (createRuntime) before the transport answers anything. Plain JavaScript, so
// it starts without tsx's loader, as the real launcher does.
await import("@chaos-core/kit/telemetry");
const { loadEdgeConfig, runStdioTransport } = await import("@chaos-core/edge");
const { createLogger } = await import("@chaos-core/kit");
const { createRuntime, loadStandaloneConfig } = await import("@chaos-core/standalone");

const config = loadStandaloneConfig(process.env);
const edgeConfig = loadEdgeConfig(process.env);
const logger = createLogger("chaos-core", config.logLevel);
const runtime = await createRuntime(config, logger, {
  version: "0.0.0",
  sessionTtlSeconds: edgeConfig.sessionTtlSeconds,
  admin: true,
});
await runStdioTransport(runtime.deps, { onClose: () => void runtime.close() });
