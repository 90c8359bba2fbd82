import type { JSONRPCMessage, MessageExtraInfo, Transport } from "@modelcontextprotocol/server";
import { ATTR, isObject, SEMCONV, startMcpServerSpan, type McpServerSpan } from "@chaos-core/kit";
import { isModernScope, type ServerScope } from "../sessions/server-scope.js";

/** The `_meta` key that marks a 2026-07-28 request (its per-request envelope). */
const ENVELOPE_VERSION = "io.modelcontextprotocol/protocolVersion";

type Obj = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** A JSON-RPC id as a map key that keeps `1` and `"1"` apart. */
const idKey = (id: unknown): string => `${typeof id}:${String(id)}`;

/**
 * Opens one SERVER span per MCP request or notification `transport` delivers, as the MCP semantic
 * conventions describe it (docs/protocol.md §11), and ends it when the response with that id is
 * sent. The one hook for every transport (per-request 2026-07-28, 2025-11-25 sessions, stdio):
 * `ChaosCoreMcpServer.connect` calls it once the SDK has wired the transport. The request is
 * dispatched with its span active, so tool, prompt and resource handlers and the service calls
 * they make are its children. `mcp.session.id` is set only for a 2025-11-25 session over HTTP
 * (stdio has no protocol session id; 2026-07-28 has no sessions).
 */
export function traceMcpMessages(transport: Transport, scope: ServerScope): void {
  const open = new Map<string, McpServerSpan>();
  // What initialize negotiated (stdio sends no MCP-Protocol-Version header afterwards).
  let negotiated: string | undefined;

  const dispatch = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage, extra?: MessageExtraInfo) => {
    const msg = message as Obj;
    const method = str(msg.method);
    if (method === undefined) return dispatch?.(message, extra);
    const params = isObject(msg.params) ? msg.params : {};
    const meta = isObject(params._meta) ? params._meta : undefined;
    const envelopeVersion = str(meta?.[ENVELOPE_VERSION]);
    const modern = isModernScope(scope) || envelopeVersion !== undefined;
    const request = extra?.request;
    const protocolVersion =
      envelopeVersion ??
      request?.headers.get("mcp-protocol-version") ??
      (method === "initialize" ? str(params.protocolVersion) : undefined) ??
      negotiated;
    const isRequest = "id" in msg && msg.id !== undefined && msg.id !== null;
    const span = startMcpServerSpan({
      method,
      toolName: method === "tools/call" ? str(params.name) : undefined,
      promptName: method === "prompts/get" ? str(params.name) : undefined,
      resourceUri: method === "resources/read" ? str(params.uri) : undefined,
      requestId: isRequest ? (msg.id as string | number) : undefined,
      protocolVersion,
      sessionId: !modern && request && !isModernScope(scope) ? scope.id : undefined,
      transport: request ? "tcp" : "pipe",
      meta,
      attributes: {
        [ATTR.tenant]: scope.tenant,
        [ATTR.principal]: scope.principal,
        [ATTR.mcpEra]: modern ? "modern" : "legacy",
      },
    });
    if (method === "notifications/cancelled") {
      // A cancelled request gets no response: its span ends here.
      const cancelled = open.get(idKey(params.requestId));
      cancelled?.end();
      open.delete(idKey(params.requestId));
    }
    if (isRequest) open.set(idKey(msg.id), span);
    try {
      return span.run(() => dispatch?.(message, extra));
    } finally {
      if (!isRequest) span.end();
    }
  };

  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    const msg = message as Obj;
    if (!("method" in msg) && "id" in msg) {
      const key = idKey(msg.id);
      const span = open.get(key);
      if (span) {
        open.delete(key);
        const result = isObject(msg.result) ? msg.result : undefined;
        const version = str(result?.protocolVersion);
        if (version !== undefined) {
          negotiated = version;
          span.setAttributes({ [SEMCONV.mcpProtocolVersion]: version });
        }
        const error = isObject(msg.error) ? msg.error : undefined;
        span.end({
          jsonRpcErrorCode: typeof error?.code === "number" ? error.code : undefined,
          toolError: result?.isError === true,
        });
      }
    }
    return send(message, options);
  };

  const onclose = transport.onclose;
  transport.onclose = () => {
    for (const span of open.values()) span.end();
    open.clear();
    onclose?.();
  };
}
