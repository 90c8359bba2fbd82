/**
 * ConsumeRequestState and RecordRequestStateRefusal through LedgerService: a sealed MCP
 * requestState is used once per tenant — under concurrency, across a restart with an empty
 * nonce cache, on real Postgres with the Redis or in-process cache and on PGlite (standalone's
 * embedded database) — and every consumption and refusal is an entry in the tenant's ledger.
 */
import { randomBytes } from "node:crypto";
import { createPostgresDb, type Db } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryNonceCache } from "../adapters/nonce-cache.js";
import { REQUEST_STATE_REFUSAL_REASONS } from "../authz/codes.js";
import { verifyStoredLedger } from "../log/verify.js";
import { allEvents, as, eventAt, failure } from "../test-support/flows.js";
import { openTempPglite } from "../test-support/temp-pglite.js";
import { createLedgerFixture, type FixtureNonces, type LedgerFixture } from "../test-support/ledger-fixture.js";

const AGENT = "agent@acme";
const T0 = Date.parse("2026-11-01T12:00:00.000Z");

let tenantCounter = 0;
const newTenant = () => `mrtr${++tenantCounter}-${randomBytes(2).toString("hex")}`;
const newJti = () => randomBytes(16).toString("base64url");
const FLOW = randomBytes(16).toString("base64url");

/** A state sealed now for ten minutes, as the edge would present it. */
const state = (jti = newJti()) => ({ jti, flow: FLOW, tool: "chaoscore_execute", expiresAtMs: BigInt(T0 + 600_000) });

interface Backend {
  readonly name: string;
  readonly nonces: Exclude<FixtureNonces, object>;
  /** A PGlite database in a temporary directory, or none (the fixture's own Postgres database). */
  open(): Promise<{ db?: Db; close(): Promise<void> }>;
}

const postgres = (): Promise<{ close(): Promise<void> }> => Promise.resolve({ close: () => Promise.resolve() });
const BACKENDS: Backend[] = [
  { name: "Postgres with the Redis cache", nonces: "redis", open: postgres },
  { name: "Postgres with the in-process cache", nonces: "memory", open: postgres },
  {
    name: "PGlite with the in-process cache",
    nonces: "memory",
    open: () => openTempPglite("chaoscore-mrtr-"),
  },
];

describe.each(BACKENDS)("ConsumeRequestState on $name", (backend) => {
  let fx: LedgerFixture;
  let db: Db | undefined;
  let closeBackend: () => Promise<void> = () => Promise.resolve();
  let now = T0;

  beforeAll(async () => {
    const opened = await backend.open();
    db = opened.db;
    closeBackend = opened.close;
    fx = await createLedgerFixture({ name: "chaoscore_ledger_mrtr", nonces: backend.nonces, now: () => new Date(now), ...(db ? { db } : {}) });
  }, 120_000);

  afterAll(async () => {
    await fx?.close();
    await closeBackend();
  });

  it("consumes a state once: the first call records mrtr.state_consumed, the second mrtr.state_refused already_consumed", async () => {
    const tenant = newTenant();
    const s = state();
    const first = await fx.client.consumeRequestState(s, as(tenant, AGENT));
    expect(first).toMatchObject({ consumed: true, code: "consumed" });
    expect(await eventAt(fx.client, as(tenant, AGENT), first.entrySeq)).toEqual({
      type: "mrtr.state_consumed",
      jti: s.jti,
      flow: FLOW,
      tool: "chaoscore_execute",
      expires_at: "2026-11-01T12:10:00.000Z",
    });
    const second = await fx.client.consumeRequestState(s, as(tenant, AGENT));
    expect(second).toMatchObject({ consumed: false, code: "already_consumed" });
    expect(second.entrySeq).toBeGreaterThan(first.entrySeq);
    expect(await eventAt(fx.client, as(tenant, AGENT), second.entrySeq)).toMatchObject({
      type: "mrtr.state_refused",
      reason: "already_consumed",
      jti: s.jti,
      fast_path: true,
    });
  });

  it("20 concurrent consumes of one jti: exactly one consumed, 19 refused, 20 entries", async () => {
    const tenant = newTenant();
    const s = state();
    const results = await Promise.all(Array.from({ length: 20 }, () => fx.client.consumeRequestState(s, as(tenant, AGENT))));
    expect(results.filter((r) => r.consumed)).toHaveLength(1);
    expect(results.filter((r) => !r.consumed && r.code === "already_consumed")).toHaveLength(19);
    expect(new Set(results.map((r) => r.entrySeq)).size).toBe(20);
    const events = (await allEvents(fx.client, as(tenant, AGENT))).filter((e) => e.jti === s.jti);
    expect(events.filter((e) => e.type === "mrtr.state_consumed")).toHaveLength(1);
    expect(events.filter((e) => e.type === "mrtr.state_refused" && e.reason === "already_consumed")).toHaveLength(19);
  });

  it("the database decides: after a restart with an empty nonce cache the state is still used", async () => {
    const tenant = newTenant();
    const s = state();
    expect((await fx.client.consumeRequestState(s, as(tenant, AGENT))).consumed).toBe(true);
    // Every process restarted, the cache empty (a fresh in-process one, or Redis flushed).
    const restarted = await fx.restart({ flushNonceCache: backend.nonces === "redis", ...(db ? { db } : {}) });
    try {
      const again = await restarted.client.consumeRequestState(s, as(tenant, AGENT));
      expect(again).toMatchObject({ consumed: false, code: "already_consumed" });
      // Refused by the row, not the cache: the entry says nothing of a fast path.
      const event = await eventAt(restarted.client, as(tenant, AGENT), again.entrySeq);
      expect(event).toMatchObject({ type: "mrtr.state_refused", reason: "already_consumed" });
      expect(event).not.toHaveProperty("fast_path");
      // And the cache learnt it: the next replay is refused before the database.
      const third = await restarted.client.consumeRequestState(s, as(tenant, AGENT));
      expect(await eventAt(restarted.client, as(tenant, AGENT), third.entrySeq)).toMatchObject({ fast_path: true });
    } finally {
      await restarted.close();
    }
  });

  it("is tenant-scoped: one jti is another state in another tenant, and each tenant's ledger holds only its own", async () => {
    const [a, b] = [newTenant(), newTenant()];
    const s = state();
    expect((await fx.client.consumeRequestState(s, as(a, AGENT))).consumed).toBe(true);
    expect((await fx.client.consumeRequestState(s, as(b, AGENT))).consumed).toBe(true);
    expect((await fx.client.consumeRequestState(s, as(a, AGENT))).consumed).toBe(false);
    expect((await allEvents(fx.client, as(b, AGENT))).map((e) => e.type)).toEqual(["mrtr.state_consumed"]);
  });

  it("refuses an expired state without consuming it", async () => {
    const tenant = newTenant();
    const s = { ...state(), expiresAtMs: BigInt(T0) };
    const r = await fx.client.consumeRequestState(s, as(tenant, AGENT));
    expect(r).toMatchObject({ consumed: false, code: "expired" });
    expect(await eventAt(fx.client, as(tenant, AGENT), r.entrySeq)).toMatchObject({ type: "mrtr.state_refused", reason: "expired", jti: s.jti });
    // Nothing was claimed: the same jti with time left (a clock the edge trusted more) is still unused.
    now = T0 - 1000;
    try {
      expect((await fx.client.consumeRequestState(s, as(tenant, AGENT))).consumed).toBe(true);
    } finally {
      now = T0;
    }
  });

  it("records the edge's refusals with their reason, and the chain verifies", async () => {
    const tenant = newTenant();
    const jti = newJti();
    const r = await fx.client.recordRequestStateRefusal({ reason: "principal", kid: "k1" }, as(tenant, AGENT));
    expect(await eventAt(fx.client, as(tenant, AGENT), r.entrySeq)).toEqual({ type: "mrtr.state_refused", reason: "principal", kid: "k1", jti: null, flow: null, tool: null });
    const d = await fx.client.recordRequestStateRefusal({ reason: "digest", kid: "k1", jti, flow: FLOW, tool: "approve_spend" }, as(tenant, AGENT));
    expect(await eventAt(fx.client, as(tenant, AGENT), d.entrySeq)).toEqual({ type: "mrtr.state_refused", reason: "digest", kid: "k1", jti, flow: FLOW, tool: "approve_spend" });
    expect(await verifyStoredLedger(fx.core.store, tenant, fx.core.keyring.active.publicKey, { tenant })).toMatchObject({ ok: true, entries: 2 });
  });
});

describe("ConsumeRequestState and RecordRequestStateRefusal refuse bad input", () => {
  let fx: LedgerFixture;
  beforeAll(async () => {
    fx = await createLedgerFixture({ name: "chaoscore_ledger_mrtr_input", nonces: "memory", now: () => new Date(T0) });
  });
  afterAll(async () => {
    await fx?.close();
  });

  it("names the field, and records nothing", async () => {
    const tenant = newTenant();
    const cases: Array<[Partial<ReturnType<typeof state>>, RegExp]> = [
      [{ jti: "short" }, /jti: must be base64url, 22 to 128 characters/],
      [{ jti: `${newJti()}:x` }, /jti: must be base64url/],
      [{ flow: "x" }, /flow: must be a requestRef/],
      [{ tool: "" }, /tool: must be 1 to 2048 characters/],
      [{ expiresAtMs: 0n }, /expires_at_ms: must be the state's expiry/],
      [{ expiresAtMs: BigInt(Number.MAX_SAFE_INTEGER) + 1n }, /expires_at_ms: out of range/],
    ];
    for (const [change, message] of cases) {
      const err = await failure(fx.client.consumeRequestState({ ...state(), ...change }, as(tenant, AGENT)));
      expect(err.code, message.source).toBe("invalid_argument");
      expect(err.message).toMatch(message);
    }
    for (const [req, message] of [
      [{ reason: "bogus" }, /reason: must be one of malformed, unknown_kid, tag, version, tenant, principal, expired, method, name, digest$/],
      // Only the ledger decides a replay.
      [{ reason: "already_consumed" }, /reason: must be one of/],
      [{ reason: "tag", kid: "a.b" }, /kid: must be/],
      [{ reason: "name", jti: "x" }, /jti: must be base64url/],
    ] as const) {
      const err = await failure(fx.client.recordRequestStateRefusal(req, as(tenant, AGENT)));
      expect(err.code).toBe("invalid_argument");
      expect(err.message).toMatch(message);
    }
    expect((await fx.client.listEntries({}, as(tenant, AGENT))).size).toBe(0n);
  });

  it("lists every refusal reason in GetInfo, each with who decides it", async () => {
    const info = (await fx.client.getInfo({}, as(newTenant(), AGENT))).info as { request_state_refusal_reasons: unknown };
    expect(info.request_state_refusal_reasons).toEqual(REQUEST_STATE_REFUSAL_REASONS.map((r) => ({ ...r })));
  });

  it("a ledger that cannot be written consumes nothing: unavailable, and the state stays usable", async () => {
    const tenant = newTenant();
    const s = state();
    const cache = createMemoryNonceCache();
    const dead = createPostgresDb({ connectionString: fx.database.url, applicationName: "chaos-core-ledger-test" });
    const broken = await fx.restart({ db: dead, nonces: cache });
    await dead.close();
    try {
      const err = await failure(broken.client.consumeRequestState(s, as(tenant, AGENT)));
      expect(err.code).toBe("unavailable");
    } finally {
      await broken.close();
    }
    // The same cache in front of a ledger that works: the claim was given back.
    const healthy = await fx.restart({ nonces: cache });
    try {
      expect((await healthy.client.consumeRequestState(s, as(tenant, AGENT))).consumed).toBe(true);
    } finally {
      await healthy.close();
    }
  });
});
