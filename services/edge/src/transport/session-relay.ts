import {
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type WebStandardStreamableHTTPServerTransport,
} from "@modelcontextprotocol/server";
import type { Logger } from "@chaos-core/kit";
import { parseWireId, wireId, type LegacyRelay, type RelayedMessage } from "../events/legacy-relay.js";
import type { EdgeSession } from "../sessions/server-scope.js";

/*
 * A 2025-11-25 session's side of the relay between edge replicas (docs/protocol.md §8; the
 * Redis side is events/legacy-relay.ts): the ids of what it sends, what a POST here passes on to
 * another replica, and what another replica passes here.
 */

/**
 * The relay's two rewrites on one session's transport (docs/protocol.md §8): a request this
 * replica sends the client goes out with an id naming the replica (`<replica>.<n>`: every replica
 * holding the session numbers from 0), and the client's answer comes back to the SDK with its own
 * number; a `tools/call` running here is noted in flight until it is answered, so a
 * `notifications/cancelled` posted to another replica finds its way here.
 */
export function relayedThrough(transport: WebStandardStreamableHTTPServerTransport, session: EdgeSession, relay: LegacyRelay): void {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if (isJSONRPCRequest(message)) return send({ ...message, id: wireId(relay.replica, message.id) }, options);
    // The SDK cancels a request of its own (a timed-out elicitation) by the number it knows.
    if (isJSONRPCNotification(message) && message.method === "notifications/cancelled") {
      const requestId = (message.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof requestId === "number") return send({ ...message, params: { ...message.params, requestId: wireId(relay.replica, requestId) } }, options);
    }
    if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined) {
      relay.clearInflight(session.tenant, session.id, message.id);
    }
    return send(message, options);
  };
  const onmessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
      const mine = parseWireId(message.id);
      if (mine?.replica === relay.replica) return onmessage?.({ ...message, id: mine.id }, extra);
    } else if (isJSONRPCRequest(message) && message.method === "tools/call") {
      relay.markInflight(session.tenant, session.id, message.id);
    }
    onmessage?.(message, extra);
  };
}

/**
 * Whether `body`, posted to the session `local` here, belongs to another replica (docs/protocol.md
 * §8): a client's answer to a request another replica sent (its id names that replica), or a
 * `notifications/cancelled` for a call running on another one. Such a message is passed there
 * (the caller answers 202); false when it is this replica's to serve. Rejects `unavailable`
 * while Redis cannot be reached (the caller answers 503).
 */
export async function relayElsewhere(
  relay: LegacyRelay | undefined,
  local: { readonly session: EdgeSession },
  body: unknown,
  protocolVersion: string | undefined,
  logger: Logger,
): Promise<boolean> {
  if (!relay || typeof body !== "object" || body === null || Array.isArray(body)) return false;
  const message = body as JSONRPCMessage;
  const { tenant, id: sessionId } = local.session;
  let owner: string | undefined;
  if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
    owner = parseWireId(message.id)?.replica;
  } else if (isJSONRPCNotification(message) && message.method === "notifications/cancelled") {
    const requestId = (message.params as { requestId?: unknown } | undefined)?.requestId;
    if (typeof requestId === "string" || typeof requestId === "number") owner = await relay.inflightOwner(tenant, sessionId, requestId);
  }
  if (owner === undefined || owner === relay.replica) return false;
  await relay.send(owner, { tenant, sessionId, protocolVersion: protocolVersion ?? "2025-11-25", message });
  logger.debug({ tenant, session: sessionId, owner }, "relayed a message to the replica that holds its request");
  return true;
}

/** A message another replica passed here: handed to the session's transport as if posted here. */
export async function deliverRelayed(
  local: { readonly session: EdgeSession; readonly transport: WebStandardStreamableHTTPServerTransport } | undefined,
  relayed: RelayedMessage,
  logger: Logger,
): Promise<void> {
  const log = { tenant: relayed.tenant, session: relayed.sessionId };
  if (!local || local.session.tenant !== relayed.tenant) {
    // The call that asked has ended here (its replica restarted, or the session closed): nobody waits.
    return logger.debug(log, "a relayed message for a session this replica no longer holds was dropped");
  }
  try {
    const res = await local.transport.handleRequest(
      new Request("http://relay.invalid/mcp", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-session-id": relayed.sessionId,
          "mcp-protocol-version": relayed.protocolVersion,
        },
        body: JSON.stringify(relayed.message),
      }),
      { parsedBody: relayed.message },
    );
    await res.body?.cancel();
    if (res.status >= 400) return logger.warn({ ...log, status: res.status }, "a relayed message was refused by its session");
    const method = "method" in relayed.message ? relayed.message.method : "response";
    logger.debug({ ...log, method }, "delivered a relayed message to its session");
  } catch (err) {
    logger.warn({ ...log, err }, "delivering a relayed message failed");
  }
}
