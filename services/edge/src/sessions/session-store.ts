import type { LoggingLevel } from "@modelcontextprotocol/server";
import { ChaosError } from "@chaos-core/kit";

/** How a session record's `keySha256` marks a key of the tenant registry (`registry:<sha256>`). */
export const REGISTRY_KEY_MARK = "registry:";

/** The registry key's SHA-256 a marked `keySha256` names, or undefined for any other credential's. */
export function registryKeyDigest(keySha256: string | undefined): string | undefined {
  return keySha256?.startsWith(REGISTRY_KEY_MARK) ? keySha256.slice(REGISTRY_KEY_MARK.length) : undefined;
}

/** Which transport a session arrived on; kept for operators, never used to branch tool code. */
export type SessionTransport = "stdio" | "http";

/**
 * What the edge remembers about one MCP session, so that any replica can serve it. Holds no
 * credential: the tenant and principal are the ones the credential resolved to at initialize.
 */
export interface SessionRecord {
  readonly id: string;
  readonly tenant: string;
  readonly principal: string;
  readonly transport: SessionTransport;
  /** The protocol revision negotiated at initialize. */
  readonly protocolVersion: string;
  /** The client's `clientInfo` from initialize (name, version, ...). */
  readonly clientInfo: { readonly name: string; readonly version: string; readonly [k: string]: unknown };
  /** The client's capabilities from initialize. */
  readonly clientCapabilities: Readonly<Record<string, unknown>>;
  /** ISO 8601 timestamps. */
  readonly createdAt: string;
  readonly lastSeenAt: string;
  /** The minimum level of log notifications the client asked for with `logging/setLevel`. */
  readonly logLevel?: LoggingLevel;
  /**
   * The SHA-256 of the API key that opened the session, as the API keys file stores it (never
   * the key): the session ends, on every replica, once that key is no longer in force. A key of
   * the tenant registry is `registry:<sha256>` ({@link REGISTRY_KEY_MARK}): the file's edits do
   * not concern it; its revocation or expiry in the registry ends the session the same way
   * (transport/credential-watch.ts).
   */
  readonly keySha256?: string;
  /**
   * Set when an OAuth access token opened the session: no API key's revocation ends it. Every
   * request still carries a token that is verified then, naming the session's tenant and principal.
   */
  readonly oauth?: true;
  /**
   * The URIs the client subscribed to with `resources/subscribe` (2025-11-25), in no order: any
   * replica holding the session's GET stream sends `notifications/resources/updated` for them.
   */
  readonly subscriptions?: readonly string[];
}

/** Most URIs one session may subscribe to; `resources/subscribe` beyond it is refused. */
export const MAX_SUBSCRIPTIONS_PER_SESSION = 100;

/** The longest URI a session may subscribe to. */
export const MAX_SUBSCRIPTION_URI_LENGTH = 2048;

/** What a transport knows when a session starts; the store stamps the times. */
export type NewSessionRecord = Omit<SessionRecord, "createdAt" | "lastSeenAt" | "subscriptions">;

/** The fields of a session that may change after initialize. */
export interface SessionPatch {
  readonly logLevel?: LoggingLevel;
  /** Adds a URI to {@link SessionRecord.subscriptions}. */
  readonly subscribe?: string;
  /** Removes a URI from {@link SessionRecord.subscriptions} (no error when it is not there). */
  readonly unsubscribe?: string;
}

/** Limits a new session must fit in, checked in the same atomic step that stores it. */
export interface SessionLimits {
  /**
   * Most live sessions one tenant and principal (the identity an API key resolves to) may hold;
   * a session beyond it is refused with `resource_exhausted`.
   */
  readonly maxPerPrincipal?: number;
}

/**
 * Session metadata shared by every edge replica. Every key is scoped by tenant: a lookup with
 * another tenant's credential cannot reach the record, so it answers "unknown" like any
 * unknown id. Records expire when idle for the store's TTL; {@link SessionStore.touch} renews it.
 */
export interface SessionStore {
  /** Seconds a session may stay idle before it expires. */
  readonly ttlSeconds: number;
  /** Stores a new session; refuses it (`resource_exhausted`, see {@link sessionLimitReached}) beyond `limits`. */
  create(record: NewSessionRecord, limits?: SessionLimits): Promise<SessionRecord>;
  /** Reads a live record without renewing it. */
  get(tenant: string, id: string): Promise<SessionRecord | undefined>;
  /** Reads a live record, stamps `lastSeenAt` and renews its TTL. */
  touch(tenant: string, id: string): Promise<SessionRecord | undefined>;
  /** Applies a patch to a live record; undefined when there is none. */
  update(tenant: string, id: string, patch: SessionPatch): Promise<SessionRecord | undefined>;
  /** Deletes a record; false when there was none. */
  delete(tenant: string, id: string): Promise<boolean>;
  /** The tenant's live sessions, oldest first. */
  listByTenant(tenant: string): Promise<SessionRecord[]>;
  /** Resolves when the backing store answers (readiness). */
  ping(): Promise<void>;
}

/** The idle TTL when none is configured: an hour, as MCP clients keep sessions open for long. */
export const DEFAULT_SESSION_TTL_SECONDS = 3600;

/** The refusal of a session beyond {@link SessionLimits.maxPerPrincipal}; both stores answer it. */
export function sessionLimitReached(record: Pick<NewSessionRecord, "tenant" | "principal">, max: number): ChaosError {
  return new ChaosError(
    "resource_exhausted",
    `principal ${record.principal} of tenant ${record.tenant} already holds ${max} open MCP sessions, the most one API key may ` +
      "hold (CHAOS_CORE_MAX_SESSIONS_PER_KEY): end one (HTTP DELETE with its Mcp-Session-Id) or wait until an idle one expires",
  );
}
