import { createHash, randomBytes } from "node:crypto";

/** How long a one-time sign-in link can be used. */
export const SIGN_IN_LINK_TTL_SECONDS = 120;

/** Most links live at once; past it the oldest is dropped (only the operator issues them). */
const MAX_LIVE_LINKS = 100;

/** A link as issued: the token goes into the URL the operator opens, and nowhere else. */
export interface IssuedSignInLink {
  /** 32 random bytes, base64url: the `t` of `/approvals/sign-in/link?t=…`. */
  readonly token: string;
  readonly tenant: string;
  readonly expiresAt: Date;
}

/**
 * One-time sign-in links for the standalone operator (docs/approvals.md §2, "Sign-in"): issued
 * by the admin endpoint (`chaos-core approvals console`), consumed by the console, shared
 * in-process by the one standalone process. A token is kept only as its SHA-256, bound to one
 * tenant, good for {@link SIGN_IN_LINK_TTL_SECONDS} and for one sign-in.
 */
export interface SignInLinks {
  /** A new link for `tenant` (a tenant id the caller checked). */
  issue(tenant: string): IssuedSignInLink;
  /**
   * The tenant of a live link, without using it: the GET shows a button, so a link scanner or
   * a preview that fetches the URL cannot burn it.
   */
  peek(token: string): { readonly tenant: string; readonly expiresAt: Date } | undefined;
  /** Uses the link (once): its tenant, or undefined when it is unknown, used or expired. */
  consume(token: string): { readonly tenant: string } | undefined;
}

/** Options of {@link createSignInLinks}. */
export interface SignInLinksOptions {
  /** The clock, in milliseconds since the epoch (tests move it). */
  readonly now?: () => number;
}

const TOKEN = /^[A-Za-z0-9_-]{43}$/;
const digest = (token: string) => createHash("sha256").update(token, "utf8").digest("hex");

/** The in-process link store standalone shares between its admin endpoint and its console. */
export function createSignInLinks(options: SignInLinksOptions = {}): SignInLinks {
  const now = options.now ?? Date.now;
  const links = new Map<string, { tenant: string; expiresAt: number }>();
  const live = (token: string) => {
    if (!TOKEN.test(token)) return undefined;
    const key = digest(token);
    const link = links.get(key);
    if (!link) return undefined;
    if (now() >= link.expiresAt) {
      links.delete(key);
      return undefined;
    }
    return { key, link };
  };
  return {
    issue(tenant) {
      const at = now();
      for (const [k, l] of links) if (at >= l.expiresAt) links.delete(k);
      while (links.size >= MAX_LIVE_LINKS) links.delete(links.keys().next().value!);
      const token = randomBytes(32).toString("base64url");
      const expiresAt = at + SIGN_IN_LINK_TTL_SECONDS * 1000;
      links.set(digest(token), { tenant, expiresAt });
      return { token, tenant, expiresAt: new Date(expiresAt) };
    },
    peek(token) {
      const found = live(token);
      return found && { tenant: found.link.tenant, expiresAt: new Date(found.link.expiresAt) };
    },
    consume(token) {
      const found = live(token);
      if (!found) return undefined;
      // Deleted before anything else can read it: a second request with the same token finds nothing.
      links.delete(found.key);
      return { tenant: found.link.tenant };
    },
  };
}
