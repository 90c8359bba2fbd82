import OpenAI from "openai";

/**
 * Per-attempt time limit. A planning call on a reasoning model can take tens of seconds, so this
 * is generous; the caller's own deadline (an AbortSignal) still cuts it short.
 */
export const PROVIDER_TIMEOUT_MS = 60_000;

/**
 * Retries done by the `openai` package itself (429, 408, 409, 5xx and connection errors, with
 * exponential backoff that honours `retry-after`). One retry absorbs a transient blip; more would
 * stack whole timeouts inside one MCP request, and the caller is better placed to decide whether to
 * try again later. The package default is 2.
 */
export const PROVIDER_MAX_RETRIES = 1;

/** Transport settings shared by the providers built on the `openai` package. */
export interface OpenAIClientSettings {
  readonly apiKey?: string;
  readonly baseURL: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;
}

/**
 * Builds an `openai` client from explicit settings only. Every option the package would otherwise
 * read from `process.env` (key, admin key, base URL, organization, project, webhook secret, log
 * level) is given here, so a key meant for one server is never picked up for another. (The package
 * still reads `OPENAI_CUSTOM_HEADERS` on its own; it has no option to turn that off.)
 */
export function createOpenAIClient(settings: OpenAIClientSettings): OpenAI {
  return new OpenAI({
    // The package insists on a key; with none configured we give it a placeholder and remove
    // the Authorization header it would build from it, so no bearer token is sent at all.
    apiKey: settings.apiKey ?? "no-key",
    ...(settings.apiKey === undefined ? { defaultHeaders: { Authorization: null } } : {}),
    adminAPIKey: null,
    baseURL: settings.baseURL,
    organization: null,
    project: null,
    webhookSecret: null,
    timeout: settings.timeoutMs,
    maxRetries: settings.maxRetries,
    logLevel: "warn",
  });
}

/** Instructions for a JSON answer: the caller's, then the shape and a plain "JSON only" rule. */
export function jsonInstructions(instructions: string, shapeDescription: string): string {
  return (
    `${instructions}\n\nAnswer with exactly one JSON object and nothing else (no prose, no Markdown). ` +
    `The object must have this shape:\n${shapeDescription}`
  );
}
