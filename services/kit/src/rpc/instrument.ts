import {
  context,
  metrics,
  propagation,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
} from "@opentelemetry/api";
import type { DescMethod } from "@bufbuild/protobuf";
import { ChaosError } from "../errors.js";
import { ATTR } from "../telemetry/attributes.js";

const tracer = trace.getTracer("chaoscore.rpc");
const meter = metrics.getMeter("chaoscore.rpc");
const duration = meter.createHistogram("chaoscore.rpc.duration", {
  description: "Duration of service calls, by method, side and outcome",
  unit: "ms",
});

export type Side = "client" | "server";

function spanName(method: DescMethod): string {
  return `${method.parent.typeName}/${method.name}`;
}

/** Records an error the same way everywhere: exception, status ERROR, error.type. */
export function recordError(span: Span, err: unknown): void {
  const e = ChaosError.from(err);
  span.recordException(err instanceof Error ? err : e);
  span.setStatus({ code: SpanStatusCode.ERROR, message: e.message });
  span.setAttribute(ATTR.errorType, e.code);
}

/**
 * Runs one call inside a span and records its duration: the same for gRPC and in-process
 * transports, so a trace looks alike whichever one composed the system.
 */
export async function instrument<T>(
  side: Side,
  method: DescMethod,
  tenant: string,
  fn: (span: Span) => Promise<T>,
  parent: Context = context.active(),
): Promise<T> {
  const start = performance.now();
  const span = startRpcSpan(side, method, tenant, parent);
  let outcome = "ok";
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    outcome = ChaosError.from(err).code;
    recordError(span, err);
    throw err;
  } finally {
    endRpcSpan(span, side, method, outcome, start);
  }
}

/**
 * {@link instrument} for a server-streaming call: the span is open from the first message asked
 * for until the stream ends, and `open` runs (and each message is pulled) with it active, so the
 * trace context a transport injects when the call starts is this span's.
 */
export async function* instrumentStream<T>(
  side: Side,
  method: DescMethod,
  tenant: string,
  open: () => AsyncIterable<T>,
): AsyncGenerator<T> {
  const start = performance.now();
  const parent = context.active();
  const span = startRpcSpan(side, method, tenant, parent);
  const active = trace.setSpan(parent, span);
  let outcome = "ok";
  try {
    const it = context.with(active, () => open()[Symbol.asyncIterator]());
    try {
      for (;;) {
        const next = await context.with(active, () => it.next());
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await context.with(active, async () => it.return?.());
    }
  } catch (err) {
    outcome = ChaosError.from(err).code;
    recordError(span, err);
    throw err;
  } finally {
    endRpcSpan(span, side, method, outcome, start);
  }
}

/** The RPC span both call shapes open: named by the method, on the caller's side or the server's. */
function startRpcSpan(side: Side, method: DescMethod, tenant: string, parent: Context): Span {
  return tracer.startSpan(
    spanName(method),
    {
      kind: side === "client" ? SpanKind.CLIENT : SpanKind.SERVER,
      attributes: {
        "rpc.system": "grpc",
        "rpc.service": method.parent.typeName,
        "rpc.method": method.name,
        [ATTR.tenant]: tenant,
      },
    },
    parent,
  );
}

/** Ends the span and records the call's duration with its outcome. */
function endRpcSpan(span: Span, side: Side, method: DescMethod, outcome: string, start: number): void {
  span.end();
  duration.record(performance.now() - start, {
    "rpc.method": spanName(method),
    [ATTR.rpcSide]: side,
    [ATTR.outcome]: outcome,
  });
}

/** Writes the active W3C trace context into a carrier (gRPC metadata, via a setter). */
export function injectTrace(set: (key: string, value: string) => void): void {
  propagation.inject(context.active(), undefined, { set: (_c, k, v) => set(k, v) });
}

/** Reads a W3C trace context from a carrier. */
export function extractTrace(get: (key: string) => string | undefined): Context {
  return propagation.extract(context.active(), undefined, {
    get: (_c, k) => get(k),
    keys: () => ["traceparent", "tracestate"],
  });
}
