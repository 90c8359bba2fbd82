import { toNodeHandler, type NodeMcpRequestHandler } from "@modelcontextprotocol/node";
import { createMcpHandler, type AuthInfo, type McpHttpHandler, type McpServerFactory, type ServerEventBus } from "@modelcontextprotocol/server";
import { ChaosError } from "@chaos-core/kit";
import { rolesOf } from "../auth/identity.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import type { ModernScope } from "../sessions/server-scope.js";
import { createChaosCoreServer } from "../server/create-server.js";
import { endsWithClient, eventStreamsFlushed, ParsedBody } from "./node-adapter.js";

/**
 * The tenant and principal a 2026-07-28 request is served as: the verified credential's, which
 * the transport's authentication always attaches (`authInfoOf`, the local identity on loopback
 * without keys). Nothing else names them: no header, argument or envelope field.
 */
export function modernScopeOf(auth: AuthInfo | undefined, tenant: string): ModernScope {
  const authTenant = auth?.extra?.["tenant"];
  if (!auth || typeof authTenant !== "string" || auth.clientId.length === 0) {
    throw new ChaosError("unauthenticated", "a 2026-07-28 request reached its server without a verified identity");
  }
  // One handler per tenant: a request of another tenant must never be served by this one.
  if (authTenant !== tenant) throw new ChaosError("permission_denied", `a request of tenant ${authTenant} reached tenant ${tenant}'s handler`);
  const roles = [...rolesOf(auth, { tenant, principal: auth.clientId })].sort();
  return { era: "modern", tenant, principal: auth.clientId, ...(roles.length > 0 ? { roles } : {}) };
}

/**
 * The server factory of one tenant's 2026-07-28 handler: the same server as a 2025-11-25
 * session's (one `createChaosCoreServer`: the same tools, prompts and resources), built per
 * request for the principal of the request's credential.
 */
export function factoryFor(deps: EdgeDeps, tenant: string): McpServerFactory {
  return ({ authInfo }) => createChaosCoreServer(deps, modernScopeOf(authInfo, tenant));
}

interface TenantHandler {
  readonly handler: McpHttpHandler;
  readonly serve: NodeMcpRequestHandler;
  /** Requests being answered now (an open event stream counts until it ends). */
  inflight: number;
  lastUsed: number;
}

/** How long a tenant's handler is kept without a request (docs/protocol.md §14). */
export const MODERN_HANDLER_IDLE_MS = 10 * 60_000;

/**
 * The 2026-07-28 leg of `/mcp` (docs/protocol.md §3): one SDK `createMcpHandler` per tenant,
 * made on the tenant's first request, strict (`legacy: 'reject'`: 2025-11-25 traffic never gets
 * here, the sessionful leg serves it). It owns every answer of the SDK's validation ladder:
 * `-32602` for a bad envelope, `-32022` for a revision it does not serve, `-32020` for a header
 * that disagrees with the body, 404 for a removed method. No session is ever opened.
 */
export class ModernHandlers {
  private readonly tenants = new Map<string, TenantHandler>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly idleMs: number;

  constructor(
    private readonly deps: EdgeDeps,
    private readonly options: {
      maxBodyBytes: number;
      idleMs?: number;
      /** The tenant's change-event bus: what its subscriptions/listen streams hear (docs/protocol.md §9). */
      bus: (tenant: string) => ServerEventBus;
    },
  ) {
    this.idleMs = options.idleMs ?? MODERN_HANDLER_IDLE_MS;
    // A handler holds its bus and its per-request bookkeeping: one a tenant no longer uses goes.
    this.sweeper = setInterval(() => void this.sweepIdle(), Math.min(60_000, Math.max(1_000, this.idleMs / 2)));
    this.sweeper.unref();
  }

  /** How many tenants have a handler on this replica. */
  get size(): number {
    return this.tenants.size;
  }

  /** Serves one request (express already parsed and screened its body) as `tenant`. */
  readonly serve: NodeMcpRequestHandler = (req, res, parsedBody) => {
    const tenant = req.auth?.extra?.["tenant"];
    if (typeof tenant !== "string") throw new ChaosError("unauthenticated", "a 2026-07-28 request without a verified identity");
    const entry = this.for(tenant);
    entry.inflight += 1;
    entry.lastUsed = Date.now();
    let ended = false;
    // 'close' comes once the answer is written or the client went away, whichever is first.
    res.on("close", () => {
      if (ended) return;
      ended = true;
      entry.inflight -= 1;
      entry.lastUsed = Date.now();
    });
    return entry.serve(req, eventStreamsFlushed(res), parsedBody === undefined ? undefined : new ParsedBody(parsedBody));
  };

  /**
   * Closes the handlers of tenants with no request in flight and none for the idle time, as of
   * `now`; a later request of that tenant makes a new one. Answers how many were closed.
   */
  sweepIdle(now = Date.now()): number {
    const idle = [...this.tenants].filter(([, t]) => t.inflight === 0 && now - t.lastUsed >= this.idleMs);
    for (const [tenant, t] of idle) {
      this.tenants.delete(tenant);
      t.handler.close().catch((err: unknown) => this.deps.logger.warn({ err, tenant }, "closing an idle 2026-07-28 handler failed"));
    }
    return idle.length;
  }

  private for(tenant: string): TenantHandler {
    let entry = this.tenants.get(tenant);
    if (entry) return entry;
    const onerror = (err: Error) => this.deps.logger.debug({ err, tenant }, "2026-07-28 request refused or failed");
    // The tenant's own registry upstream tools, read before its first request here is answered
    // (docs/federation.md §12); waited for at most 2 s, once.
    let ready: Promise<void> | undefined = this.deps.upstreams?.refreshTenant?.(tenant);
    const handler = createMcpHandler(factoryFor(this.deps, tenant), {
      legacy: "reject",
      maxRequestBodySize: this.options.maxBodyBytes,
      bus: this.options.bus(tenant),
      onerror,
    });
    const serve = toNodeHandler(
      {
        fetch: async (request, options) => {
          if (ready) {
            await Promise.race([ready, new Promise<void>((r) => setTimeout(r, 2_000).unref())]);
            ready = undefined;
          }
          // The adapter would serialize the parsed body again for nothing (ParsedBody).
          const parsedBody = options?.parsedBody instanceof ParsedBody ? options.parsedBody.value : options?.parsedBody;
          return endsWithClient(request, await handler.fetch(request, { ...options, parsedBody }));
        },
      },
      { maxRequestBodySize: this.options.maxBodyBytes, onerror },
    );
    entry = { handler, serve, inflight: 0, lastUsed: Date.now() };
    this.tenants.set(tenant, entry);
    return entry;
  }

  /** Ends every request in flight and forgets the handlers. */
  async closeAll(): Promise<void> {
    clearInterval(this.sweeper);
    const all = [...this.tenants.values()];
    this.tenants.clear();
    await Promise.all(all.map((t) => t.handler.close().catch((err: unknown) => this.deps.logger.warn({ err }, "closing a 2026-07-28 handler failed"))));
  }
}
