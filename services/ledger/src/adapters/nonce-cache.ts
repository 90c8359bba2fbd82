import { assertTenantId, ChaosError, tenantKeyPrefix } from "@chaos-core/kit";
import type { Redis } from "ioredis";

/**
 * The fast path in front of the nonce table: a receipt nonce seen before is refused without a
 * database round trip. It is only a cache — the unique row in `ledger.nonces`, written in the
 * same transaction as the ledger entry, decides. A cache that cannot answer fails the call
 * (`unavailable`): an authorization never proceeds on a guess.
 */
export interface NonceCache {
  /** True when this call claimed the nonce first; false when it was already claimed. */
  claim(tenant: string, nonce: string, ttlMs: number): Promise<boolean>;
  /** Undoes a claim whose database transaction did not commit, so the receipt stays usable. */
  release(tenant: string, nonce: string): Promise<void>;
}

/**
 * Nonces are base64url; anything else never reaches a key. A sealed requestState's jti is kept
 * under `mrtr:` (REQUEST_STATE_NONCE_PREFIX), which no receipt nonce can start with.
 */
const NONCE_RE = /^(?:mrtr:)?[A-Za-z0-9_-]{22,128}$/;

function assertNonce(nonce: string): void {
  if (!NONCE_RE.test(nonce)) throw new ChaosError("invalid_argument", "nonce: must be base64url (22 to 128 characters), a requestState's behind mrtr:");
}

/** Keys read `<prefix><tenant>:nonce:<nonce>`; `SET NX PX` makes the claim atomic on any replica. */
export function createRedisNonceCache(redis: Redis, options: { prefix?: string } = {}): NonceCache {
  const prefix = options.prefix ?? "chaoscore:";
  const keyOf = (tenant: string, nonce: string) => `${tenantKeyPrefix(prefix, tenant)}nonce:${nonce}`;
  const unavailable = (err: unknown) =>
    new ChaosError("unavailable", `nonce store (Redis) unavailable, authorization refused: ${(err as Error).message}`, {
      cause: err,
    });
  return {
    async claim(tenant, nonce, ttlMs) {
      assertTenantId(tenant);
      assertNonce(nonce);
      try {
        const res = await redis.set(keyOf(tenant, nonce), "1", "PX", Math.max(1000, Math.ceil(ttlMs)), "NX");
        return res === "OK";
      } catch (err) {
        throw unavailable(err);
      }
    },
    async release(tenant, nonce) {
      assertTenantId(tenant);
      assertNonce(nonce);
      try {
        await redis.del(keyOf(tenant, nonce));
      } catch (err) {
        throw unavailable(err);
      }
    },
  };
}

/** The in-process cache of a single standalone process; entries expire like Redis keys. */
export function createMemoryNonceCache(now: () => number = Date.now): NonceCache {
  const claimed = new Map<string, number>();
  return {
    claim(tenant, nonce, ttlMs) {
      assertTenantId(tenant);
      assertNonce(nonce);
      const key = `${tenant}\u0000${nonce}`;
      const t = now();
      const until = claimed.get(key);
      if (until !== undefined && until > t) return Promise.resolve(false);
      // Sweep lazily so a long-running process does not keep every nonce it ever saw.
      if (claimed.size > 10_000) for (const [k, u] of claimed) if (u <= t) claimed.delete(k);
      claimed.set(key, t + Math.max(1000, ttlMs));
      return Promise.resolve(true);
    },
    release(tenant, nonce) {
      claimed.delete(`${tenant}\u0000${nonce}`);
      return Promise.resolve();
    },
  };
}
