import type { Tool } from "@modelcontextprotocol/client";
import type { UpstreamDeclaration } from "@chaos-core/kit";
import { upstreamContracts, type ContractSet, type UpstreamToolDefinition } from "@chaos-core/contracts";
import { connectUpstream, type UpstreamConnectOptions } from "./connect.js";
import { upstreamToolNames } from "./names.js";
import { createUpstreamTokens } from "./upstream-auth.js";

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
 * connection is closed afterwards. An upstream declared with `auth` is read as Chaos Core's own
 * client at its issuer (client credentials; for `token_exchange` too: no person is calling), so
 * the issuer must let that client use the grant (docs/federation-platform.md §3).
 */
export async function readUpstreamContracts(decl: UpstreamDeclaration, options: UpstreamConnectOptions): Promise<ContractSet> {
  let connectOptions = options;
  if (decl.transport === "http" && decl.auth) {
    const tokens = createUpstreamTokens({ secrets: options.secrets, ...(options.fetch ? { fetchFor: () => options.fetch as typeof fetch } : {}) });
    const machine = { ...decl, auth: { ...decl.auth, type: "client_credentials" as const } };
    const self = { tenant: "", principal: "chaos-core" };
    connectOptions = {
      ...options,
      authProvider: { token: () => tokens.token(machine, "pin", self), onUnauthorized: () => Promise.resolve(tokens.invalidate(machine, "pin", self)) },
    };
  }
  const connection = await connectUpstream(decl, connectOptions);
  try {
    const tools = (await connection.listTools()).map(definitionOf);
    upstreamToolNames(decl.name, tools.map((t) => t.name));
    return upstreamContracts(decl.name, tools);
  } finally {
    await connection.close().catch(() => {});
  }
}
