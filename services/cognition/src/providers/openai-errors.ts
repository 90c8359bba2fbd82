import { ChaosError } from "@chaos-core/kit";
import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from "openai";

// A provider's error body is text from another system: keep enough to act on, not a page.
const MAX_DETAIL = 300;

/** Replaces every occurrence of a secret (an API key a server might echo back) with a marker. */
export function redact(text: string, secret: string | undefined): string {
  return secret ? text.split(secret).join("[redacted]") : text;
}

function detailOf(err: APIError): string {
  const body = err.error as { message?: unknown } | undefined;
  const raw = typeof body?.message === "string" ? body.message : body === undefined ? "" : JSON.stringify(body);
  return raw.length > MAX_DETAIL ? `${raw.slice(0, MAX_DETAIL)}…` : raw;
}

/**
 * Maps anything the `openai` client throws to a ChaosError with a stable code. The SDK error is
 * deliberately not kept as `cause`: it carries the server's raw body, which a misbehaving server
 * may fill with the request's credentials, and causes end up in logs. `secret` is scrubbed from
 * the message for the same reason.
 */
export function fromOpenAIError(err: unknown, provider: string, secret: string | undefined): ChaosError {
  if (err instanceof ChaosError) return err;
  const make = (code: ConstructorParameters<typeof ChaosError>[0], message: string) =>
    new ChaosError(code, redact(`${provider}: ${message}`, secret));

  // Order matters: the timeout and abort errors are subclasses of the connection error.
  if (err instanceof APIUserAbortError) return make("cancelled", "the call was cancelled");
  if (err instanceof APIConnectionTimeoutError) return make("deadline_exceeded", "the model did not answer in time");
  if (err instanceof APIConnectionError) return make("unavailable", "could not reach the model server");
  if (err instanceof APIError) {
    const status = err.status ?? 0;
    const detail = detailOf(err);
    const suffix = detail ? `: ${detail}` : "";
    if (status === 429) {
      const retryAfter = err.headers?.get("retry-after");
      const hint = retryAfter ? ` (retry after ${retryAfter} s)` : "";
      return make("resource_exhausted", `rate limited or out of quota (HTTP 429)${hint}${suffix}`);
    }
    if (status === 401 || status === 403) {
      return make("failed_precondition", `the server refused the credentials (HTTP ${status}); check OPENAI_API_KEY${suffix}`);
    }
    if (status === 404) {
      return make("failed_precondition", `not found (HTTP 404); check OPENAI_MODEL and OPENAI_BASE_URL${suffix}`);
    }
    if (status === 408) return make("deadline_exceeded", `the server timed out (HTTP 408)${suffix}`);
    if (status === 400 || status === 413 || status === 422) {
      return make("invalid_argument", `the server rejected the request (HTTP ${status})${suffix}`);
    }
    if (status >= 500) return make("unavailable", `the model server failed (HTTP ${status})${suffix}`);
    return make("internal", `unexpected answer (HTTP ${status})${suffix}`);
  }
  const message = err instanceof Error ? err.message : String(err);
  return make("internal", `unexpected client error: ${message.slice(0, MAX_DETAIL)}`);
}
