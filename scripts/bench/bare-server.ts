/**
 * Baseline for the tools/call benchmark: a bare @modelcontextprotocol/sdk server over
 * Streamable HTTP with stateful sessions and one tool that does nothing. Prints its URL on
 * stdout once listening.
 */
import { randomUUID } from "node:crypto";
import type { Request, Response } from "express";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { createMcpExpressApp } from "@modelcontextprotocol/sdk/server/express.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const transports = new Map<string, StreamableHTTPServerTransport>();

function newServer(): McpServer {
  const server = new McpServer({ name: "bare", version: "0.0.0" });
  server.registerTool(
    "noop",
    { description: "Does nothing", inputSchema: { key: z.string() }, outputSchema: { key: z.string() } },
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
    const t = new StreamableHTTPServerTransport({
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
