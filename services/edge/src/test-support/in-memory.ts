import { randomUUID } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult, ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import { InMemoryTransport, type InitializeRequest } from "@modelcontextprotocol/server";
import { TOOLSET_NAMES } from "@chaos-core/kit";
import type { Identity } from "../auth/identity.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import type { EdgeSession } from "../sessions/server-scope.js";
import { createChaosCoreServer, type CreateServerOptions } from "../server/create-server.js";
import { sessionRecordFromInitialize } from "../sessions/initialize.js";

export interface Connected {
  readonly client: Client;
  readonly session: EdgeSession;
  call(name: string, args: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

/** What the test client declares, and how it is set up before it connects (request handlers). */
export interface ConnectOptions {
  readonly capabilities?: ClientCapabilities;
  readonly setup?: (client: Client) => void;
  /** What the server serves, when not the whole surface (an injected definition list). */
  readonly server?: CreateServerOptions;
}

/**
 * A real SDK client (v1's `Client`, the one the issue keeps for tests) connected to
 * {@link createChaosCoreServer} through the server package's in-memory transport (both halves
 * of a pair must come from one package; the client only needs the `Transport` contract, which
 * v1 and v2 share), with the session record a transport would store at initialize.
 */
export async function connectInMemory(deps: EdgeDeps, identity: Identity, options: ConnectOptions = {}): Promise<Connected> {
  const session: EdgeSession = { id: randomUUID(), ...identity };
  const server = createChaosCoreServer(deps, session, options.server);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "edge-test", version: "1.0.0" }, { capabilities: options.capabilities ?? {} });
  options.setup?.(client);
  await client.connect(clientSide);
  await deps.sessions.create(
    sessionRecordFromInitialize(session, "stdio", {
      protocolVersion: "2025-11-25",
      // The v1 client's capability type is looser than v2's (JSON values only); what a test declares fits both.
      capabilities: (options.capabilities ?? {}) as InitializeRequest["params"]["capabilities"],
      clientInfo: { name: "edge-test", version: "1.0.0" },
    }),
  );
  // Listing first makes the client validate every result against the published output schema.
  await client.listTools();
  return {
    client,
    session,
    call: async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

/**
 * `deps` as an edge serves tenants whose operator enabled every toolset, the opt-in
 * finance-reference included (`chaos-core tenants settings <id> --toolsets all`).
 */
export function withEveryToolset(deps: EdgeDeps): EdgeDeps {
  return { ...deps, enabledToolsets: () => TOOLSET_NAMES };
}

/** A tenant id no other test uses. */
export function uniqueTenant(label: string): string {
  return `${label}-${randomUUID().slice(0, 8)}`;
}
