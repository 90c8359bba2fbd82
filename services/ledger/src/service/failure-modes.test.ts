/**
 * The ledger fails closed: with Redis or Postgres unreachable, authorization and gate calls
 * fail with `unavailable` and nothing is authorized; after recovery nothing committed is lost,
 * the receipt that could not be checked is still usable, and the chain verifies.
 */
import { createServer } from "node:net";
import type { JsonObject } from "@bufbuild/protobuf";
import { createPostgresDb, type Db } from "@chaos-core/kit";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../../test/support/postgres.js";
import { createRedisNonceCache } from "../adapters/nonce-cache.js";
import { verifyStoredLedger } from "../log/verify.js";
import { allEvents, as, failure, requestAndIssue, type FixtureToolCall } from "../test-support/flows.js";
import { createLedgerFixture, type LedgerFixture } from "../test-support/ledger-fixture.js";
import { startTcpProxy, type TcpProxy } from "../test-support/tcp-proxy.js";

const POLICIES = {
  defaults: { tool_approval: { version: "tp-1", tools: { "reports.delete": { risk: "high", resources: ["bucket:reports"] } } } },
};
const DELETE: FixtureToolCall = { tool: "reports.delete", resource: "bucket:reports", arguments: { report_id: "q3" } };
const AGENT = "agent@acme";
const APPROVER = "approver@acme";


/** A port nothing listens on: bound and released. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe("Redis down", () => {
  let fx: LedgerFixture;
  beforeAll(async () => {
    fx = await createLedgerFixture({ name: "chaoscore_ledger_redis_down", policies: POLICIES });
  });
  afterAll(async () => {
    await fx?.close();
  });

  for (const how of ["a Redis that is not there (closed port)", "a Redis client that was closed"] as const) {
    it(`Authorize fails with unavailable on ${how}; nothing is authorized and the receipt stays usable`, async () => {
      const tenant = how.startsWith("a Redis that") ? "redis-gone" : "redis-closed";
      const { receipt } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
      let dead: Redis;
      if (how.startsWith("a Redis that")) {
        dead = new Redis(`redis://127.0.0.1:${await closedPort()}`, { maxRetriesPerRequest: 1, lazyConnect: true });
        dead.on("error", () => undefined);
      } else {
        dead = new Redis(fx.redis!.options);
        await dead.quit();
      }
      const broken = await fx.restart({ nonces: createRedisNonceCache(dead, { prefix: fx.redisPrefix }) });
      try {
        const before = (await broken.client.listEntries({}, as(tenant, AGENT))).size;
        const err = await failure(broken.client.authorize({ call: DELETE, receipt }, as(tenant, AGENT)));
        expect(err.code).toBe("unavailable");
        expect(err.message).toMatch(/^nonce store \(Redis\) unavailable, authorization refused: /);
        // Nothing was decided, so nothing was recorded, and the nonce was not consumed.
        expect((await broken.client.listEntries({}, as(tenant, AGENT))).size).toBe(before);
      } finally {
        await broken.close();
        dead.disconnect();
      }
      const ok = await fx.client.authorize({ call: DELETE, receipt }, as(tenant, AGENT));
      expect(ok.code).toBe("AUTHORIZED");
      const authorized = (await allEvents(fx.client, as(tenant, AGENT))).filter((e) => e.authorized === true);
      expect(authorized).toHaveLength(1);
    });
  }
});

describe("Postgres down", () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let db: Db;
  let fx: LedgerFixture;
  let admin: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase("chaoscore_ledger_pg_down");
    const url = new URL(database.url);
    proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
    url.port = String(proxy.port);
    db = createPostgresDb({ connectionString: url.toString(), applicationName: "chaos-core-ledger-test" });
    fx = await createLedgerFixture({ database, db, policies: POLICIES });
    admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
  });
  afterAll(async () => {
    await fx?.close();
    await db?.close();
    await proxy?.close();
    await admin?.end();
    await database?.drop();
  });

  it("authorization and gate calls fail closed with unavailable; after recovery nothing committed is lost and the chain verifies", async () => {
    const tenant = "pg-down";
    const ctx = as(tenant, AGENT);
    const first = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
    expect((await fx.client.authorize({ call: DELETE, receipt: first.receipt }, ctx)).code).toBe("AUTHORIZED");
    expect((await fx.client.evaluateSpendGate({ policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 100, confidence: 0.9 } }, ctx)).state).toBe("LOCKED");
    const hitl = await fx.client.evaluateSpendGate({ policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } }, ctx);
    expect(hitl.state).toBe("HITL_REQUIRED");
    const second = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
    const before = await fx.client.listEntries({ limit: 1000 }, ctx);
    expect(before.size).toBe(7n);

    await proxy.down();
    const calls: [string, () => Promise<unknown>][] = [
      ["Authorize (valid receipt)", () => fx.client.authorize({ call: DELETE, receipt: second.receipt }, ctx)],
      ["Authorize (no receipt: even a denial needs the ledger)", () => fx.client.authorize({ call: DELETE }, ctx)],
      ["EvaluateSpendGate", () => fx.client.evaluateSpendGate({ policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 100, confidence: 0.9 } }, ctx)],
      ["ApproveSpend", () => fx.client.approveSpend({ requestSeq: hitl.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER))],
      ["RequestAuthorization", () => fx.client.requestAuthorization({ tool: "place_equity_order", arguments: { symbol: "AAPL", side: "BUY", quantity: 1, notional: 100 } }, ctx)],
      ["EvaluateToolApproval", () => fx.client.evaluateToolApproval({ call: DELETE }, ctx)],
      ["Append", () => fx.client.append({ event: { type: "test.note" } }, ctx)],
    ];
    for (const [name, call] of calls) {
      const err = await failure(call());
      expect(err.code, name).toBe("unavailable");
    }
    // The failed authorization gave its fast-path claim back.
    expect(await fx.redis!.exists(`${fx.redisPrefix}{${tenant}}:nonce:${second.receipt.nonce as string}`)).toBe(0);

    await proxy.up();
    const after = await fx.client.authorize({ call: DELETE, receipt: second.receipt as JsonObject }, ctx);
    expect(after.code).toBe("AUTHORIZED");
    const approved = await fx.client.approveSpend({ requestSeq: hitl.ledgerSeq, approvedVia: "approver_role" }, as(tenant, APPROVER));
    expect(approved.state).toBe("LOCKED");

    const now = await fx.client.listEntries({ limit: 1000 }, ctx);
    expect(now.size).toBe(9n);
    // Everything committed before the outage is there, unchanged.
    expect(now.entries.slice(0, 7).map((e) => e.sig)).toEqual(before.entries.map((e) => e.sig));
    expect(now.entries.filter((e) => e.event?.authorized === true)).toHaveLength(2);
    const chain = await fx.client.verifyChain({}, ctx);
    expect(chain).toMatchObject({ ok: true, entries: 9n, firstBadSeq: 0n, problem: "" });
    const report = await verifyStoredLedger(fx.core.store, tenant, fx.core.store.verifierKey(tenant));
    expect(report).toMatchObject({ ok: true, entries: 9, verifiedSize: 9 });
    const spent = await admin.query("SELECT committed FROM ledger.spend_days WHERE tenant_id = $1 AND policy_name = 'equity'", [tenant]);
    expect(Number((spent.rows[0] as { committed: number }).committed)).toBe(400);
  });
});
