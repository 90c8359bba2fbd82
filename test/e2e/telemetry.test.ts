import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpClient, removeDir, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/** A stand-in OpenTelemetry collector: it keeps every OTLP/HTTP body it is sent, by path. */
function startCollector(): Promise<{ server: Server; url: string; bodies: Map<string, Buffer[]> }> {
  const bodies = new Map<string, Buffer[]>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const list = bodies.get(req.url ?? "") ?? [];
      list.push(Buffer.concat(chunks));
      bodies.set(req.url ?? "", list);
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies }),
    ),
  );
}

describe("OpenTelemetry export", () => {
  const dir = tempDir();
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let serve: ServeProcess;

  beforeAll(async () => {
    collector = await startCollector();
    serve = await startServe({
      CHAOS_CORE_DATA_DIR: dir,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_SERVICE_NAME: "chaos-core-e2e",
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_METRICS_EXPORTER: "none",
      OTEL_LOGS_EXPORTER: "none",
    });
  });

  afterAll(async () => {
    await serve?.stop();
    collector?.server.close();
    removeDir(dir);
  });

  it("exports the spans of a tool call, joined to the client's trace, when an endpoint is set", async () => {
    // The client's own trace: a tool call that carries it in _meta joins it.
    const traceId = randomBytes(16).toString("hex");
    const traceparent = `00-${traceId}-${randomBytes(8).toString("hex")}-01`;
    const client = await httpClient(serve.url);
    const res = await client.callTool({ name: "chaoscore_recall", arguments: { key: "traced" }, _meta: { traceparent } });
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    await client.close();

    const wanted = [
      "chaos-core-e2e",
      "chaoscore.tool chaoscore_recall",
      "chaoscore.policy.decide",
      "chaoscore.memory.v1.MemoryService/Recall",
      "POST",
      // OTLP/protobuf carries trace ids as 16 raw bytes.
      Buffer.from(traceId, "hex").toString("latin1"),
    ];
    let text = "";
    for (let i = 0; i < 100; i++) {
      text = (collector.bodies.get("/v1/traces") ?? []).map((b) => b.toString("latin1")).join("\n");
      if (wanted.every((w) => text.includes(w))) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const w of wanted) expect(text, `exported spans mention ${JSON.stringify(w)}`).toContain(w);
  });
});
