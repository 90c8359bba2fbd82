import { ChaosError } from "@chaos-core/kit";
import type { UpstreamFetch } from "./guarded-fetch.js";

/** The largest upstream answer served, as JSON (`CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES`). */
export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;

/**
 * What one message may carry beyond its result before it is cut while arriving: the JSON-RPC
 * envelope, SSE field names, and one read from a pipe (the stdio reader checks what it holds
 * plus the read that came in). An answer between the cap and cap + this arrives whole and is
 * refused by the pool's exact check on the result.
 */
export const FRAMING_ALLOWANCE = 128 * 1024;

/** The refusal of an answer over the cap, the same wherever it is found. */
export function answerOverCap(upstream: string, cap: number, cause?: unknown): ChaosError {
  return new ChaosError(
    "resource_exhausted",
    `upstream "${upstream}" sent an answer over ${cap} bytes, the most Chaos Core accepts (CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES)`,
    cause === undefined ? undefined : { cause },
  );
}

/** A response body cut for carrying one message over the limit: what was asked. */
export interface CutResponse {
  readonly method: string;
  /** The request's body as sent (the JSON-RPC message(s) of a POST). */
  readonly requestBody?: string;
}

/** Statuses a Response may not carry a body with. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const LF = 10;
const CR = 13;

/**
 * Counts an SSE stream's bytes per event — from one blank line to the next, line ends aside — and
 * errors the stream once one event passes `limit`: a stream of many small messages (the
 * standalone GET stream, a POST stream's progress before its answer) flows however long it runs.
 */
function perEvent(limit: number, cut: () => Error): TransformStream<Uint8Array, Uint8Array> {
  let bytes = 0;
  let lineEmpty = true;
  let afterCR = false;
  return new TransformStream({
    transform(chunk, controller) {
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i];
        if (b === LF || b === CR) {
          // CRLF is one line end.
          if (b === LF && afterCR) {
            afterCR = false;
            continue;
          }
          afterCR = b === CR;
          if (lineEmpty) bytes = 0;
          lineEmpty = true;
          continue;
        }
        afterCR = false;
        lineEmpty = false;
        if (++bytes > limit) return controller.error(cut());
      }
      controller.enqueue(chunk);
    },
  });
}

/** Counts a body that is one answer (a JSON response: one message, or a batch) and errors it past `limit`. */
function perResponse(limit: number, cut: () => Error): TransformStream<Uint8Array, Uint8Array> {
  let bytes = 0;
  return new TransformStream({
    transform(chunk, controller) {
      bytes += chunk.byteLength;
      if (bytes > limit) return controller.error(cut());
      controller.enqueue(chunk);
    },
  });
}

/**
 * `fetch` with every response body counted as it streams (docs/federation.md §7): an SSE stream
 * per event, any other body whole. Once one message passes `limit` the body errors — its reader
 * sees the error, the source is cancelled, so the connection is closed and nothing more is
 * buffered — and `onCut` hears which request it answered, to fail that call at once (the MCP
 * SDK does not end a call whose SSE stream broke; it waits for its timeout).
 */
export function cappedFetch(fetchImpl: UpstreamFetch, limit: number, onCut: (cut: CutResponse) => void): UpstreamFetch {
  return async (url, init) => {
    const response = await fetchImpl(url, init);
    if (response.body === null || NULL_BODY.has(response.status) || response.type === "opaqueredirect") return response;
    const request: CutResponse = { method: (init?.method ?? "GET").toUpperCase(), ...(typeof init?.body === "string" ? { requestBody: init.body } : {}) };
    const cut = () => {
      onCut(request);
      return new Error(`a message over ${limit} bytes (the answer cap and its framing allowance); the response was cut`);
    };
    const sse = response.headers.get("content-type")?.split(";")[0]?.trim().toLowerCase() === "text/event-stream";
    const counted = new Response(response.body.pipeThrough(sse ? perEvent(limit, cut) : perResponse(limit, cut)), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    // Where a redirect not followed is said to point is read from the response's URL.
    Object.defineProperty(counted, "url", { value: response.url });
    return counted;
  };
}

/** The progress tokens of the requests in a POST body: Chaos Core's own, one per call (connect.ts). */
export function progressTokensOf(body: string | undefined): string[] {
  if (body === undefined) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return [];
  }
  const tokens: string[] = [];
  for (const message of Array.isArray(parsed) ? parsed : [parsed]) {
    const token = (message as { params?: { _meta?: { progressToken?: unknown } } } | null)?.params?._meta?.progressToken;
    if (token !== undefined) tokens.push(String(token));
  }
  return tokens;
}
