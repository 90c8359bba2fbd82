import { randomUUID } from "node:crypto";
import { toNodeHandler, type NodeMcpRequestHandler } from "@modelcontextprotocol/node";
import { WebStandardStreamableHTTPServerTransport, type InitializeRequest, type McpServer, type ServerEvent } from "@modelcontextprotocol/server";
import { ChaosError } from "@chaos-core/kit";
import { fileKeyWithdrawn, type WatchedApiKeys } from "../auth/api-keys.js";
import type { CredentialRefusal } from "../auth/directory.js";
import type { Identity } from "../auth/identity.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import type { EdgeSession } from "../sessions/server-scope.js";
import type { EdgeEvents } from "../events/feeds.js";
import { announceToolsChanged, createChaosCoreServer } from "../server/create-server.js";
import { sessionRecordFromInitialize } from "../sessions/initialize.js";
import { REGISTRY_KEY_MARK, registryKeyDigest, type SessionRecord } from "../sessions/session-store.js";
import { endsSessions, type RegistrySessions } from "./credential-watch.js";
import { endsWithClient, eventStreamsFlushed, ParsedBody } from "./node-adapter.js";
import { replayInitialize } from "./sdk-internals.js";
import { deliverRelayed, relayedThrough, relayElsewhere } from "./session-relay.js";

/** One MCP session this replica holds in memory: its server and its transport. */
export interface LocalSession {
  readonly session: EdgeSession;
  readonly server: McpServer;
  readonly transport: WebStandardStreamableHTTPServerTransport;
  /**
   * Serves one HTTP request of this session: the SDK's Node adapter (`toNodeHandler`) in front of
   * the web-standard transport. The request's `auth` (set by authentication) reaches the tools as
   * `ctx.http.authInfo`; `parsedBody` is the body express already parsed and screened.
   */
  readonly serve: NodeMcpRequestHandler;
  /** The SHA-256 of the API key that opened it (see {@link SessionRecord.keySha256}). */
  readonly keySha256: string | undefined;
  /** Whether an OAuth access token opened it (see {@link SessionRecord.oauth}). */
  readonly oauth: boolean;
  lastUsed: number;
  /**
   * GET requests of this session open here now: while one is, this replica holds the session's
   * standalone stream and sends it the tenant's change events (docs/protocol.md §8, last point).
   */
  getStreams: number;
}

/**
 * The `retry:` an SSE stream's priming event tells the client to wait before it reconnects, in
 * ms (SEP-1699, docs/protocol.md §10).
 */
export const SSE_RETRY_MS = 2_000;

/** What a session was opened by: its owner and, with API keys, the SHA-256 of the key used. */
type Opener = Pick<SessionRecord, "tenant" | "principal" | "keySha256" | "oauth">;

/** What {@link HttpSessionTable} judges revocation by, of a session held here. */
function openerOf(local: LocalSession): Opener {
  return { ...local.session, keySha256: local.keySha256, ...(local.oauth ? { oauth: true as const } : {}) };
}

/** The credential a session is opened with: an API key (by its SHA-256), an OAuth token, or none (loopback). */
export type OpenedWith = { readonly keySha256?: string; readonly oauth?: true };


/** How often deletes the store could not take are tried again. */
const RETRY_DELETE_MS = 1_000;

/** The store could not be reached (Redis down): the one failure a session can ride out locally. */
function isUnavailable(err: unknown): boolean {
  return err instanceof ChaosError && err.code === "unavailable";
}

/**
 * The MCP sessions this replica serves over HTTP. The session store is the source of truth:
 * every request is checked against it (so a DELETE on another replica ends the session here
 * too), and a session this replica does not hold is rehydrated from it. The table is a cache
 * of live SDK objects, nothing more.
 *
 * While the store cannot be reached (docs/operations.md, "Redis outage"), a session this replica
 * holds keeps being served from that cache, a session it does not hold and a new one are refused
 * (`unavailable`, which the transport answers with 503), and a session a client ends here is
 * deleted from the store once it answers again.
 */
export class HttpSessionTable implements RegistrySessions {
  private readonly live = new Map<string, LocalSession>();
  private readonly rehydrating = new Map<string, Promise<LocalSession>>();
  /** Sessions ended here while the store was out of reach: id → tenant, until the store has deleted them. */
  private readonly endedOffline = new Map<string, string>();
  private retrying: NodeJS.Timeout | undefined;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly deps: EdgeDeps,
    private readonly options: {
      maxBodyBytes: number;
      maxSessionsPerKey: number;
      sweepIntervalMs?: number;
      /** The API keys file in force, when it can change while serving. */
      keys?: Pick<WatchedApiKeys, "identityOfDigest" | "holdsIdentity" | "unreadable">;
      /**
       * Why a key of the tenant registry (by SHA-256) is refused now, if it is: a session it opened
       * ends once it is revoked or expired, whichever key its next request carries.
       */
      registryKeyRefusal?: (tenant: string, sha256: string) => Promise<CredentialRefusal | undefined>;
      /** The SSE event store of each session and the tenants' change-event buses. */
      events: EdgeEvents;
    },
  ) {
    options.events.relay?.onMessage((relayed) => void deliverRelayed(this.live.get(relayed.sessionId), relayed, this.deps.logger));
    const interval = options.sweepIntervalMs ?? Math.min(60_000, (deps.sessions.ttlSeconds * 1000) / 2);
    this.sweeper = setInterval(() => void this.sweep(), interval);
    this.sweeper.unref();
  }

  /** How many sessions this replica holds in memory. */
  get size(): number {
    return this.live.size;
  }

  /**
   * Serves an initialize request on a new session. The record is stored before the SDK sees
   * the request, so its answer never names a session another replica cannot find; when the
   * SDK refuses the initialize, record and objects are dropped again. An identity already
   * holding `maxSessionsPerKey` live sessions is refused (`resource_exhausted`). `openedWith`
   * says by what: a session opened with an API key lives as long as that key is in force.
   */
  async initialize(
    identity: Identity,
    openedWith: OpenedWith,
    params: InitializeRequest["params"],
    serve: (local: LocalSession) => Promise<void>,
  ): Promise<void> {
    const session: EdgeSession = { id: randomUUID(), tenant: identity.tenant, principal: identity.principal };
    const record = sessionRecordFromInitialize(session, "http", params);
    const { keySha256, oauth } = openedWith;
    await this.deps.sessions.create({ ...record, ...(keySha256 ? { keySha256 } : {}), ...(oauth ? { oauth } : {}) }, {
      maxPerPrincipal: this.options.maxSessionsPerKey,
    });
    const local = await this.connect(session, openedWith, () => {
      this.live.set(session.id, local);
      this.deps.logger.info({ tenant: session.tenant, principal: session.principal, session: session.id }, "session opened");
    });
    try {
      await serve(local);
    } finally {
      if (local.transport.sessionId === undefined) {
        await this.deps.sessions.delete(session.tenant, session.id);
        await this.close(local);
      }
    }
  }

  /**
   * The local session for a request that carries `id`, rehydrated when another replica opened
   * it. Undefined (answer 404) when the id is unknown, expired, ended, or belongs to another
   * tenant or principal: the caller cannot tell these apart. Any key of the session's tenant and
   * principal may use it (roles travel per request), but once the key that opened it is no longer
   * in force the session is ended here, whichever key the request carries. `presented`: the
   * request's own key, as {@link SessionRecord.keySha256} writes it (already checked).
   */
  async resolve(identity: Identity, id: string, presented?: string): Promise<LocalSession | undefined> {
    if (this.endedOffline.has(id)) return undefined;
    const owns = (s: EdgeSession) => s.tenant === identity.tenant && s.principal === identity.principal;
    let record: SessionRecord | undefined;
    try {
      record = await this.deps.sessions.touch(identity.tenant, id);
    } catch (err) {
      // The store is out of reach: a session this replica holds is served from its copy (a
      // DELETE made meanwhile on another replica is seen once the store answers again).
      const held = this.live.get(id);
      if (!isUnavailable(err) || !held || !owns(held.session)) throw err;
      if (this.revoked(openerOf(held)) || (await this.registryRevoked(openerOf(held), presented))) {
        await this.endRevoked(held.session, held);
        return undefined;
      }
      held.lastUsed = Date.now();
      return held;
    }
    const local = this.live.get(id);
    if (!record || record.principal !== identity.principal) {
      // Ended elsewhere or expired: drop this replica's copy too. Another caller's miss must not.
      if (!record && local && owns(local.session)) await this.close(local);
      return undefined;
    }
    if (this.revoked(record) || (await this.registryRevoked(record, presented))) {
      await this.endRevoked(record, local && owns(local.session) ? local : undefined);
      return undefined;
    }
    if (local) {
      if (!owns(local.session)) return undefined;
      local.lastUsed = Date.now();
      // The tools log at the level this request's record gives, without reading it again.
      local.session.levelSeen = { logLevel: record.logLevel };
      return local;
    }
    let pending = this.rehydrating.get(id);
    if (!pending) {
      pending = this.rehydrate(record).finally(() => this.rehydrating.delete(id));
      this.rehydrating.set(id, pending);
    }
    return pending;
  }

  /**
   * Ends every session this replica holds whose opening API key is no longer in force (see
   * {@link revoked}): the objects here, open streams included, and the record.
   */
  async closeRevoked(): Promise<void> {
    for (const local of [...this.live.values()]) {
      if (this.revoked(openerOf(local))) await this.endRevoked(local.session, local);
    }
  }

  /**
   * Whether the key a session was opened with is gone from the keys in force, or now names
   * another tenant or principal. While the file cannot be read nothing counts as revoked:
   * authentication refuses every request meanwhile, and which keys remain is unknown. A record
   * written before records kept their key's hash is judged by its tenant and principal.
   */
  private revoked(opener: Opener): boolean {
    const keys = this.options.keys;
    // A registry key's revocation is the registry's: see registryRevoked and endOpenedBy.
    if (!keys || keys.unreadable() || opener.oauth || registryKeyDigest(opener.keySha256) !== undefined) return false;
    if (opener.keySha256 === undefined) return !keys.holdsIdentity(opener.tenant, opener.principal);
    return fileKeyWithdrawn(keys, opener.keySha256, opener);
  }

  /**
   * Whether the registry key a session was opened with is revoked or expired (or its tenant
   * deleted, which revokes it). The key the request
   * presents was checked by authentication a moment ago: only another one is asked about.
   */
  private async registryRevoked(opener: Opener, presented: string | undefined): Promise<boolean> {
    const refusal = this.options.registryKeyRefusal;
    const digest = registryKeyDigest(opener.keySha256);
    if (!refusal || digest === undefined || opener.keySha256 === presented) return false;
    return endsSessions(await refusal(opener.tenant, digest));
  }

  /** The tenant and registry key (SHA-256) of every session held here that such a key opened. */
  *registryOpeners(): Iterable<{ tenant: string; sha256: string }> {
    for (const local of this.live.values()) {
      const sha256 = registryKeyDigest(local.keySha256);
      if (sha256 !== undefined) yield { tenant: local.session.tenant, sha256 };
    }
  }

  /**
   * Ends every session held here that the registry key `sha256` opened, now revoked or expired:
   * the objects, open streams included, and the record — what {@link closeRevoked} does for a key
   * of the file (the credential watch calls it).
   */
  async endOpenedBy(sha256: string): Promise<void> {
    const opener = `${REGISTRY_KEY_MARK}${sha256}`;
    for (const local of [...this.live.values()]) {
      if (local.keySha256 === opener) await this.endRevoked(local.session, local);
    }
  }

  /** Ends a session whose opening key was revoked: the copy here, if any, and the record. */
  private async endRevoked(opener: Opener & { id: string }, local: LocalSession | undefined): Promise<void> {
    const { tenant, principal, id } = opener;
    if (local) await this.close(local);
    const session: EdgeSession = { id, tenant, principal };
    await this.deps.sessions.delete(tenant, id).catch((err: unknown) => {
      if (!isUnavailable(err)) throw err;
      this.deleteLater(session);
    });
    this.deps.logger.info({ tenant, principal, session: id }, "session closed: its API key was revoked");
  }

  /** Closes every session this replica holds; their records stay for the other replicas. */
  async closeAll(): Promise<void> {
    clearInterval(this.sweeper);
    clearInterval(this.retrying);
    await Promise.all([...this.live.values()].map((l) => this.close(l)));
  }

  private async rehydrate(record: SessionRecord): Promise<LocalSession> {
    const session: EdgeSession = { id: record.id, tenant: record.tenant, principal: record.principal, levelSeen: { logLevel: record.logLevel } };
    const local = await this.connect(session, { ...(record.keySha256 ? { keySha256: record.keySha256 } : {}), ...(record.oauth ? { oauth: record.oauth } : {}) });
    try {
      await replayInitialize(local.server, local.transport, record);
    } catch (err) {
      await this.close(local);
      throw err;
    }
    this.live.set(session.id, local);
    this.deps.logger.info({ tenant: session.tenant, principal: session.principal, session: session.id }, "session rehydrated");
    return local;
  }

  private async connect(
    session: EdgeSession,
    openedWith: OpenedWith,
    onInitialized?: () => void,
  ): Promise<LocalSession> {
    // The tenant's own registry upstream tools, read before its session's tool list is made (§12);
    // never waited for past 2 s (a slow cognition: they join the session when read, as list_changed).
    const reading = this.deps.upstreams?.refreshTenant?.(session.tenant);
    if (reading) await Promise.race([reading, new Promise<void>((r) => setTimeout(r, 2_000).unref())]);
    const server = createChaosCoreServer(this.deps, session);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => session.id,
      maxRequestBodySize: this.options.maxBodyBytes,
      // Resumable streams (SEP-1699): each POST stream opens with a priming event and `retry:`, and
      // a client that reconnects with Last-Event-ID is replayed what followed, on any replica.
      eventStore: this.options.events.eventStore(session.tenant, session.id),
      retryInterval: SSE_RETRY_MS,
      ...(onInitialized ? { onsessioninitialized: onInitialized } : {}),
      onsessionclosed: async () => {
        try {
          await this.deps.sessions.delete(session.tenant, session.id);
        } catch (err) {
          if (!isUnavailable(err)) throw err;
          this.deleteLater(session);
          return;
        }
        this.deps.logger.info({ tenant: session.tenant, session: session.id }, "session ended by the client");
      },
    });
    const onerror = (err: Error) =>
      this.deps.logger.warn({ err, tenant: session.tenant, session: session.id }, "serving an MCP request failed");
    const handle = toNodeHandler(
      {
        fetch: async (request, options) => {
          const parsedBody = options?.parsedBody instanceof ParsedBody ? options.parsedBody.value : options?.parsedBody;
          return endsWithClient(request, await transport.handleRequest(request, { ...options, parsedBody }));
        },
      },
      { maxRequestBodySize: this.options.maxBodyBytes, onerror },
    );
    const serve: NodeMcpRequestHandler = (req, res, parsedBody) => {
      if (req.method === "GET") {
        local.getStreams += 1;
        res.on("close", () => (local.getStreams -= 1));
      }
      return handle(req, eventStreamsFlushed(res), parsedBody === undefined ? undefined : new ParsedBody(parsedBody));
    };
    const local: LocalSession = {
      session,
      server,
      transport,
      serve,
      keySha256: openedWith.keySha256,
      oauth: openedWith.oauth === true,
      lastUsed: Date.now(),
      getStreams: 0,
    };
    const unsubscribe = this.options.events.buses.bus(session.tenant).subscribe((event) => void this.notify(local, event));
    transport.onclose = () => {
      unsubscribe();
      if (this.live.get(session.id) === local) this.live.delete(session.id);
    };
    server.server.onerror = (err) =>
      this.deps.logger.debug({ err, tenant: session.tenant, session: session.id }, "MCP protocol error");
    await server.connect(transport);
    if (this.options.events.relay) relayedThrough(transport, session, this.options.events.relay);
    return local;
  }

  /**
   * Whether `body`, posted to the session `local` here, belongs to another replica
   * ({@link relayElsewhere}); such a message is passed there and the caller answers 202.
   */
  relayElsewhere(local: LocalSession, body: unknown, protocolVersion: string | undefined): Promise<boolean> {
    return relayElsewhere(this.options.events.relay, local, body, protocolVersion, this.deps.logger);
  }

  /**
   * Sends one of the tenant's change events to the session's GET stream, when this replica holds
   * it (the replica holding it sends, so a client hears each event once): `resources/updated` only
   * for a URI the session subscribed to (the record says, whichever replica took the subscribe).
   */
  private async notify(local: LocalSession, event: ServerEvent): Promise<void> {
    if (local.getStreams === 0) return;
    const { tenant, id } = local.session;
    try {
      switch (event.kind) {
        case "resource_updated": {
          const record = await this.deps.sessions.get(tenant, id);
          if (record?.subscriptions?.includes(event.uri)) await local.server.server.sendResourceUpdated({ uri: event.uri });
          return;
        }
        case "resources_list_changed":
          return local.server.sendResourceListChanged();
        case "tools_list_changed":
          return announceToolsChanged(local.server);
        case "prompts_list_changed":
          return local.server.sendPromptListChanged();
      }
    } catch (err) {
      // The stream went away meanwhile, or the store is out of reach: a change hint is lost, no more.
      this.deps.logger.debug({ err, tenant, session: id, event: event.kind }, "sending a change event to a session failed");
    }
  }

  private async close(local: LocalSession): Promise<void> {
    if (this.live.get(local.session.id) === local) this.live.delete(local.session.id);
    await local.server.close().catch((err: unknown) => this.deps.logger.warn({ err }, "closing a session failed"));
  }

  /**
   * Ends a session here at once and in the store as soon as it answers: until then this replica
   * refuses the id, and other replicas holding it keep serving it (the outage trade-off).
   */
  private deleteLater(session: EdgeSession): void {
    this.endedOffline.set(session.id, session.tenant);
    this.deps.logger.warn(
      { tenant: session.tenant, session: session.id },
      "session ended by the client while the session store is unavailable; its record is deleted when the store is back",
    );
    this.retrying ??= setInterval(() => void this.retryDeletes(), RETRY_DELETE_MS);
    this.retrying.unref();
  }

  private async retryDeletes(): Promise<void> {
    for (const [id, tenant] of [...this.endedOffline]) {
      try {
        await this.deps.sessions.delete(tenant, id);
      } catch (err) {
        if (isUnavailable(err)) return;
        this.deps.logger.warn({ err, session: id }, "deleting an ended session failed");
      }
      this.endedOffline.delete(id);
    }
    clearInterval(this.retrying);
    this.retrying = undefined;
  }

  /** Drops local copies of sessions that went idle past the TTL or no longer exist in the store. */
  private async sweep(): Promise<void> {
    const idleMs = this.deps.sessions.ttlSeconds * 1000;
    for (const local of [...this.live.values()]) {
      try {
        const stale =
          Date.now() - local.lastUsed > idleMs ||
          !(await this.deps.sessions.get(local.session.tenant, local.session.id));
        if (stale) await this.close(local);
      } catch (err) {
        // An unreachable store is logged once by its client; the copy stays until the store answers.
        if (!isUnavailable(err)) this.deps.logger.warn({ err, session: local.session.id }, "session sweep failed");
      }
    }
  }
}
