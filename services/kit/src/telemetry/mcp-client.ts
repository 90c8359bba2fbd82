import { context, metrics, propagation, SpanKind, SpanStatusCode, trace, type Attributes } from "@opentelemetry/api";
import { ATTR, MCP_DURATION_BUCKETS, SEMCONV } from "./attributes.js";

// The client side of an MCP call (docs/federation-platform.md §5): cognition calling an upstream
// MCP server, named and attributed as the MCP semantic conventions say for a client.

/** What is known of one upstream tool call when it starts. */
export interface McpClientCallInfo {
  /** The upstream's name (`chaoscore.upstream`). */
  readonly upstream: string;
  /** `gen_ai.tool.name`: the tool as the upstream lists it. */
  readonly toolName: string;
  /** `network.transport`: `tcp` for Streamable HTTP, `pipe` for stdio. */
  readonly transport: "tcp" | "pipe";
  /** Streamable HTTP: the upstream's URL, for `server.address` and `server.port`. */
  readonly url?: string | undefined;
}

/** One upstream call's CLIENT span, open until its answer (or failure). */
export interface McpClientSpan {
  /** Runs `fn` with the span active: what it sends carries this span's trace context ({@link traceContextMeta}). */
  run<T>(fn: () => T): T;
  /** Ends the span and records `mcp.client.operation.duration`; `errorType` marks a failure (an error code, or `tool_error`). */
  end(errorType?: string): void;
}

const tracer = trace.getTracer("chaoscore.mcp.client");
const operationDuration = metrics.getMeter("chaoscore.mcp.client").createHistogram(SEMCONV.mcpClientOperationDuration, {
  description: "Duration of MCP requests to upstream servers as the client (cognition) saw them",
  unit: "s",
  advice: { explicitBucketBoundaries: [...MCP_DURATION_BUCKETS] },
});

function serverOf(url: string | undefined): Attributes {
  if (!url) return {};
  const u = new URL(url);
  const port = u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
  return { [SEMCONV.serverAddress]: u.hostname, [SEMCONV.serverPort]: port };
}

/**
 * Opens the CLIENT span `tools/call {tool}` of one upstream call under the active span (the step's),
 * with `mcp.method.name`, `gen_ai.tool.name`, `gen_ai.operation.name`, `network.transport`,
 * `server.address`/`server.port` and `chaoscore.upstream`. A no-op span when telemetry is off.
 */
export function startMcpClientSpan(info: McpClientCallInfo): McpClientSpan {
  const started = performance.now();
  const shared: Attributes = {
    [SEMCONV.mcpMethodName]: "tools/call",
    [SEMCONV.genAiToolName]: info.toolName,
    [SEMCONV.genAiOperationName]: "execute_tool",
    [SEMCONV.networkTransport]: info.transport,
    [ATTR.upstream]: info.upstream,
    ...serverOf(info.url),
  };
  const parent = context.active();
  const span = tracer.startSpan(`tools/call ${info.toolName}`, { kind: SpanKind.CLIENT, attributes: shared }, parent);
  const active = trace.setSpan(parent, span);
  let ended = false;
  return {
    run: (fn) => context.with(active, fn),
    end(errorType) {
      if (ended) return;
      ended = true;
      if (errorType !== undefined) {
        span.setAttribute(SEMCONV.errorType, errorType);
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorType === "tool_error" ? "the tool answered isError" : errorType });
      }
      span.end();
      operationDuration.record((performance.now() - started) / 1000, { ...shared, ...(errorType !== undefined ? { [SEMCONV.errorType]: errorType } : {}) });
    },
  };
}

/**
 * The active context's W3C trace context (`traceparent`, and `tracestate` when there is one), for a
 * request's `params._meta`, so an upstream that reads it joins the caller's trace. Empty when no
 * span is active (telemetry off).
 */
export function traceContextMeta(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}
