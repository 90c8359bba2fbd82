import type { ToolDefinition, Toolset } from "../definitions/tool.js";
import { achieveTool } from "./achieve.js";
import { approveTool } from "./approve.js";
import { COUNCIL_TOOLS } from "./council.js";
import { executeTool } from "./execute.js";
import { FINANCE_REFERENCE_TOOLS } from "./finance/reference-tools.js";
import { GOVERNANCE_TOOLS } from "./governance/index.js";
import { inspectTool } from "./inspect.js";
import { planTool } from "./plan.js";
import { reasonTool } from "./reason.js";
import { recallTool } from "./recall.js";
import { rememberTool } from "./remember.js";

/**
 * The tool surface, grouped by toolset (DESIGN: "The MCP surface"). Later issues add tools by
 * adding definitions here; nothing else registers a tool.
 */
export const TOOLSETS: Readonly<Partial<Record<Toolset, readonly ToolDefinition[]>>> = {
  core: [inspectTool, rememberTool, recallTool, reasonTool, planTool, executeTool, achieveTool, approveTool],
  council: COUNCIL_TOOLS,
  governance: GOVERNANCE_TOOLS,
  "finance-reference": FINANCE_REFERENCE_TOOLS,
};

/** Every tool definition, in registration order. */
export const TOOL_DEFINITIONS: readonly ToolDefinition[] = Object.values(TOOLSETS).flat();
