#!/usr/bin/env node
// An MCP server (the official SDK, stdio) that misbehaves on request, for the tests that keep one
// upstream's trouble its own: `ok` answers, `hang` never does, `huge` answers `mb` megabytes of
// text, `crash` ends the process in the middle of the call, `slow` answers after `ms`.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const object = (properties = {}) => ({ type: "object", properties });
const TOOLS = [
  { name: "ok", description: "Answers at once.", inputSchema: object(), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "hang", description: "Never answers.", inputSchema: object(), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "huge", description: "Answers mb megabytes.", inputSchema: object({ mb: { type: "number" } }), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "crash", description: "Exits mid-call.", inputSchema: object(), annotations: { readOnlyHint: true, openWorldHint: false } },
  { name: "slow", description: "Answers after ms.", inputSchema: object({ ms: { type: "number" } }), annotations: { readOnlyHint: true, openWorldHint: false } },
];

const server = new Server({ name: "trouble-server", version: "1.0.0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS }));
server.setRequestHandler(CallToolRequestSchema, async (req) => {
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
    default:
      return { content: [{ type: "text", text: `pid ${process.pid}` }] };
  }
});
await server.connect(new StdioServerTransport());
