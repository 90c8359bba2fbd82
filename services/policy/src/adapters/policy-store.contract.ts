import { ChaosError } from "@chaos-core/kit";
import { expect, it } from "vitest";
import { defaultPolicyDocument, validatePolicyDocument, type PolicyDocumentJson } from "../domain/policy-document.js";
import type { PolicySnapshot, PolicyStore } from "../domain/policy-store.js";

/** One store under test, opened fresh for each contract case. */
export interface StoreUnderTest {
  readonly store: PolicyStore;
  /** A tenant the store serves that has stored nothing yet. */
  readonly tenant: string;
  /** A second tenant: for a store that serves many, one that stored nothing; else one it refuses. */
  readonly otherTenant: string;
  close(): Promise<void>;
}

/** How long a change may take to show up through `watch` (polls and file events). */
export const CHANGE_TIMEOUT_MS = 5_000;

/** Resolves with `promise`, or fails naming `what` when it takes longer than `ms`. */
export async function within<T>(promise: Promise<T>, what: string, ms = CHANGE_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The error a promise rejects with; fails when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<ChaosError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    return err as ChaosError;
  }
  throw new Error("expected the call to fail");
}

function policy(fields: Record<string, unknown>): PolicyDocumentJson {
  return validatePolicyDocument(fields, "test");
}

const DENY_SHELL = policy({ deniedCapabilities: ["shell.exec"] });
const ALLOW_MEMORY = policy({ allowedCapabilities: ["memory.read"], riskRules: { denyAtOrAbove: "critical" } });
const HOSTS = policy({ httpAllowedDomains: ["api.example.com"], requireConfirmationFor: ["http.request"] });

/**
 * The semantics every {@link PolicyStore} shares (SQL on Postgres and PGlite, the standalone
 * file). Call inside a `describe`; `open` runs once per case.
 */
export function policyStoreContract(
  open: () => Promise<StoreUnderTest>,
  options: { tenants: "many" | "one" },
): void {
  async function using(fn: (s: StoreUnderTest) => Promise<void>): Promise<void> {
    const subject = await open();
    try {
      await fn(subject);
    } finally {
      await subject.close();
    }
  }

  it("serves the safe default policy to a tenant that stored nothing", () =>
    using(async ({ store, tenant }) => {
      const snap = await store.get(tenant);
      expect(snap.document).toEqual(defaultPolicyDocument());
      expect(snap.version).toBeGreaterThanOrEqual(0);
      expect(snap.source).not.toBe("");
      expect(snap.lastError).toBeUndefined();
    }));

  it("gives each put the next version and serves the latest", () =>
    using(async ({ store, tenant }) => {
      const start = (await store.get(tenant)).version;
      const before = Date.now();
      expect(await store.put(tenant, DENY_SHELL)).toBe(start + 1);
      expect(await store.put(tenant, ALLOW_MEMORY)).toBe(start + 2);
      const snap = await store.get(tenant);
      expect(snap.version).toBe(start + 2);
      expect(snap.document).toEqual(ALLOW_MEMORY);
      // Database and test clocks may differ by a little; the stored time is "now", not a default.
      expect(snap.updatedAt.getTime()).toBeGreaterThan(before - 60_000);
    }));

  it("refuses a put with a stale expectedVersion and keeps the policy as it was", () =>
    using(async ({ store, tenant }) => {
      const start = (await store.get(tenant)).version;
      expect(await store.put(tenant, DENY_SHELL, start)).toBe(start + 1);
      const err = await rejection(store.put(tenant, HOSTS, start));
      expect(err.code).toBe("conflict");
      expect(err.message).toContain(`version ${start + 1}, not ${start}`);
      const snap = await store.get(tenant);
      expect(snap.version).toBe(start + 1);
      expect(snap.document).toEqual(DENY_SHELL);
      expect(await store.put(tenant, HOSTS, start + 1)).toBe(start + 2);
    }));

  it("streams the current policy, then each new version, and ends on abort", () =>
    using(async ({ store, tenant }) => {
      const start = (await store.get(tenant)).version;
      const controller = new AbortController();
      const it = store.watch(tenant, controller.signal)[Symbol.asyncIterator]();
      const first = await within(it.next(), "the current snapshot");
      expect(first.done).toBe(false);
      expect((first.value as PolicySnapshot).version).toBe(start);

      const pending = it.next();
      await store.put(tenant, HOSTS);
      const second = await within(pending, "the new version");
      expect(second.value).toMatchObject({ version: start + 1, document: HOSTS });

      const third = it.next();
      controller.abort();
      expect((await within(third, "the stream to end")).done).toBe(true);
    }));

  if (options.tenants === "many") {
    it("keeps tenants apart", () =>
      using(async ({ store, tenant, otherTenant }) => {
        const otherStart = (await store.get(otherTenant)).version;
        await store.put(tenant, DENY_SHELL);
        await store.put(tenant, ALLOW_MEMORY);
        const other = await store.get(otherTenant);
        expect(other.document).toEqual(defaultPolicyDocument());
        expect(other.version).toBe(otherStart);
        expect(await store.put(otherTenant, HOSTS)).toBe(otherStart + 1);
        expect((await store.get(tenant)).document).toEqual(ALLOW_MEMORY);
      }));
  } else {
    it("refuses every tenant but its own, for reads, writes and watches", () =>
      using(async ({ store, tenant, otherTenant }) => {
        expect((await rejection(store.get(otherTenant))).code).toBe("permission_denied");
        expect((await rejection(store.put(otherTenant, HOSTS))).code).toBe("permission_denied");
        const watching = store.watch(otherTenant, new AbortController().signal)[Symbol.asyncIterator]().next();
        expect((await rejection(watching)).code).toBe("permission_denied");
        expect((await store.get(tenant)).document).toEqual(defaultPolicyDocument());
      }));
  }
}
