import { isJSONRPCRequest, ProtocolErrorCode, type JSONRPCErrorResponse, type RequestId, type Transport } from "@modelcontextprotocol/server";
import { ChaosError, type Logger } from "@chaos-core/kit";
import type { ServerScope } from "../sessions/server-scope.js";
import { RateLimited, type LimitedCall, type RateLimiter } from "../limits/limiter.js";

/**
 * The requests besides `tools/call` that make the edge work for the caller: each reads from a
 * service — a document, the capability list, a ledger checkpoint, council sessions (`resources/read`,
 * `resources/list` through the council template's listing, `prompts/get`) or the session ids a
 * completion offers (`completion/complete`). They take from the tenant's and the principal's
 * buckets, the ones its tool calls take from (the limits document has no per-resource or
 * per-prompt limit: the per-tool buckets stay the tools'). What the edge answers from memory —
 * `initialize`, `ping`, `server/discover`, `tools/list`, `prompts/list`,
 * `resources/templates/list` — and the bookkeeping of a session (`logging/setLevel`,
 * `resources/subscribe`, `resources/unsubscribe`) or a `subscriptions/listen` stream are not limited.
 */
export const LIMITED_METHODS: ReadonlySet<string> = new Set(["resources/read", "resources/list", "prompts/get", "completion/complete"]);

/**
 * The JSON-RPC error code of a request a rate limit refused: the implementation-defined server
 * error (`-32000`), as the HTTP transport's other refusals; `data.code` (`resource_exhausted`) says
 * which, `data.retryAfterMs` when to retry.
 */
export const RATE_LIMITED_ERROR_CODE = -32000;

/** What a refused request is answered: when to retry, for a client to act on without reading the message. */
export function rateLimitedError(id: RequestId, err: unknown): JSONRPCErrorResponse {
  const e = ChaosError.from(err);
  if (err instanceof RateLimited) {
    return { jsonrpc: "2.0", id, error: { code: RATE_LIMITED_ERROR_CODE, message: `${e.code}: ${e.message}`, data: { code: e.code, retryAfterMs: err.retryAfterMs } } };
  }
  // The limits could not be checked: the request does not run (kit's normalised message, as other internal errors).
  return { jsonrpc: "2.0", id, error: { code: ProtocolErrorCode.InternalError, message: `${e.code}: ${e.message}`, data: { code: e.code } } };
}

/**
 * Holds every {@link LIMITED_METHODS} request `transport` delivers to the scope's tenant and
 * principal limits before the SDK dispatches it: over a limit, it is answered with
 * {@link rateLimitedError} and nothing runs. One place for every transport (stdio, a 2025-11-25
 * session, a 2026-07-28 request), one admission per request. A request no limit applies to is
 * dispatched at once, as without limits.
 */
export function limitRequests(transport: Transport, limiter: RateLimiter, scope: ServerScope, logger: Logger): void {
  const dispatch = transport.onmessage;
  const failed = (err: unknown) => transport.onerror?.(err instanceof Error ? err : new Error(String(err)));
  transport.onmessage = (message, extra) => {
    if (!isJSONRPCRequest(message) || !LIMITED_METHODS.has(message.method)) return dispatch?.(message, extra);
    const call: LimitedCall = { tenant: scope.tenant, principal: scope.principal, readOnly: true };
    if (!limiter.limits(call)) return dispatch?.(message, extra);
    limiter
      .admit(call)
      .then(
        () => dispatch?.(message, extra),
        (err: unknown) => {
          logger.info({ tenant: scope.tenant, principal: scope.principal, method: message.method, outcome: ChaosError.from(err).code }, "request refused before it ran: rate limit");
          return transport.send(rateLimitedError(message.id, err));
        },
      )
      .catch(failed);
  };
}
