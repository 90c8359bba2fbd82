// Baseline for the stdio start-up benchmark: a bare @modelcontextprotocol/sdk server over stdio
// with one tool that does nothing. Plain JavaScript, so it starts without tsx's loader, which
// would slow its module loading and skew a start-up comparison.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "bare", version: "0.0.0" });
server.registerTool(
  "noop",
  { description: "Does nothing", inputSchema: { key: z.string() }, outputSchema: { key: z.string() } },
  async ({ key }) => ({ content: [{ type: "text", text: key }], structuredContent: { key } }),
);
await server.connect(new StdioServerTransport());
