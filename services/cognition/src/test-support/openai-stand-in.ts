import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** A request the stand-in received, as the `openai` package sent it. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Record<string, unknown>;
}

/** How the stand-in answers one request. */
export type ScriptedReply =
  | { readonly kind: "json"; readonly status: number; readonly body: unknown; readonly headers?: Record<string, string> }
  /** Accepts the request and never answers, to exercise the client's timeout. */
  | { readonly kind: "hang" }
  /** Answers with whatever the function returns, given the request (for example to echo a header). */
  | { readonly kind: "dynamic"; readonly reply: (request: RecordedRequest) => ScriptedReply };

/** A local HTTP server that speaks the OpenAI API shape, scripted reply by reply. */
export interface OpenAIStandIn {
  /** The API root to give the client, ending in `/v1`. */
  readonly baseURL: string;
  /** Every request received so far, in order. */
  readonly requests: RecordedRequest[];
  /** Queues replies; each request takes the next one. An unscripted request gets a 599 that fails the test loudly. */
  script(...replies: ScriptedReply[]): void;
  close(): Promise<void>;
}

const ROUTES = new Set(["/v1/responses", "/v1/chat/completions"]);

/** Starts the stand-in on 127.0.0.1 and an ephemeral port. */
export async function startOpenAIStandIn(): Promise<OpenAIStandIn> {
  const queue: ScriptedReply[] = [];
  const requests: RecordedRequest[] = [];

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const path = req.url ?? "";
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      } catch {
        // Left empty: the test's assertions on the body will say what is missing.
      }
      const recorded: RecordedRequest = { method: req.method ?? "", path, headers: req.headers, body };
      requests.push(recorded);
      if (req.method !== "POST" || !ROUTES.has(path)) {
        send(res, { kind: "json", status: 404, body: { error: { message: `no route ${req.method} ${path}` } } });
        return;
      }
      const next = queue.shift() ?? { kind: "json", status: 599, body: { error: { message: "the test scripted no reply" } } };
      answer(res, next, recorded);
    });
  });

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    script: (...replies) => void queue.push(...replies),
    close: () =>
      new Promise<void>((resolve, reject) => {
        // Hung requests keep their sockets open; close them or close() would wait forever.
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

function answer(res: ServerResponse, reply: ScriptedReply, request: RecordedRequest): void {
  if (reply.kind === "hang") return;
  if (reply.kind === "dynamic") return answer(res, reply.reply(request), request);
  send(res, reply);
}

function send(res: ServerResponse, reply: Extract<ScriptedReply, { kind: "json" }>): void {
  res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
  res.end(JSON.stringify(reply.body));
}

/** A completed Responses API answer whose output text is `text`. */
export function responsesReply(text: string, model = "gpt-stand-in-2026-01-01"): ScriptedReply {
  return {
    kind: "json",
    status: 200,
    body: {
      id: "resp_test",
      object: "response",
      created_at: 1_780_000_000,
      status: "completed",
      model,
      output: [
        {
          type: "message",
          id: "msg_test",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text, annotations: [] }],
        },
      ],
      usage: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
    },
  };
}

/** A chat completions answer whose first choice says `text`. */
export function chatReply(text: string, model = "llama-stand-in"): ScriptedReply {
  return {
    kind: "json",
    status: 200,
    body: {
      id: "chatcmpl_test",
      object: "chat.completion",
      created: 1_780_000_000,
      model,
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: text } }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    },
  };
}

/** An error answer in the OpenAI error shape. */
export function errorReply(status: number, message: string, headers?: Record<string, string>): ScriptedReply {
  return {
    kind: "json",
    status,
    body: { error: { message, type: "test_error", code: null, param: null } },
    ...(headers === undefined ? {} : { headers }),
  };
}
