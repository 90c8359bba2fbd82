#!/usr/bin/env node
// changing-server.mjs over Streamable HTTP: a small MCP server (the official SDK) whose tools are
// whatever the JSON file named by its first argument says, read anew on every tools/list, listening
// on 127.0.0.1 at the port of its second argument (/mcp). When the file changes it tells every
// session (notifications/tools/list_changed, on the session's GET stream) — an upstream that
// changes a tool after it was pinned. Every tool answers with its name and arguments as text.
import { randomUUID } from "node:crypto";
import { readFileSync, watch } from "node:fs";
import { Buffer } from "node:buffer";
import { createServer } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, isInitializeRequest, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [file, port] = process.argv.slice(2);
const tools = () => JSON.parse(readFileSync(file, "utf8")).tools;
/** Session id → its server. */
const sessions = new Map();

function session() {
  const server = new Server({ name: "changing-http-server", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools() }));
  server.setRequestHandler(CallToolRequestSchema, (req) => ({
    content: [{ type: "text", text: JSON.stringify({ tool: req.params.name, arguments: req.params.arguments ?? {} }) }],
  }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => sessions.set(id, server) });
  transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
  return { server, transport };
}

const transports = new Map();
createServer(async (req, res) => {
  try {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    const id = req.headers["mcp-session-id"];
    let transport = typeof id === "string" ? transports.get(id) : undefined;
    if (!transport && req.method === "POST" && isInitializeRequest(body)) {
      const made = session();
      transport = made.transport;
      await made.server.connect(transport);
      await transport.handleRequest(req, res, body);
      if (transport.sessionId) transports.set(transport.sessionId, transport);
      return;
    }
    if (!transport) {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
      return;
    }
    await transport.handleRequest(req, res, body);
  } catch (err) {
    if (!res.headersSent) res.writeHead(500).end(String(err));
  }
}).listen(Number(port), "127.0.0.1");

watch(file, () => {
  for (const server of sessions.values()) void server.sendToolListChanged().catch(() => {});
});
