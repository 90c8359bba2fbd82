import { ProtocolError, ProtocolErrorCode, ResourceNotFoundError, ResourceTemplate, UriTemplate } from "@modelcontextprotocol/server";
import type { AuthInfo, McpServer, ReadResourceResult, ServerContext } from "@modelcontextprotocol/server";
import { ChaosError, inRequestSpan } from "@chaos-core/kit";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { isModernScope, type ServerScope } from "../sessions/server-scope.js";
import { RESOURCE_MIME_TYPE, type ResourceContext, type ResourceDefinition, type TemplateResourceDefinition } from "../definitions/resource.js";
import { MAX_SUBSCRIPTION_URI_LENGTH, MAX_SUBSCRIPTIONS_PER_SESSION } from "../sessions/session-store.js";
import { servedWhile } from "../contracts/served-while.js";
import { scopedCall, scopeLogFields } from "./scope.js";

const metadataOf = (def: ResourceDefinition) => ({ title: def.title, description: def.description, mimeType: RESOURCE_MIME_TYPE, cacheHint: def.cacheHint });

/**
 * The definition `resources/read` of `uri` reaches, as the SDK looks it up: a fixed URI first,
 * then the templates in order.
 */
export function resourceAt(resources: readonly ResourceDefinition[], uri: string): ResourceDefinition | undefined {
  let href: string;
  try {
    href = new URL(uri).toString();
  } catch {
    return undefined;
  }
  return (
    resources.find((r) => r.kind === "static" && r.uri === href) ??
    resources.find((r) => r.kind === "template" && new UriTemplate(r.uriTemplate).match(href) !== null)
  );
}

/** The context of a completion: the SDK gives its callbacks no request context, so nothing can abort them. */
const NEVER = new AbortController().signal;

/**
 * Registers every resource of `resources` on `server`: the one place a definition becomes an MCP
 * resource or resource template, identical on every transport. Reads, lists and completions go
 * to the services as the scope's tenant and principal (a 2025-11-25 session, or a 2026-07-28
 * request with its own ref). A document that is not there (a
 * checkpoint of an empty log; a council session the tenant does not have, which includes every
 * other tenant's, or an id that is no session id) is `ResourceNotFoundError` — `-32602` with
 * `data: { uri }`, as the SDK answers an unknown URI; any other failure is an internal error
 * with kit's normalised message.
 *
 * Legacy (2025-11-25) `resources/subscribe` and `resources/unsubscribe` accept any URI, keep it in
 * the session record and answer `{}`; the transport sends `resources/updated` for the subscribed
 * URIs of ours (transport/http-sessions.ts). 2026-07-28 has neither method: it subscribes on a
 * `subscriptions/listen` stream, which the SDK serves from the tenant's event bus.
 *
 * With `drift` (the run-time rug-pull guard, docs/contracts.md §7) a drifted resource or template
 * is left out of `resources/list` (and its template's listed resources) and of
 * `resources/templates/list`; its `resources/read` is refused in front of the SDK's dispatch
 * (create-server.ts).
 */
export function registerResources(
  server: McpServer,
  resources: readonly ResourceDefinition[],
  deps: EdgeDeps,
  scope: ServerScope,
  drift?: (def: ResourceDefinition) => string | undefined,
): void {
  const served = (def: ResourceDefinition) => drift?.(def) === undefined;
  const log = deps.logger.child(scopeLogFields(scope));
  const contextOf = (signal: AbortSignal, auth?: AuthInfo): ResourceContext => ({ call: scopedCall(scope, auth).call, deps, signal });

  const read = (def: ResourceDefinition, uri: URL, extra: ServerContext, run: (ctx: ResourceContext) => Promise<unknown>) => {
    const { call, spanAttrs } = scopedCall(scope, extra.http?.authInfo);
    return inRequestSpan(
      spanAttrs,
      async (): Promise<ReadResourceResult> => {
        let doc: unknown;
        try {
          doc = await run({ call, deps, signal: extra.mcpReq.signal });
        } catch (err) {
          const e = ChaosError.from(err);
          if (e.code === "not_found" || e.code === "invalid_argument") doc = undefined;
          else {
            log.error({ err, resource: def.name }, "resource read failed");
            throw new ProtocolError(ProtocolErrorCode.InternalError, `${e.code}: ${e.message}`, { code: e.code, uri: uri.href });
          }
        }
        if (doc === undefined) throw new ResourceNotFoundError(uri.href);
        return { contents: [{ uri: uri.href, mimeType: RESOURCE_MIME_TYPE, text: JSON.stringify(doc, null, 2) }] };
      },
    );
  };

  const completing = (complete: (value: string, ctx: ResourceContext) => Promise<string[]>) => async (value: string) => {
    try {
      return await complete(value, contextOf(NEVER));
    } catch (err) {
      // A completion is a hint: a failure completes to nothing rather than failing the client's input.
      log.warn({ err }, "completion failed");
      return [];
    }
  };

  for (const def of resources) {
    const metadata = metadataOf(def);
    if (def.kind === "static") {
      const registered = server.registerResource(def.name, def.uri, metadata, (uri, extra) => read(def, uri, extra, (ctx) => def.read(ctx)));
      if (drift) servedWhile(registered, () => served(def));
      continue;
    }
    const list = def.list;
    const template = new ResourceTemplate(def.uriTemplate, {
      list: list
        ? async (extra) => {
            // The SDK lists a template's resources whether or not the template is enabled.
            if (!served(def)) return { resources: [] };
            try {
              return { resources: (await list(contextOf(extra.mcpReq.signal, extra.http?.authInfo))).map((r) => ({ ...r, mimeType: RESOURCE_MIME_TYPE })) };
            } catch (err) {
              const e = ChaosError.from(err);
              log.error({ err, resource: def.name }, "resource listing failed");
              throw new ProtocolError(ProtocolErrorCode.InternalError, `${e.code}: ${e.message}`, { code: e.code });
            }
          }
        : undefined,
      ...(def.complete
        ? { complete: Object.fromEntries(Object.entries(def.complete).map(([variable, fn]) => [variable, completing(fn)])) }
        : {}),
    });
    const registered = server.registerResource(def.name, template, metadata, (uri, variables, extra) =>
      read(def, uri, extra, (ctx) =>
        def.read(Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, Array.isArray(v) ? v.join(",") : v])), ctx),
      ),
    );
    if (drift) servedWhile(registered, () => served(def));
  }
  if (drift) {
    // The SDK's resources/templates/list lists every template, enabled or not; this one is the
    // SDK's answer (name, template, metadata as registered) without the drifted ones.
    server.server.setRequestHandler("resources/templates/list", async () => ({
      resourceTemplates: resources
        .filter((def): def is TemplateResourceDefinition => def.kind === "template" && served(def))
        .map((def) => ({ name: def.name, uriTemplate: def.uriTemplate, ...metadataOf(def) })),
    }));
  }

  // Where the transport delivers change events (docs/protocol.md §9: the council publisher
  // announces new sessions and changed ones, the policy watch the policy), both eras hear them:
  // 2026-07-28 on a subscriptions/listen stream, 2025-11-25 on its GET stream after
  // resources/subscribe. Elsewhere nothing is promised but the method 2025-11-25 can call.
  const delivered = deps.deliversChangeEvents === true;
  if (isModernScope(scope)) {
    server.server.registerCapabilities({ resources: delivered ? { subscribe: true, listChanged: true } : { listChanged: false } });
    return;
  }
  server.server.registerCapabilities({ resources: { subscribe: true, listChanged: delivered } });
  const session = scope;
  // Any URI is accepted, ours or not (what the capability promises); updates are only ever sent
  // for ours. The subscription is kept in the session record, so the replica holding the GET
  // stream sends them, whichever replica took the subscribe.
  server.server.setRequestHandler("resources/subscribe", async (request) => {
    const uri = request.params.uri;
    if (uri.length > MAX_SUBSCRIPTION_URI_LENGTH) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `params.uri: longer than ${MAX_SUBSCRIPTION_URI_LENGTH} characters`);
    }
    const record = await deps.sessions.get(session.tenant, session.id);
    if (!record) throw new ProtocolError(ProtocolErrorCode.InvalidRequest, "this session has expired; initialize a new one");
    const held = record.subscriptions ?? [];
    if (!held.includes(uri) && held.length >= MAX_SUBSCRIPTIONS_PER_SESSION) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidParams,
        `params.uri: this session already holds ${MAX_SUBSCRIPTIONS_PER_SESSION} subscriptions, the most one may; unsubscribe from one first`,
      );
    }
    await deps.sessions.update(session.tenant, session.id, { subscribe: uri });
    return {};
  });
  server.server.setRequestHandler("resources/unsubscribe", async (request) => {
    await deps.sessions.update(session.tenant, session.id, { unsubscribe: request.params.uri });
    return {};
  });
}
