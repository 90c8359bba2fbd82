/**
 * Baseline for the tools/call benchmarks, on the SDK the edge is built on (issue 11 moved it to
 * SDK v2; issue 14 measures governed calls against a bare no-op "served by the same SDK the edge
 * uses"): a bare `@modelcontextprotocol/server` 2.x server over Streamable HTTP with stateful
 * sessions, on the SDK's Express app factory and Node transport, and one tool that does nothing.
 * Prints its URL on stdout once listening. (Until 2026-12-06 the baseline was the same server on
 * SDK v1, `bare-server.ts`; paired runs measured the two alike, BENCHMARKS.md.)
 */
import { randomUUID } from "node:crypto";
import type { Request, Response } from "express";
import { createMcpExpressApp } from "@modelcontextprotocol/express";
import { NodeStreamableHTTPServerTransport } from "@modelcontextprotocol/node";
import { isInitializeRequest, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";

const transports = new Map<string, NodeStreamableHTTPServerTransport>();

function newServer(): McpServer {
  const server = new McpServer({ name: "bare-v2", version: "0.0.0" });
  server.registerTool(
    "noop",
    { description: "Does nothing", inputSchema: z.object({ key: z.string() }), outputSchema: z.object({ key: z.string() }) },
    async ({ key }) => ({ content: [{ type: "text", text: key }], structuredContent: { key } }),
  );
  return server;
}

const app = createMcpExpressApp({ host: "127.0.0.1" });
app.post("/mcp", async (req: Request, res: Response) => {
  const id = req.headers["mcp-session-id"];
  let transport = typeof id === "string" ? transports.get(id) : undefined;
  if (!transport) {
    if (id || !isInitializeRequest(req.body)) {
      res.status(400).json({ jsonrpc: "2.0", error: { code: -32000, message: "bad session" }, id: null });
      return;
    }
    const t = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => void transports.set(sid, t),
    });
    t.onclose = () => t.sessionId && transports.delete(t.sessionId);
    await newServer().connect(t);
    transport = t;
  }
  await transport.handleRequest(req, res, req.body);
});
app.delete("/mcp", async (req: Request, res: Response) => {
  const id = req.headers["mcp-session-id"];
  const transport = typeof id === "string" ? transports.get(id) : undefined;
  if (!transport) {
    res.status(404).end();
    return;
  }
  await transport.handleRequest(req, res);
});
const listener = app.listen(0, "127.0.0.1", () => {
  const addr = listener.address();
  if (addr && typeof addr === "object") process.stdout.write(`http://127.0.0.1:${addr.port}/mcp\n`);
});
