/** Span and metric attribute names, defined once. */
export const ATTR = {
  tenant: "chaoscore.tenant",
  principal: "chaoscore.principal",
  session: "chaoscore.session",
  tool: "chaoscore.tool",
  capability: "chaoscore.capability",
  decision: "chaoscore.policy.decision",
  policyVersion: "chaoscore.policy.version",
  rpcSide: "chaoscore.rpc.side",
  outcome: "chaoscore.outcome",
  errorType: "error.type",
} as const;
