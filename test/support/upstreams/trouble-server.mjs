#!/usr/bin/env node
// An MCP server (the official SDK) that misbehaves on request, for the tests that keep one
// upstream's trouble its own: `ok` answers, `hang` never does, `huge` answers `mb` megabytes of
// text, `crash` ends the process in the middle of the call, `slow` answers after `ms`, `chatty`
// reports `count` progress notifications of `kb` kilobytes each before a short answer, `meta`
// answers the request's `_meta` as JSON (the trace context a caller sent).
// Over stdio by default; `trouble-server.mjs http` serves Streamable HTTP (stateless) on a free
// port of 127.0.0.1 instead, printing `listening PORT`: answers as SSE streams at /mcp, as JSON
// bodies at /json.
import { createServer } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const object = (properties = {}) => ({ type: "object", properties });
const TOOLS = [
  { name: "ok", description: "Answers at once.", inputSchema: object(), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "hang", description: "Never answers.", inputSchema: object(), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "huge", description: "Answers mb megabytes.", inputSchema: object({ mb: { type: "number" } }), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "crash", description: "Exits mid-call.", inputSchema: object(), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "slow", description: "Answers after ms.", inputSchema: object({ ms: { type: "number" } }), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "meta", description: "Answers the request's _meta.", inputSchema: object(), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "chatty", description: "Reports count progress notifications of kb kilobytes.", inputSchema: object({ count: { type: "number" }, kb: { type: "number" } }), annotations: { readOnlyHint: true, openWorldHint: false } },
];

function troubleServer() {
  const server = new Server({ name: "trouble-server", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const args = req.params.arguments ?? {};
    switch (req.params.name) {
      case "hang":
        return new Promise(() => {});
      case "huge":
        return { content: [{ type: "text", text: "x".repeat(Math.round(Number(args.mb ?? 1) * 1024 * 1024)) }] };
      case "crash":
        process.exit(3);
        break;
      case "slow":
        await new Promise((r) => setTimeout(r, Number(args.ms ?? 100)));
        return { content: [{ type: "text", text: "slow" }] };
      case "meta":
        return { content: [{ type: "text", text: JSON.stringify(req.params._meta ?? {}) }] };
      case "chatty": {
        const count = Number(args.count ?? 10);
        const message = "y".repeat(Math.round(Number(args.kb ?? 1) * 1024));
        const progressToken = req.params._meta?.progressToken;
        for (let i = 1; i <= count; i++) await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress: i, total: count, message } });
        return { content: [{ type: "text", text: `told ${count}` }] };
      }
      default:
        return { content: [{ type: "text", text: `pid ${process.pid}` }] };
    }
  });
  return server;
}

if (process.argv[2] === "http") {
  // Stateless: a server and a transport per request.
  const http = createServer(async (req, res) => {
    const server = troubleServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: req.url === "/json" });
    res.on("close", () => void transport.close().then(() => server.close()));
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  http.listen(0, "127.0.0.1", () => console.log(`listening ${http.address().port}`));
} else {
  await troubleServer().connect(new StdioServerTransport());
}
