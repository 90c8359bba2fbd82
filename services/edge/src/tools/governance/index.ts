import type { ToolDefinition } from "../../definitions/tool.js";
import { approveSpendTool } from "./approve-spend.js";
import { authorizeToolCallTool } from "./authorize-tool-call.js";
import { chpContentHashTool } from "./chp-content-hash.js";
import { chpVersionTool } from "./chp-version.js";
import { evaluateSpendGateTool } from "./evaluate-spend-gate.js";
import { evaluateToolApprovalTool } from "./evaluate-tool-approval.js";
import { inspectAuditLedgerTool } from "./inspect-audit-ledger.js";
import { issueApprovalReceiptTool } from "./issue-approval-receipt.js";
import { requestAuthorizationTool } from "./request-authorization.js";

/** The governance toolset (DESIGN: "The MCP surface"), in the order a client lists it. */
export const GOVERNANCE_TOOLS: readonly ToolDefinition[] = [
  evaluateSpendGateTool,
  approveSpendTool,
  evaluateToolApprovalTool,
  issueApprovalReceiptTool,
  authorizeToolCallTool,
  requestAuthorizationTool,
  inspectAuditLedgerTool,
  chpContentHashTool,
  chpVersionTool,
];
