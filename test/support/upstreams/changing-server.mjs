#!/usr/bin/env node
// A small MCP server (the official SDK, stdio) whose tools are whatever the JSON file named by its
// first argument says, read anew on every tools/list — an upstream that changes a tool after it
// was pinned (a rug pull) when a test rewrites the file. When the file changes it tells its client
// (notifications/tools/list_changed). Every tool answers with its name and arguments as text.
import { readFileSync, watch } from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const file = process.argv[2];
const tools = () => JSON.parse(readFileSync(file, "utf8")).tools;

const server = new Server({ name: "changing-server", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools() }));
server.setRequestHandler(CallToolRequestSchema, (req) => ({
  content: [{ type: "text", text: JSON.stringify({ tool: req.params.name, arguments: req.params.arguments ?? {} }) }],
}));
await server.connect(new StdioServerTransport());
watch(file, () => void server.sendToolListChanged().catch(() => {}));
