import type { LoggingLevel } from "@modelcontextprotocol/server";

/** One MCP session as the server factory sees it: who it belongs to, and its id. */
export interface EdgeSession {
  readonly id: string;
  readonly tenant: string;
  readonly principal: string;
  /**
   * The client's logging level as the session store last said it here: the record the HTTP
   * transport's touch read when it resolved the current request, or the level this replica just
   * stored. Absent: not known here — read the store. Saves the tools a second read of the record
   * per call.
   */
  levelSeen?: { readonly logLevel: LoggingLevel | undefined };
}

/**
 * Who a 2026-07-28 (stateless) request's server serves: the credential's tenant and principal,
 * no session (docs/protocol.md §5). Each request mints its own `requestRef` for the call context.
 */
export interface ModernScope {
  readonly era: "modern";
  readonly tenant: string;
  readonly principal: string;
  /** The roles of the request's credential (none when absent): its server registers only the upstream tools they are offered. */
  readonly roles?: readonly string[];
}

/** What a server is built for: one 2025-11-25 session, or one 2026-07-28 request. */
export type ServerScope = EdgeSession | ModernScope;

/** Whether `scope` is a 2026-07-28 request's (no session). */
export function isModernScope(scope: ServerScope): scope is ModernScope {
  return "era" in scope && scope.era === "modern";
}
