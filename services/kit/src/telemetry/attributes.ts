/** Span and metric attribute names, defined once. */
export const ATTR = {
  tenant: "chaoscore.tenant",
  principal: "chaoscore.principal",
  session: "chaoscore.session",
  /** A 2026-07-28 request's ref (docs/protocol.md §5): what `session` is for 2025-11-25. */
  requestRef: "chaoscore.request.ref",
  tool: "chaoscore.tool",
  capability: "chaoscore.capability",
  decision: "chaoscore.policy.decision",
  policyVersion: "chaoscore.policy.version",
  rpcSide: "chaoscore.rpc.side",
  outcome: "chaoscore.outcome",
  errorType: "error.type",
} as const;
