import type { Tool } from "@modelcontextprotocol/client";
import type { UpstreamDeclaration } from "@chaos-core/kit";
import { upstreamContracts, type ContractSet, type UpstreamToolDefinition } from "@chaos-core/contracts";
import { connectUpstream, type UpstreamConnectOptions } from "./connect.js";
import { upstreamToolNames } from "./names.js";

/** An upstream's tool as `tools/list` gave it, in the fields a pin records. */
export function definitionOf(tool: Tool): UpstreamToolDefinition {
  return {
    name: tool.name,
    ...(tool.title !== undefined ? { title: tool.title } : {}),
    ...(tool.description !== undefined ? { description: tool.description } : {}),
    inputSchema: tool.inputSchema as Record<string, unknown>,
    ...(tool.outputSchema !== undefined ? { outputSchema: tool.outputSchema as Record<string, unknown> } : {}),
    ...(tool.annotations !== undefined ? { annotations: tool.annotations } : {}),
  };
}

/**
 * Reads an upstream's tools now and computes their contracts, as a pin records them; its tool
 * names must map one to one into Chaos Core's (names.ts), or nothing of it is pinned. The
 * connection is closed afterwards.
 */
export async function readUpstreamContracts(decl: UpstreamDeclaration, options: UpstreamConnectOptions): Promise<ContractSet> {
  const connection = await connectUpstream(decl, options);
  try {
    const tools = (await connection.listTools()).map(definitionOf);
    upstreamToolNames(decl.name, tools.map((t) => t.name));
    return upstreamContracts(decl.name, tools);
  } finally {
    await connection.close().catch(() => {});
  }
}
