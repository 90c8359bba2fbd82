import { context, metrics, propagation, ROOT_CONTEXT, trace, type Context } from "@opentelemetry/api";
import { recordError } from "../rpc/instrument.js";

/** The part of a span a domain step may touch. */
export interface StepSpan {
  setAttributes(attributes: Record<string, string | number | boolean>): void;
}

const tracer = trace.getTracer("chaoscore.domain");

/**
 * The parent context for a span: W3C `traceparent`/`tracestate` from a carrier (an MCP request's
 * `_meta`, say) when it holds them, else the active context.
 */
function parentFrom(carrier: Record<string, unknown> | undefined): Context {
  if (!carrier || typeof carrier.traceparent !== "string") return context.active();
  return propagation.extract(context.active(), carrier, {
    get: (c, k) => (typeof c[k] === "string" ? (c[k] as string) : undefined),
    keys: (c) => Object.keys(c),
  });
}

/**
 * Runs `fn` outside any trace: for background work a request happens to start (a watch stream
 * that outlives it), which must not hang its spans under that request's trace.
 */
export function outsideTrace<T>(fn: () => T): T {
  return context.with(ROOT_CONTEXT, fn);
}

/**
 * Runs one step (an MCP tool call, a policy decision, a cognitive stage, a ledger append) in its
 * own span, recording errors the same way as every other span. With `carrier`, a client's W3C
 * trace context joins the span to the client's trace. A no-op when telemetry is off.
 */
export async function withSpan<T>(
  name: string,
  attributes: Record<string, string | number | boolean>,
  fn: (span: StepSpan) => Promise<T> | T,
  options: { carrier?: Record<string, unknown> | undefined } = {},
): Promise<T> {
  return tracer.startActiveSpan(name, { attributes }, parentFrom(options.carrier), async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      recordError(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * Runs an MCP handler's work as part of the request's own span (the SERVER span the edge opened
 * when the message arrived, kit's `startMcpServerSpan`), adding `attributes` to it, instead of
 * opening a span of its own: one span per MCP request, whose children are the service calls.
 * How the request ended (`error.type`) is set when its response is sent. A no-op when telemetry
 * is off.
 */
export async function inRequestSpan<T>(
  attributes: Record<string, string | number | boolean>,
  fn: (span: StepSpan) => Promise<T> | T,
): Promise<T> {
  const span = trace.getActiveSpan();
  span?.setAttributes(attributes);
  return fn({ setAttributes: (a) => span?.setAttributes(a) });
}

const toolDuration = metrics.getMeter("chaoscore.edge").createHistogram("chaoscore.tool.duration", {
  description: "Duration of MCP tool calls, by tool and outcome",
  unit: "ms",
});

/** Records one tool call for the RED metrics (rate, errors by outcome, duration). */
export function recordToolCall(tool: string, outcome: string, ms: number): void {
  toolDuration.record(ms, { "chaoscore.tool": tool, "chaoscore.outcome": outcome });
}
