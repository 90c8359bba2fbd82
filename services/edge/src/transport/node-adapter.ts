import type { NodeServerResponseLike } from "@modelcontextprotocol/node";

/*
 * What the SDK's Node adapter (`toNodeHandler`) needs around it to serve a request of this
 * edge's as the v1 transport did, for the 2025-11-25 sessions (http-sessions.ts) and the
 * 2026-07-28 handlers (http-modern.ts) alike.
 */

/**
 * The body express parsed (and incoming.ts screened), on its way through `toNodeHandler` to the
 * transport unchanged. The adapter serializes a parsed body again for the web `Request` it builds
 * (which the transport, given `parsedBody`, never reads); `JSON.stringify` recurses, so a value
 * nested 10 000 deep, which the tool-argument check refuses naming the field, would end as a
 * 500 there. This serializes to nothing, and keeps the request's id for the adapter's own 500.
 */
export class ParsedBody {
  constructor(readonly value: unknown) {}

  get method(): unknown {
    return (this.value as { method?: unknown } | null)?.method;
  }

  get id(): unknown {
    return (this.value as { id?: unknown } | null)?.id;
  }

  toJSON(): undefined {
    return undefined;
  }
}

/**
 * `res` with the headers of an event stream sent at once, as the v1 transport (Hono's Node
 * adapter) sent them: the SDK's `toNodeHandler` writes the status and headers and then waits for
 * the first event, so a client opening a GET stream would otherwise hear nothing until the
 * first notification or keep-alive comment (15 s). "At once" is at the end of this turn of the
 * event loop, unless an event was written by then: then the headers leave with it, in one write
 * to the socket instead of two (a POST's stream has its first event at once — a separate write
 * of the headers alone was 5 % of the edge's CPU under 16 clients).
 */
export function eventStreamsFlushed(res: NodeServerResponseLike): NodeServerResponseLike {
  let wrote = false;
  const flushable = res as unknown as { flushHeaders?: () => void; writable?: boolean };
  return {
    writeHead(status, headers) {
      const written = res.writeHead(status, headers);
      const type = headers ? Object.entries(headers).find(([name]) => name.toLowerCase() === "content-type")?.[1] : undefined;
      if (type?.startsWith("text/event-stream")) {
        setImmediate(() => {
          if (!wrote && flushable.writable !== false && !res.destroyed) flushable.flushHeaders?.();
        });
      }
      return written;
    },
    write: (chunk) => {
      wrote = true;
      return res.write(chunk);
    },
    end: (chunk) => {
      wrote = true;
      return res.end(chunk);
    },
    on: (event, listener) => res.on(event, listener),
    get destroyed() {
      return res.destroyed;
    },
  };
}

/**
 * `response` with its body cancelled as soon as the client goes away. `toNodeHandler` aborts
 * `request.signal` when the connection closes but looks at it only when the next chunk is due,
 * so an idle event stream (a session's GET stream) would stay registered, refusing the client's
 * reconnect with 409, until the next notification or keep-alive. Cancelling the body runs the
 * transport's own clean-up at once, as the v1 transport's adapter did. Every POST's response
 * passes through here, so it is one pulling stream, not a TransformStream and its pipe (which
 * cost 70–100 µs a response against 30–35 µs, measured).
 */
export function endsWithClient(request: Request, response: Response): Response {
  if (!response.body) return response;
  const reader = response.body.getReader();
  const { signal } = request;
  // The cancel reaches the transport's stream (its clean-up runs); the pending read then ends.
  const onAbort = () => void reader.cancel().catch(() => {});
  if (signal.aborted) onAbort();
  else signal.addEventListener("abort", onAbort, { once: true });
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await reader.read();
      if (!next.done) return controller.enqueue(next.value);
      signal.removeEventListener("abort", onAbort);
      controller.close();
    },
    cancel(reason) {
      signal.removeEventListener("abort", onAbort);
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
