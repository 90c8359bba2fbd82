import type { Logger } from "@chaos-core/kit";
import { fileKeyWithdrawn, type WatchedApiKeys } from "../auth/api-keys.js";
import type { CredentialDirectory, CredentialRefusal, Recheck } from "../auth/directory.js";

/**
 * How often the credentials behind open `/mcp` requests are checked again: the bound on how long
 * an SSE stream outlives its registry key's revocation or expiry, or its tenant's disabling
 * (docs/tenants.md). Cheap while nothing changes: one read of each tenant's published generation.
 */
export const CREDENTIAL_RECHECK_MS = 1_000;

/** An open response: what ends it early. */
interface Closable {
  destroy(): void;
  once(event: "close", listener: () => void): unknown;
  readonly writableEnded: boolean;
  readonly destroyed: boolean;
}

/** What a held response was admitted with, besides its tenant and principal; each absent for any other credential. */
export interface HeldCredential {
  /** The SHA-256 of the registry key it presented. */
  readonly registryKey?: string | undefined;
  /** The SHA-256 of the keys file's key it presented. */
  readonly fileKey?: string | undefined;
  /** When the OAuth access token it presented is no longer accepted (`exp` and the clock skew, ms since the epoch). */
  readonly expiresAtMs?: number | undefined;
}

/** One `/mcp` request being answered (an SSE stream, until it ends), with the credential it was admitted with. */
interface Held extends HeldCredential {
  readonly res: Closable;
  readonly tenant: string;
  readonly principal: string;
}

/** What the watch needs of the sessions this replica holds (`HttpSessionTable`). */
export interface RegistrySessions {
  /** The tenant and registry key (SHA-256) of every session held here that such a key opened. */
  registryOpeners(): Iterable<{ readonly tenant: string; readonly sha256: string }>;
  /** Ends the sessions held here that the registry key `sha256` opened: their streams and records. */
  endOpenedBy(sha256: string): Promise<void>;
}

/**
 * Whether a registry key refused so ends the sessions it opened, as a keys file's revocation does:
 * revoked, expired, or its tenant deleted (whose keys are revoked with it). A disabled tenant's
 * sessions stay, to be served again once it is enabled.
 */
export function endsSessions(refusal: CredentialRefusal | undefined): boolean {
  return refusal?.kind === "key_revoked" || refusal?.kind === "key_expired" || refusal?.kind === "tenant_deleted";
}

/**
 * Ends what a revoked credential still holds open on this replica (docs/tenants.md, "Revocation
 * and disabling"). Authentication refuses a revoked registry key or a disabled tenant on its next
 * request; a response already being answered — a session's GET stream, a 2026-07-28
 * `subscriptions/listen` stream, a long POST's event stream — has no next request. So every
 * {@link CREDENTIAL_RECHECK_MS} the tenant of each open response and each registry key behind one
 * (or behind a session held here) is checked again through the directory: a tenant disabled or
 * deleted ends every response of it, whatever its credential; a key revoked or expired ends the
 * responses that presented it and, like a deleted tenant's keys, the sessions it opened (their
 * records too, so no replica serves them again — the keys file's rule). A session of a disabled
 * tenant stays: it is served again once the tenant is enabled. While the directory cannot answer, nothing is ended (every new
 * request is still refused, fail closed) and the next tick asks again. An OAuth access token past
 * its `exp` ends what it holds open on the same tick, without asking anyone (the sessions it
 * opened stay: their next request needs a token that is valid).
 */
export class CredentialWatch {
  private readonly held = new Set<Held>();
  private readonly timer: NodeJS.Timeout;
  private checking: Promise<void> | undefined;
  /** Tenants whose last check failed: said once in the log, not every tick. */
  private readonly failing = new Set<string>();

  constructor(
    private readonly directory: CredentialDirectory,
    private readonly sessions: RegistrySessions,
    private readonly logger: Logger,
    private readonly fileKeys?: Pick<WatchedApiKeys, "unreadable" | "identityOfDigest">,
    intervalMs = CREDENTIAL_RECHECK_MS,
  ) {
    this.timer = setInterval(() => void this.check(), intervalMs);
    this.timer.unref();
  }

  /** Watches `res`, admitted as `tenant`/`principal` with `credential`, until it ends. */
  hold(res: Closable, identity: { readonly tenant: string; readonly principal: string }, credential: HeldCredential = {}): void {
    if (res.writableEnded || res.destroyed) return;
    const held: Held = { ...credential, res, tenant: identity.tenant, principal: identity.principal };
    this.held.add(held);
    res.once("close", () => this.held.delete(held));
  }

  /** One pass over everything open; a pass still running is joined, not doubled. */
  check(): Promise<void> {
    this.checking ??= this.pass().finally(() => (this.checking = undefined));
    return this.checking;
  }

  /** Stops watching; what is open stays open. */
  close(): void {
    clearInterval(this.timer);
  }

  private async pass(): Promise<void> {
    // An access token past its expiry, a key gone from the keys file (or now naming someone else):
    // what it holds open ends, as its next request would be refused.
    const now = Date.now();
    for (const h of [...this.held]) {
      let why: string | undefined;
      if (h.expiresAtMs !== undefined && h.expiresAtMs <= now) why = "its access token has expired";
      else if (h.fileKey !== undefined && this.fileKeys && fileKeyWithdrawn(this.fileKeys, h.fileKey, h)) why = "its API key was removed from the keys file";
      if (!why) continue;
      this.held.delete(h);
      h.res.destroy();
      this.logger.info({ tenant: h.tenant, principal: h.principal }, `open MCP request or stream ended: ${why}`);
    }
    const byTenant = new Map<string, Set<string>>();
    const note = (tenant: string, sha256: string | undefined) => {
      let digests = byTenant.get(tenant);
      if (!digests) byTenant.set(tenant, (digests = new Set()));
      if (sha256 !== undefined) digests.add(sha256);
    };
    for (const h of this.held) note(h.tenant, h.registryKey);
    for (const o of this.sessions.registryOpeners()) note(o.tenant, o.sha256);
    await Promise.all([...byTenant].map(([tenant, digests]) => this.checkTenant(tenant, [...digests])));
  }

  private async checkTenant(tenant: string, digests: string[]): Promise<void> {
    let found: Recheck;
    try {
      found = await this.directory.recheck(tenant, digests);
    } catch (err) {
      if (!this.failing.has(tenant)) this.logger.warn({ err, tenant }, "the credentials behind open streams cannot be checked now; they are kept open until they can be");
      this.failing.add(tenant);
      return;
    }
    this.failing.delete(tenant);
    for (const [sha256, refusal] of found.keys) {
      if (!endsSessions(refusal)) continue;
      await this.sessions.endOpenedBy(sha256).catch((err: unknown) => this.logger.warn({ err, tenant }, "ending the sessions of a revoked API key failed"));
    }
    for (const h of [...this.held]) {
      if (h.tenant !== tenant) continue;
      const refusal = found.tenant ?? (h.registryKey !== undefined ? found.keys.get(h.registryKey) : undefined);
      if (!refusal) continue;
      this.held.delete(h);
      h.res.destroy();
      this.logger.info({ tenant, principal: h.principal, refusal: refusal.kind }, `open MCP request or stream ended: ${refusal.message}`);
    }
  }
}
