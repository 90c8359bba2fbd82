import { context, metrics, propagation, SpanKind, SpanStatusCode, trace, type Attributes, type Context } from "@opentelemetry/api";
import { MCP_DURATION_BUCKETS, SEMCONV } from "./attributes.js";

/** What the edge knows of one MCP request or notification when it arrives. */
export interface McpMessageInfo {
  /** `mcp.method.name`: `tools/call`, `initialize`, `notifications/initialized`, … */
  readonly method: string;
  readonly toolName?: string | undefined;
  readonly promptName?: string | undefined;
  readonly resourceUri?: string | undefined;
  /** The JSON-RPC id; absent for a notification. */
  readonly requestId?: string | number | undefined;
  readonly protocolVersion?: string | undefined;
  /** `mcp.session.id`: only a 2025-11-25 session has one. */
  readonly sessionId?: string | undefined;
  /** `network.transport`: `tcp` for Streamable HTTP, `pipe` for stdio. */
  readonly transport: "tcp" | "pipe";
  /** The request's `params._meta`: a W3C `traceparent` there makes the span join the client's trace. */
  readonly meta?: Record<string, unknown> | undefined;
  /** Chaos Core's own attributes (`chaoscore.*`). */
  readonly attributes?: Attributes;
}

/** How a request ended: a JSON-RPC error code, or a tool result with `isError: true`. */
export interface McpOutcome {
  readonly jsonRpcErrorCode?: number | undefined;
  readonly toolError?: boolean | undefined;
}

/** One MCP request's SERVER span, open until its response is sent. */
export interface McpServerSpan {
  /** Runs `fn` with the span active, so everything the request does becomes its child. */
  run<T>(fn: () => T): T;
  /** Adds attributes learnt later (the negotiated protocol version, say). */
  setAttributes(attributes: Attributes): void;
  /** Ends the span and records `mcp.server.operation.duration`; later calls do nothing. */
  end(outcome?: McpOutcome): void;
}

const tracer = trace.getTracer("chaoscore.mcp");
const operationDuration = metrics.getMeter("chaoscore.mcp").createHistogram(SEMCONV.mcpServerOperationDuration, {
  description: "Duration of MCP requests and notifications as the server saw them",
  unit: "s",
  advice: { explicitBucketBoundaries: [...MCP_DURATION_BUCKETS] },
});

function parentOf(meta: Record<string, unknown> | undefined): Context {
  if (!meta || typeof meta.traceparent !== "string") return context.active();
  return propagation.extract(context.active(), meta, {
    get: (c, k) => (typeof c[k] === "string" ? (c[k] as string) : undefined),
    keys: (c) => Object.keys(c),
  });
}

/** `{mcp.method.name} {target}`: the tool or prompt named, never a resource URI. */
function spanName(info: McpMessageInfo): string {
  const target = info.toolName ?? info.promptName;
  return target ? `${info.method} ${target}` : info.method;
}

/**
 * Opens the SERVER span of one MCP request or notification, named and attributed as the MCP
 * semantic conventions say (`{mcp.method.name} {target}`, `mcp.*`, `gen_ai.*`, `jsonrpc.request.id`),
 * parented on the client's W3C trace context from `_meta` when it sends one, else on the active
 * context (the HTTP request's span). A no-op span when telemetry is off.
 */
export function startMcpServerSpan(info: McpMessageInfo): McpServerSpan {
  const started = performance.now();
  const shared: Attributes = {
    [SEMCONV.mcpMethodName]: info.method,
    [SEMCONV.networkTransport]: info.transport,
    ...(info.toolName !== undefined ? { [SEMCONV.genAiToolName]: info.toolName } : {}),
    ...(info.promptName !== undefined ? { [SEMCONV.genAiPromptName]: info.promptName } : {}),
    ...(info.method === "tools/call" ? { [SEMCONV.genAiOperationName]: "execute_tool" } : {}),
    ...(info.protocolVersion !== undefined ? { [SEMCONV.mcpProtocolVersion]: info.protocolVersion } : {}),
  };
  const parent = parentOf(info.meta);
  const span = tracer.startSpan(
    spanName(info),
    {
      kind: SpanKind.SERVER,
      attributes: {
        ...shared,
        ...(info.transport === "tcp" ? { [SEMCONV.networkProtocolName]: "http" } : {}),
        ...(info.resourceUri !== undefined ? { [SEMCONV.mcpResourceUri]: info.resourceUri } : {}),
        ...(info.requestId !== undefined ? { [SEMCONV.jsonrpcRequestId]: String(info.requestId) } : {}),
        ...(info.sessionId !== undefined ? { [SEMCONV.mcpSessionId]: info.sessionId } : {}),
        ...info.attributes,
      },
    },
    parent,
  );
  const active = trace.setSpan(parent, span);
  let protocolVersion = info.protocolVersion;
  let ended = false;
  return {
    run: (fn) => context.with(active, fn),
    setAttributes(attributes) {
      const version = attributes[SEMCONV.mcpProtocolVersion];
      if (typeof version === "string") protocolVersion = version;
      span.setAttributes(attributes);
    },
    end(outcome = {}) {
      if (ended) return;
      ended = true;
      const errorType =
        outcome.jsonRpcErrorCode !== undefined ? String(outcome.jsonRpcErrorCode) : outcome.toolError ? "tool_error" : undefined;
      const errorAttrs: Attributes = {
        ...(errorType !== undefined ? { [SEMCONV.errorType]: errorType } : {}),
        ...(outcome.jsonRpcErrorCode !== undefined ? { [SEMCONV.rpcResponseStatusCode]: String(outcome.jsonRpcErrorCode) } : {}),
      };
      if (errorType !== undefined) {
        span.setAttributes(errorAttrs);
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorType === "tool_error" ? "the tool answered isError" : `JSON-RPC error ${errorType}` });
      }
      span.end();
      operationDuration.record((performance.now() - started) / 1000, {
        ...shared,
        ...(protocolVersion !== undefined ? { [SEMCONV.mcpProtocolVersion]: protocolVersion } : {}),
        ...errorAttrs,
      });
    },
  };
}
