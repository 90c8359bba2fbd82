import { trace } from "@opentelemetry/api";
import { recordError } from "../rpc/instrument.js";

/** The part of a span a domain step may touch. */
export interface StepSpan {
  setAttributes(attributes: Record<string, string | number | boolean>): void;
}

const tracer = trace.getTracer("chaoscore.domain");

/**
 * Runs one domain step (a policy decision, a cognitive stage, a ledger append) in its own
 * span, recording errors the same way as every other span. A no-op when telemetry is off.
 */
export async function withSpan<T>(
  name: string,
  attributes: Record<string, string | number | boolean>,
  fn: (span: StepSpan) => Promise<T> | T,
): Promise<T> {
  return tracer.startActiveSpan(name, { attributes }, async (span) => {
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
