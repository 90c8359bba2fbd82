#!/usr/bin/env node
// An MCP server (the official SDK, stdio) that talks back during a call: `steps` reports progress
// for the call's progressToken and a log line per step; `ask_model`, `ask_user` and `list_roots`
// send sampling/createMessage, elicitation/create and roots/list to its client whatever the
// client declared, and answer with what came back (the error's code and message when refused);
// `echo` answers its text with this process's pid.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ListRootsResultSchema,
  ListToolsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const object = (properties = {}) => ({ type: "object", properties });
const READ = { readOnlyHint: true, openWorldHint: false };
const TOOLS = [
  { name: "steps", description: "Reports progress and a log line per step.", inputSchema: object({ count: { type: "number" }, ms: { type: "number" } }), annotations: READ },
  { name: "ask_model", description: "Asks its client for a model's completion.", inputSchema: object(), annotations: READ },
  { name: "ask_user", description: "Asks its client's user a question.", inputSchema: object(), annotations: READ },
  { name: "list_roots", description: "Asks its client for its roots.", inputSchema: object(), annotations: READ },
  { name: "echo", description: "Answers its text and pid.", inputSchema: object({ text: { type: "string" } }), annotations: READ },
];

const ASKS = {
  ask_model: [{ method: "sampling/createMessage", params: { messages: [{ role: "user", content: { type: "text", text: "hello" } }], maxTokens: 10 } }, CreateMessageResultSchema],
  ask_user: [{ method: "elicitation/create", params: { message: "Which file?", requestedSchema: { type: "object", properties: { file: { type: "string" } } } } }, ElicitResultSchema],
  list_roots: [{ method: "roots/list", params: {} }, ListRootsResultSchema],
};

const server = new Server({ name: "asking-server", version: "1.0.0" }, { capabilities: { tools: {}, logging: {} } });
server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS }));
server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
  const args = req.params.arguments ?? {};
  const name = req.params.name;
  if (name === "steps") {
    const count = Number(args.count ?? 3);
    const token = req.params._meta?.progressToken;
    for (let i = 1; i <= count; i++) {
      await new Promise((r) => setTimeout(r, Number(args.ms ?? 20)));
      if (token !== undefined) await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: i, total: count, message: `copying item ${i}` } });
      await server.sendLoggingMessage({ level: "info", logger: "asking", data: `copied item ${i}` });
    }
    return { content: [{ type: "text", text: `${count} steps done` }] };
  }
  const ask = ASKS[name];
  if (ask) {
    try {
      const answer = await extra.sendRequest(ask[0], ask[1], { timeout: 5_000 });
      return { content: [{ type: "text", text: `answered: ${JSON.stringify(answer)}` }] };
    } catch (err) {
      return { content: [{ type: "text", text: `refused (${err.code}): ${err.message}` }], isError: true };
    }
  }
  return { content: [{ type: "text", text: `${args.text ?? ""} (pid ${process.pid})` }] };
});
await server.connect(new StdioServerTransport());
