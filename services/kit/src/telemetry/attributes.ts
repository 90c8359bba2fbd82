/** Span and metric attribute names, defined once. */
export const ATTR = {
  tenant: "chaoscore.tenant",
  principal: "chaoscore.principal",
  session: "chaoscore.session",
  /** A 2026-07-28 request's ref (docs/protocol.md §5): what `session` is for 2025-11-25. */
  requestRef: "chaoscore.request.ref",
  /** Which revision served an MCP request: `legacy` (2025-11-25) or `modern` (2026-07-28). */
  mcpEra: "chaoscore.mcp.era",
  tool: "chaoscore.tool",
  capability: "chaoscore.capability",
  decision: "chaoscore.policy.decision",
  policyVersion: "chaoscore.policy.version",
  /** Where a decision's policy came from: `store` (the policy service read it) or `snapshot` (cognition's, docs/cognition.md). */
  policySource: "chaoscore.policy.source",
  /** A snapshot decision that read the policy first (outside its bound, or after an announced change). */
  policyReread: "chaoscore.policy.reread",
  rpcSide: "chaoscore.rpc.side",
  outcome: "chaoscore.outcome",
  /** The ledger sequence number an append was given. */
  ledgerSeq: "chaoscore.ledger.seq",
  /** The event type a ledger entry records. */
  ledgerEvent: "chaoscore.ledger.event",
  errorType: "error.type",
  /** The upstream MCP server a call went to (docs/federation.md). */
  upstream: "chaoscore.upstream",
} as const;

/**
 * Names the OpenTelemetry semantic conventions define, spelled as they spell them: the MCP
 * conventions (`semantic-conventions` `docs/gen-ai/mcp.md`), and the JSON-RPC, network and RPC
 * names they reuse.
 */
export const SEMCONV = {
  mcpMethodName: "mcp.method.name",
  mcpProtocolVersion: "mcp.protocol.version",
  mcpSessionId: "mcp.session.id",
  mcpResourceUri: "mcp.resource.uri",
  genAiToolName: "gen_ai.tool.name",
  genAiPromptName: "gen_ai.prompt.name",
  genAiOperationName: "gen_ai.operation.name",
  jsonrpcRequestId: "jsonrpc.request.id",
  rpcResponseStatusCode: "rpc.response.status_code",
  networkTransport: "network.transport",
  networkProtocolName: "network.protocol.name",
  errorType: "error.type",
  serverAddress: "server.address",
  serverPort: "server.port",
  /** The MCP server's request duration histogram (seconds). */
  mcpServerOperationDuration: "mcp.server.operation.duration",
  /** The MCP client's request duration histogram (seconds): an upstream call as cognition saw it. */
  mcpClientOperationDuration: "mcp.client.operation.duration",
} as const;

/** `mcp.server.operation.duration`'s explicit bucket boundaries, as the MCP conventions give them (seconds). */
export const MCP_DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300] as const;
