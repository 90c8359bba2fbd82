/**
 * Authorization through LedgerService on real Postgres and Redis: single use under concurrency
 * and across a restart of every process, and each denial code the check chain can give, each
 * one in the ledger before the caller sees it.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { ChaosError, type CallContext } from "@chaos-core/kit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createKeyring, generateSigningKey } from "../keys/keyring.js";
import { verifyStoredLedger } from "../log/verify.js";
import { createLedgerFixture, type LedgerFixture } from "../test-support/ledger-fixture.js";
import { allEvents, as, eventAt, requestAndIssue, type FixtureToolCall } from "../test-support/flows.js";

const TOOL_POLICY = {
  version: "tp-1",
  tools: {
    "docs.search": { risk: "medium", resources: ["index:handbook"], host_bound_fields: ["index_name"] },
    "reports.delete": { risk: "high", resources: ["bucket:reports"] },
  },
  host_context: { index_name: "handbook-prod" },
};
const POLICIES = { defaults: { tool_approval: TOOL_POLICY } };

const DELETE: FixtureToolCall = { tool: "reports.delete", resource: "bucket:reports", arguments: { report_id: "q3-2025", hard: false } };
const SEARCH: FixtureToolCall = { tool: "docs.search", resource: "index:handbook", arguments: { query: "expense policy" } };

const AGENT = "agent@acme";
const APPROVER = "approver@acme";

let tenantCounter = 0;
/** Each test has its own tenant, so its ledger holds only what the test wrote. */
const newTenant = (): string => `authz${++tenantCounter}`;

let fx: LedgerFixture;
let admin: pg.Client;

beforeAll(async () => {
  fx = await createLedgerFixture({ name: "chaoscore_ledger_authz", policies: POLICIES });
  admin = new pg.Client({ connectionString: fx.database.url });
  await admin.connect();
});

afterAll(async () => {
  await admin?.end();
  await fx?.close();
});

/** Authorizes `call` with `receipt` as the agent and returns the response and the recorded event. */
async function authorize(f: LedgerFixture, tenant: string, call: FixtureToolCall, receipt?: JsonObject) {
  const res = await f.client.authorize({ call, ...(receipt ? { receipt } : {}) }, as(tenant, AGENT));
  // Read back through the service at the sequence the response names: the decision is there.
  const event = await eventAt(f.client, as(tenant, AGENT), res.ledgerSeq);
  return { res, event };
}

async function nonceRows(tenant: string, nonce: string): Promise<number> {
  const r = await admin.query("SELECT count(*)::int AS n FROM ledger.nonces WHERE tenant_id = $1 AND nonce = $2", [tenant, nonce]);
  return (r.rows[0] as { n: number }).n;
}

describe("Authorize: a receipt is used once", () => {
  it("64 concurrent Authorize calls of one receipt: one AUTHORIZED, 63 replayed_receipt, 64 ledger entries; a restart with an empty Redis still refuses it", async () => {
    const tenant = newTenant();
    const { receipt } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
    const nonce = receipt.nonce as string;

    const results = await Promise.all(Array.from({ length: 64 }, () => fx.client.authorize({ call: DELETE, receipt }, as(tenant, AGENT))));
    expect(results.filter((r) => r.authorized)).toHaveLength(1);
    expect(results.filter((r) => r.code === "AUTHORIZED")).toHaveLength(1);
    expect(results.filter((r) => r.code === "replayed_receipt")).toHaveLength(63);
    // Every call has its own entry.
    expect(new Set(results.map((r) => r.ledgerSeq)).size).toBe(64);

    const decided = (await allEvents(fx.client, as(tenant, AGENT))).filter((e) => e.type === "authorization.decided" && e.receipt_nonce === nonce);
    expect(decided).toHaveLength(64);
    expect(decided.filter((e) => e.authorized === true && e.code === "AUTHORIZED")).toHaveLength(1);
    expect(decided.filter((e) => e.authorized === false && e.code === "replayed_receipt")).toHaveLength(63);
    expect(await nonceRows(tenant, nonce)).toBe(1);

    // Restart every process: new Db pool, store, core and nonce cache on the same Postgres,
    // with the Redis keys gone, so only Postgres remembers the nonce.
    const flushedBefore = await fx.redis!.exists(`${fx.redisPrefix}{${tenant}}:nonce:${nonce}`);
    expect(flushedBefore).toBe(1);
    const restarted = await fx.restart({ flushNonceCache: true });
    try {
      expect(await restarted.redis!.exists(`${fx.redisPrefix}{${tenant}}:nonce:${nonce}`)).toBe(0);
      const again = await authorize(restarted, tenant, DELETE, receipt);
      expect(again.res.authorized).toBe(false);
      expect(again.res.code).toBe("replayed_receipt");
      // Decided by the Postgres row, not the (empty) fast path.
      expect(again.event).toMatchObject({ type: "authorization.decided", code: "replayed_receipt", authorized: false, receipt_nonce: nonce });
      expect(again.event?.fast_path).toBeUndefined();
      // The nonce Postgres holds is claimed in Redis again, so the next replay is refused there.
      expect(await restarted.redis!.exists(`${fx.redisPrefix}{${tenant}}:nonce:${nonce}`)).toBe(1);
      const third = await authorize(restarted, tenant, DELETE, receipt);
      expect(third.res.code).toBe("replayed_receipt");
      expect(third.event?.fast_path).toBe(true);

      const chain = await restarted.client.verifyChain({}, as(tenant, AGENT));
      expect(chain.ok).toBe(true);
      expect(chain.entries).toBe(2n + 64n + 2n);
    } finally {
      await restarted.close();
    }
  });
});

describe("Authorize: each denial has its code and is recorded before the response", () => {
  it("changed arguments → changed_arguments; the receipt still authorizes the approved call afterwards", async () => {
    const tenant = newTenant();
    const { receipt, argsHash } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
    const changed = await authorize(fx, tenant, DELETE, receipt);
    expect(changed.res.authorized).toBe(true);

    const { receipt: second } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
    const hard = { ...DELETE, arguments: { ...DELETE.arguments, hard: true } };
    const denied = await authorize(fx, tenant, hard, second);
    expect(denied.res).toMatchObject({ authorized: false, code: "changed_arguments", step: "arguments" });
    expect(denied.res.argsHash).not.toBe(argsHash);
    expect(denied.event).toMatchObject({ type: "authorization.decided", code: "changed_arguments", authorized: false, args_hash: denied.res.argsHash });
    // A wrong call does not consume the receipt.
    const right = await authorize(fx, tenant, DELETE, second);
    expect(right.res.code).toBe("AUTHORIZED");
  });

  it("expiry → expired_receipt, and the nonce is burned: a clock moved back still refuses it", async () => {
    const tenant = newTenant();
    let clock = new Date("2031-03-01T12:00:00.000Z");
    const timed = await fx.restart({ now: () => clock });
    try {
      const { receipt } = await requestAndIssue(timed.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE, ttlSeconds: 60 });
      expect(receipt.expiry).toBe("2031-03-01T12:01:00.000Z");

      clock = new Date("2031-03-01T12:01:00.000Z");
      const expired = await authorize(timed, tenant, DELETE, receipt);
      expect(expired.res).toMatchObject({ authorized: false, code: "expired_receipt", step: "expiry" });
      expect(expired.event).toMatchObject({ code: "expired_receipt", authorized: false });
      expect(await nonceRows(tenant, receipt.nonce as string)).toBe(1);

      // Set the clock back inside the window: the receipt is still spent.
      clock = new Date("2031-03-01T12:00:10.000Z");
      const back = await authorize(timed, tenant, DELETE, receipt);
      expect(back.res).toMatchObject({ authorized: false, code: "replayed_receipt" });
      // Also with Redis forgotten: the Postgres row decides.
      const forgetful = await timed.restart({ flushNonceCache: true, now: () => clock });
      try {
        const again = await authorize(forgetful, tenant, DELETE, receipt);
        expect(again.res).toMatchObject({ authorized: false, code: "replayed_receipt" });
        expect(again.event?.fast_path).toBeUndefined();
      } finally {
        await forgetful.close();
      }
    } finally {
      await timed.close();
    }
  });

  it("tampered signature → bad_signature (a receipt whose expiry was pushed out)", async () => {
    const tenant = newTenant();
    const { receipt } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
    const tampered = { ...receipt, expiry: new Date(Date.parse(receipt.expiry as string) + 3_600_000).toISOString() };
    const res = await authorize(fx, tenant, DELETE, tampered);
    expect(res.res).toMatchObject({ authorized: false, code: "bad_signature", step: "signature" });
    expect(res.event).toMatchObject({ code: "bad_signature", authorized: false, receipt_kid: receipt.kid });
    // Nothing from an unverified receipt is trusted into the record.
    expect(res.event?.receipt_nonce).toBeNull();
    // The genuine receipt is untouched.
    expect((await authorize(fx, tenant, DELETE, receipt)).res.code).toBe("AUTHORIZED");
  });

  it("a receipt of tenant A presented by tenant B → tenant_mismatch", async () => {
    const a = newTenant();
    const b = newTenant();
    const { receipt } = await requestAndIssue(fx.client, { tenant: a, requester: AGENT, approver: APPROVER, call: DELETE });
    const res = await authorize(fx, b, DELETE, receipt);
    expect(res.res).toMatchObject({ authorized: false, code: "tenant_mismatch", step: "binding" });
    expect(res.event).toMatchObject({ code: "tenant_mismatch" });
    // Recorded in B's ledger (the caller's), and A's receipt stays usable by A.
    expect((await authorize(fx, a, DELETE, receipt)).res.code).toBe("AUTHORIZED");
  });

  it("a model value for a host-bound field → host_bound_override, even with a valid receipt", async () => {
    const tenant = newTenant();
    const { receipt } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: SEARCH });
    const override = { ...SEARCH, arguments: { ...SEARCH.arguments, index_name: "payroll-prod" } };
    const res = await authorize(fx, tenant, override, receipt);
    expect(res.res).toMatchObject({ authorized: false, code: "host_bound_override", step: "inspection" });
    expect(res.event).toMatchObject({ code: "host_bound_override", tool: "docs.search" });
    // The same value the host has is not an override; the receipt covers the merged arguments.
    const same = { ...SEARCH, arguments: { ...SEARCH.arguments, index_name: "handbook-prod" } };
    expect((await authorize(fx, tenant, same, receipt)).res.code).toBe("AUTHORIZED");
  });

  it("the operator's policy changed after the receipt was issued → policy_version_mismatch", async () => {
    const tenant = newTenant();
    const { receipt } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
    expect(receipt.policy_version).toBe("tp-1");
    const changed = await fx.restart({ policies: { defaults: { tool_approval: { ...TOOL_POLICY, version: "tp-2" } } } });
    try {
      const res = await authorize(changed, tenant, DELETE, receipt);
      expect(res.res).toMatchObject({ authorized: false, code: "policy_version_mismatch", step: "policy_version" });
      expect(res.event).toMatchObject({ code: "policy_version_mismatch", policy_version: "tp-2" });
    } finally {
      await changed.close();
    }
  });

  it("a human's deny → human_denied", async () => {
    const tenant = newTenant();
    const { receipt } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE, decision: "deny" });
    expect(receipt.decision).toBe("deny");
    const res = await authorize(fx, tenant, DELETE, receipt);
    expect(res.res).toMatchObject({ authorized: false, code: "human_denied", step: "decision" });
    expect(res.event).toMatchObject({ code: "human_denied", receipt_actor: APPROVER });
  });

  it("the requester approving its own request → refused self_approval, and the refusal is recorded", async () => {
    const tenant = newTenant();
    const evaluated = await fx.client.evaluateToolApproval({ call: DELETE }, as(tenant, AGENT));
    expect(evaluated).toMatchObject({ status: "RECEIPT_REQUIRED", code: "allowlist_is_not_authorization" });
    const err = await fx.client
      .issueReceipt({ call: DELETE, decision: "allow", approvedVia: "approver_role", requestSeq: evaluated.ledgerSeq }, as(tenant, AGENT))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ChaosError);
    expect((err as ChaosError).code).toBe("permission_denied");
    expect((err as ChaosError).message).toMatch(/^self_approval: /);
    const events = await allEvents(fx.client, as(tenant, AGENT));
    expect(events.at(-1)).toMatchObject({ type: "receipt.refused", code: "self_approval", requester: AGENT, request_seq: Number(evaluated.ledgerSeq) });
    expect(events.filter((e) => e.type === "receipt.issued")).toHaveLength(0);
  });

  it("an elicitation answer from another session than the request's → refused wrong_session, and recorded", async () => {
    const tenant = newTenant();
    // Medium risk: the client's own form may answer it (below high risk, by default).
    const evaluated = await fx.client.evaluateToolApproval({ call: SEARCH }, as(tenant, AGENT, "sess-a"));
    const err = await fx.client
      .issueReceipt({ call: SEARCH, decision: "allow", approvedVia: "elicitation", requestSeq: evaluated.ledgerSeq }, as(tenant, AGENT, "sess-b"))
      .catch((e: unknown) => e);
    expect((err as ChaosError).code).toBe("permission_denied");
    expect((err as ChaosError).message).toMatch(/^wrong_session: /);
    expect((await allEvents(fx.client, as(tenant, AGENT))).at(-1)).toMatchObject({ type: "receipt.refused", code: "wrong_session" });
    // From the requesting session, the person at the client may answer.
    const ok = await fx.client.issueReceipt(
      { call: SEARCH, decision: "allow", approvedVia: "elicitation", requestSeq: evaluated.ledgerSeq },
      as(tenant, AGENT, "sess-a"),
    );
    expect(ok.receipt?.actor).toBe(`elicitation:${AGENT}`);
    expect((await allEvents(fx.client, as(tenant, AGENT))).at(-1)).toMatchObject({
      type: "receipt.issued",
      channel: "client_elicitation",
      channels_rule: "approvalChannels.byRisk.medium",
    });
  });

  it("a request made without a session is labelled request:<ref>; only the requester's own request answers it by elicitation, else not_requester, recorded", async () => {
    const tenant = newTenant();
    const ref = (requestRef: string, principal = AGENT): { ctx: CallContext } => ({ ctx: { tenant, principal, requestRef } });
    const entry = async (seq: bigint) => (await fx.client.listEntries({ afterSeq: seq - 1n, limit: 1 }, as(tenant, AGENT))).entries[0]!;
    const evaluated = await fx.client.evaluateToolApproval({ call: SEARCH }, ref("AAECAwQFBgcICQoLDA0ODw"));
    expect(evaluated.status).toBe("RECEIPT_REQUIRED");
    expect((await entry(evaluated.ledgerSeq)).session).toBe("request:AAECAwQFBgcICQoLDA0ODw");
    const issue = (opts: { ctx: CallContext }) =>
      fx.client.issueReceipt({ call: SEARCH, decision: "allow", approvedVia: "elicitation", requestSeq: evaluated.ledgerSeq }, opts).catch((e: unknown) => e as ChaosError);
    for (const opts of [ref("BBECAwQFBgcICQoLDA0ODw", APPROVER), as(tenant, AGENT, "sess-a"), as(tenant, AGENT)]) {
      const err = (await issue(opts)) as ChaosError;
      expect(err.code).toBe("permission_denied");
      expect(err.message).toMatch(/^not_requester: it was made without a session/);
      const refused = (await fx.client.listEntries({ afterSeq: 0n, limit: 1000 }, as(tenant, AGENT))).entries.at(-1)!;
      expect(refused.event).toMatchObject({ type: "receipt.refused", code: "not_requester", requester: AGENT });
      expect(refused.session).toBe(opts.ctx.sessionId ?? (opts.ctx.requestRef ? `request:${opts.ctx.requestRef}` : ""));
    }
    const ok = await issue(ref("BBECAwQFBgcICQoLDA0ODw"));
    expect(ok).not.toBeInstanceOf(Error);
    expect((ok as { receipt?: JsonObject }).receipt?.actor).toBe(`elicitation:${AGENT}`);
    expect((await entry((ok as { ledgerSeq: bigint }).ledgerSeq)).session).toBe("request:BBECAwQFBgcICQoLDA0ODw");

    // A session's request stays with its session: the same principal's request without it is wrong_session.
    const inSession = await fx.client.evaluateToolApproval({ call: SEARCH }, as(tenant, AGENT, "sess-a"));
    const err = await fx.client
      .issueReceipt({ call: SEARCH, decision: "allow", approvedVia: "elicitation", requestSeq: inSession.ledgerSeq }, ref("CCECAwQFBgcICQoLDA0ODw"))
      .catch((e: unknown) => e as ChaosError);
    expect((err as ChaosError).message).toMatch(/^wrong_session: /);
  });

  it("at high risk the requesting client's own form answer → refused channel_not_allowed and recorded, allow or deny; with the operator's opt-in it is issued", async () => {
    const tenant = newTenant();
    const evaluated = await fx.client.evaluateToolApproval({ call: DELETE }, as(tenant, AGENT, "sess-a"));
    for (const decision of ["allow", "deny"]) {
      const err = await fx.client
        .issueReceipt({ call: DELETE, decision, approvedVia: "elicitation", requestSeq: evaluated.ledgerSeq }, as(tenant, AGENT, "sess-a"))
        .catch((e: unknown) => e);
      expect((err as ChaosError).code).toBe("permission_denied");
      expect((err as ChaosError).message).toMatch(
        /^channel_not_allowed: policy allows approver, operator, console for a receipt for reports\.delete at risk high, by rule approvalChannels\.byRisk\.high, not client_elicitation/,
      );
      expect((await allEvents(fx.client, as(tenant, AGENT))).at(-1)).toMatchObject({
        type: "receipt.refused",
        code: "channel_not_allowed",
        channel: "client_elicitation",
        allowed: ["approver", "operator", "console"],
        channels_rule: "approvalChannels.byRisk.high",
        request_seq: Number(evaluated.ledgerSeq),
        requester: AGENT,
      });
    }
    // An approver's own key answers it.
    const byApprover = await fx.client.issueReceipt(
      { call: DELETE, decision: "allow", approvedVia: "approver_role", requestSeq: evaluated.ledgerSeq },
      as(tenant, APPROVER),
    );
    expect(byApprover.receipt?.actor).toBe(APPROVER);

    await fx.putPolicy(tenant, { approvalChannels: { byRisk: { high: ["client_elicitation", "approver"] } } });
    const optedIn = await fx.client.issueReceipt(
      { call: DELETE, decision: "allow", approvedVia: "elicitation", requestSeq: evaluated.ledgerSeq },
      as(tenant, AGENT, "sess-a"),
    );
    expect(optedIn.receipt).toMatchObject({ actor: `elicitation:${AGENT}`, risk: "high" });
    expect((await allEvents(fx.client, as(tenant, AGENT))).at(-1)).toMatchObject({ type: "receipt.issued", channel: "client_elicitation" });
  });

  it("a receipt signed by a key rotated out of the keyring → unknown_key", async () => {
    const tenant = newTenant();
    const { receipt } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
    expect(receipt.kid).toBe(fx.keyring.active.kid);
    const rotated = await fx.restart({ keyring: createKeyring(generateSigningKey()) });
    try {
      expect(rotated.keyring.verificationKey(receipt.kid as string)).toBeUndefined();
      const res = await authorize(rotated, tenant, DELETE, receipt);
      expect(res.res).toMatchObject({ authorized: false, code: "unknown_key", step: "signature" });
      expect(res.event).toMatchObject({ code: "unknown_key", receipt_kid: receipt.kid });
    } finally {
      await rotated.close();
    }
    // A keyring that still lists the old key (verify only) accepts it.
    const withOld = await fx.restart({
      keyring: createKeyring(generateSigningKey(), new Map([[fx.keyring.active.kid, fx.keyring.active.publicKey]])),
    });
    try {
      expect((await authorize(withOld, tenant, DELETE, receipt)).res.code).toBe("AUTHORIZED");
    } finally {
      await withOld.close();
    }
  });

  it("no receipt → allowlist_is_not_authorization", async () => {
    const tenant = newTenant();
    const res = await authorize(fx, tenant, DELETE);
    expect(res.res).toMatchObject({ authorized: false, code: "allowlist_is_not_authorization", step: "receipt" });
    expect(res.event).toMatchObject({ type: "authorization.decided", code: "allowlist_is_not_authorization", authorized: false });
  });

  it("every decision is committed by the time the response arrives, and the log verifies with the public key", async () => {
    const tenant = newTenant();
    const { receipt } = await requestAndIssue(fx.client, { tenant, requester: AGENT, approver: APPROVER, call: DELETE });
    const denied = await fx.client.authorize({ call: DELETE }, as(tenant, AGENT));
    // Another connection sees the committed row at once.
    const row = await admin.query("SELECT event::text AS event FROM ledger.entries WHERE tenant_id = $1 AND seq = $2", [tenant, denied.ledgerSeq.toString()]);
    expect(row.rows[0]?.event).toContain('"allowlist_is_not_authorization"');
    const ok = await fx.client.authorize({ call: DELETE, receipt }, as(tenant, AGENT));
    expect(ok.code).toBe("AUTHORIZED");
    const report = await verifyStoredLedger(fx.core.store, tenant, fx.core.store.verifierKey(tenant));
    expect(report).toMatchObject({ ok: true, entries: 4 });
  });
});

describe("tenant isolation", () => {
  it("tenant B cannot list, prove or approve tenant A's entries", async () => {
    const a = newTenant();
    const b = newTenant();
    const request = await fx.client.evaluateSpendGate(
      { policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } },
      as(a, AGENT),
    );
    expect(request.state).toBe("HITL_REQUIRED");
    await requestAndIssue(fx.client, { tenant: a, requester: AGENT, approver: APPROVER, call: DELETE });

    const listed = await fx.client.listEntries({}, as(b, AGENT));
    expect(listed.entries).toHaveLength(0);
    expect(listed.size).toBe(0n);
    const newest = await fx.client.listEntries({ newestFirst: true }, as(b, AGENT));
    expect(newest.entries).toHaveLength(0);
    expect((await fx.client.getCheckpoint({}, as(b, AGENT))).checkpoint).toBeUndefined();

    const proof = await fx.client.getInclusionProof({ seq: request.ledgerSeq }, as(b, AGENT)).catch((e: unknown) => e);
    expect((proof as ChaosError).code).toBe("not_found");
    const approve = await fx.client.approveSpend({ requestSeq: request.ledgerSeq, approvedVia: "approver_role" }, as(b, APPROVER)).catch((e: unknown) => e);
    expect((approve as ChaosError).code).toBe("not_found");
    const issue = await fx.client
      .issueReceipt({ call: DELETE, decision: "allow", approvedVia: "approver_role", requestSeq: 2n }, as(b, APPROVER))
      .catch((e: unknown) => e);
    expect((issue as ChaosError).code).toBe("not_found");

    // B's own log holds only B's entries, and A's request is still waiting for A's approver.
    await fx.client.append({ event: { type: "test.note", n: 1 } }, as(b, AGENT));
    const mine = await fx.client.listEntries({}, as(b, AGENT));
    expect(mine.entries.map((e) => e.tenant)).toEqual([b]);
    const approved = await fx.client.approveSpend({ requestSeq: request.ledgerSeq, approvedVia: "approver_role" }, as(a, APPROVER));
    expect(approved.state).toBe("LOCKED");
  });
});
