import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

/** One request a receiver got, as it came (the body unparsed: signatures cover its bytes). */
export interface ReceivedWebhook {
  readonly id: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** The how-manieth request with this `webhook-id`, 1-based. */
  readonly nth: number;
}

/** How the receiver answers one request: an HTTP status, or `"hang"` (no answer until it closes). */
export type WebhookAnswer = number | "hang";

/** A real HTTP server on 127.0.0.1 that records every POST. */
export interface WebhookReceiver {
  /** `http://127.0.0.1:<port>/hook`. */
  readonly url: string;
  readonly received: ReceivedWebhook[];
  /** Chooses each answer; default 204. */
  answer: (request: ReceivedWebhook) => WebhookAnswer;
  /** The requests with this `webhook-id`, oldest first. */
  byId(id: string): ReceivedWebhook[];
  /** Resolves once `ready()` holds, polling; rejects after `timeoutMs` naming `what` and what was received. */
  waitFor(what: string, ready: () => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

function flatten(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : v;
  return out;
}

/** Starts a {@link WebhookReceiver} on an ephemeral loopback port. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const headers = flatten(req.headers);
      const id = headers["webhook-id"] ?? "";
      const request: ReceivedWebhook = { id, headers, body: Buffer.concat(chunks).toString("utf8"), nth: received.filter((r) => r.id === id).length + 1 };
      received.push(request);
      const answer = receiver.answer(request);
      if (answer === "hang") return;
      res.writeHead(answer).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const receiver: WebhookReceiver = {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    answer: () => 204,
    byId: (id) => received.filter((r) => r.id === id),
    async waitFor(what, ready, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (!ready()) {
        if (Date.now() > deadline) {
          throw new Error(`timed out waiting for ${what}; received: ${JSON.stringify(received.map((r) => [r.id, r.nth, r.body.slice(0, 200)]))}`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}
