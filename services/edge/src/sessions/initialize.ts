import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/server";
import type { InitializeRequest } from "@modelcontextprotocol/server";
import type { EdgeSession } from "./server-scope.js";
import type { NewSessionRecord, SessionTransport } from "./session-store.js";

/** The revision the SDK's server answers for `requested` (the same rule it applies). */
export function negotiatedProtocolVersion(requested: string): string {
  return SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
}

/** The record a transport stores when a client initializes a session. */
export function sessionRecordFromInitialize(
  session: EdgeSession,
  transport: SessionTransport,
  params: InitializeRequest["params"],
): NewSessionRecord {
  return {
    id: session.id,
    tenant: session.tenant,
    principal: session.principal,
    transport,
    protocolVersion: negotiatedProtocolVersion(params.protocolVersion),
    clientInfo: { ...params.clientInfo },
    clientCapabilities: { ...params.capabilities },
  };
}
