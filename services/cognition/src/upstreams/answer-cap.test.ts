import { createServer, type Server, type ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cappedFetch, progressTokensOf, type CutResponse } from "./answer-cap.js";

// A real HTTP server whose answers each test writes, and the platform's fetch through the counter.
const LIMIT = 64 * 1024;
type Answer = (res: ServerResponse) => void;
const answers = new Map<string, Answer>();
/** Whether the server saw the response closed before it had written it all. */
const closedEarly = new Map<string, boolean>();
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = req.url ?? "/";
    res.on("close", () => closedEarly.set(path, !res.writableFinished));
    req.resume();
    answers.get(path)!(res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  return new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Writes `parts` with a pause between them (so they arrive as chunks of their own), then ends unless `hold`. */
function writes(type: string, parts: string[], hold = false): Answer {
  return (res) => {
    res.writeHead(200, { "content-type": type });
    let i = 0;
    const next = () => {
      if (res.destroyed) return;
      if (i === parts.length) return void (hold ? undefined : res.end());
      res.write(parts[i++]!, () => setImmediate(next));
    };
    next();
  };
}

function fetched(path: string, answer: Answer, init?: RequestInit) {
  answers.set(path, answer);
  const cuts: CutResponse[] = [];
  return { cuts, response: cappedFetch(fetch, LIMIT, (cut) => cuts.push(cut))(`${base}${path}`, init) };
}

async function readAll(body: ReadableStream<Uint8Array>): Promise<number> {
  let bytes = 0;
  for await (const chunk of body) bytes += chunk.byteLength;
  return bytes;
}

const until = async (ok: () => boolean) => {
  for (let i = 0; i < 100 && !ok(); i++) await new Promise((r) => setTimeout(r, 20));
};

describe("counting an upstream's answers as they stream", () => {
  it("lets an SSE stream of many small events through, however long, in LF, CRLF and CR line ends", async () => {
    const event = (n: number, eol: string) => `event: message${eol}id: ${n}${eol}data: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/message", params: { data: "z".repeat(1000) } })}${eol}${eol}`;
    for (const eol of ["\n", "\r\n", "\r"]) {
      // 400 events of about 1 KB: six times the limit in all.
      const parts = Array.from({ length: 400 }, (_, n) => event(n, eol));
      const { cuts, response } = fetched(`/many-${eol.length}-${eol.charCodeAt(0)}`, writes("text/event-stream", parts));
      expect(await readAll((await response).body!)).toBe(Buffer.byteLength(parts.join("")));
      expect(cuts).toEqual([]);
    }
  });

  it("cuts an SSE stream at the event that passes the limit, even split across many chunks, and tells which request it answered", async () => {
    const small = `data: ${"a".repeat(100)}\n\n`;
    const big = ["data: ", ...Array.from({ length: 100 }, () => "b".repeat(1024)), "\n\n"];
    const body = JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "huge", _meta: { progressToken: "chaos-core-7" } } });
    // The server would go on writing for ever: it is stopped by the cut alone.
    const { cuts, response } = fetched("/big-event", writes("text/event-stream; charset=utf-8", [small, small, ...big, small], true), { method: "POST", body });
    const res = await response;
    await expect(readAll(res.body!)).rejects.toThrow(`a message over ${LIMIT} bytes (the answer cap and its framing allowance); the response was cut`);
    expect(cuts).toEqual([{ method: "POST", requestBody: body }]);
    expect(progressTokensOf(cuts[0]!.requestBody)).toEqual(["chaos-core-7"]);
    await until(() => closedEarly.has("/big-event"));
    expect(closedEarly.get("/big-event")).toBe(true);
  });

  it("counts a JSON body whole: one under the limit is read, one over it is cut before it is all read", async () => {
    const under = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { text: "c".repeat(LIMIT - 100) } });
    const { cuts: none, response: ok } = fetched("/json-under", writes("application/json", [under]));
    expect(await (await ok).json()).toEqual(JSON.parse(under));
    expect(none).toEqual([]);

    const parts = [`{"jsonrpc":"2.0","id":2,"result":{"text":"`, ...Array.from({ length: 200 }, () => "d".repeat(1024)), `"}}`];
    const { cuts, response } = fetched("/json-over", writes("application/json", parts, true));
    await expect((await response).json()).rejects.toThrow();
    expect(cuts).toEqual([{ method: "GET" }]);
    await until(() => closedEarly.has("/json-over"));
    expect(closedEarly.get("/json-over")).toBe(true);
  });

  it("keeps what a response says besides its body: status, headers, the URL", async () => {
    const { response } = fetched("/status", (res) => {
      res.writeHead(404, { "content-type": "text/plain", "x-upstream": "here" });
      res.end("no such thing");
    });
    const res = await response;
    expect([res.status, res.headers.get("x-upstream"), res.url, await res.text()]).toEqual([404, "here", `${base}/status`, "no such thing"]);
  });

  it("reads the progress tokens of a request or a batch, and none of what is not JSON-RPC", () => {
    expect(progressTokensOf(JSON.stringify([{ params: { _meta: { progressToken: "a" } } }, { method: "x" }, { params: { _meta: { progressToken: 3 } } }]))).toEqual(["a", "3"]);
    expect(progressTokensOf("not json")).toEqual([]);
    expect(progressTokensOf(undefined)).toEqual([]);
    expect(progressTokensOf("null")).toEqual([]);
  });
});
