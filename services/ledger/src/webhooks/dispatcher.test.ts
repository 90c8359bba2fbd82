/**
 * Signed approval notifications end to end inside the ledger, on PGlite (standalone's embedded
 * database) and on real Postgres: the entries that ask for and answer an approval reach a real
 * local HTTP receiver, signed (checked with the `standardwebhooks` library, not our code), with
 * retries, without secrets in the body, and through a restart.
 */
import { randomBytes } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Db } from "@chaos-core/kit";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingLogger } from "../../../../test/support/logger.js";
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from "../../../../test/support/webhook-receiver.js";
import type { WebhookConfig } from "../config.js";
import { as } from "../test-support/flows.js";
import { openTempPglite } from "../test-support/temp-pglite.js";
import { createLedgerFixture, type LedgerFixture } from "../test-support/ledger-fixture.js";
import type { WebhookEvent } from "./events.js";
import { createWebhookOutbox, type WebhookOutbox } from "./outbox.js";

const AGENT = "agent@acme";
const ALICE = "alice";
const PUBLIC_URL = "https://chaos.example.com";
const key = randomBytes(32);
const SECRET = `whsec_${key.toString("base64")}`;

const wire = { beneficiary: "Globex Treasury Ltd", amount: 4200, currency: "USD", memo: "Q3 settlement, ref GX-5521", confidence: 0.9 };
const stepInput = { url: "https://internal.example.com/deploy", token: "tok-do-not-leak-9913" };

/** Cognition's pending outcome for a step, as its ledger audit sink appends it (executor.ts). */
function pendingStep(approvalId: string): JsonObject {
  return {
    type: "step.outcome",
    stepId: "s1",
    capability: "http.request",
    status: "pending_approval",
    ran: false,
    succeeded: false,
    argsHash: "a".repeat(64),
    approvalId,
    risk: "high",
    approvalExpiresAt: "2030-01-02T00:00:00.000Z",
    approvalChannels: ["approver", "operator", "console"],
  };
}

/** The body, verified as a Standard Webhooks receiver does it; throws on a bad signature. */
function verified(r: ReceivedWebhook): WebhookEvent {
  return new Webhook(SECRET).verify(r.body, r.headers) as WebhookEvent;
}

let tenantCounter = 0;
const newTenant = (what: string) => `wh-${what}-${++tenantCounter}-${randomBytes(2).toString("hex")}`;

/** The embedded database standalone runs on, or the fixture's own Postgres database. */
const BACKENDS: Array<{ name: string; open: () => Promise<{ db?: Db; close: () => Promise<void> }> }> = [
  {
    name: "PGlite",
    open: () => openTempPglite("chaoscore-webhooks-"),
  },
  { name: "Postgres", open: () => Promise.resolve({ close: () => Promise.resolve() }) },
];

describe.each(BACKENDS)("approval webhooks on $name", (backend) => {
  let receiver: WebhookReceiver;
  let fx: LedgerFixture;
  let db: Db | undefined;
  let closeBackend: () => Promise<void> = () => Promise.resolve();
  let outbox: WebhookOutbox;
  const log = recordingLogger();
  let config: WebhookConfig;
  /** Every secret-ish value the flows below handle, none of which may reach a body. */
  const secrets: string[] = [SECRET, key.toString("base64"), stepInput.token, stepInput.url, wire.beneficiary, wire.memo];

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    const opened = await backend.open();
    db = opened.db;
    closeBackend = opened.close;
    config = { url: receiver.url, keys: [key], timeoutMs: 1000, retrySeconds: [0.1, 0.1], publicUrl: PUBLIC_URL };
    fx = await createLedgerFixture({ name: "chaoscore_ledger_webhooks", nonces: "memory", webhooks: config, logger: log.logger, ...(db ? { db } : {}) });
    outbox = createWebhookOutbox(fx.db);
  }, 120_000);

  afterAll(async () => {
    await fx?.close();
    await receiver?.close();
    await closeBackend();
  });

  it("a step: the pending and the resolved event, signed, with the console link", async () => {
    const tenant = newTenant("step");
    const approvalId = "6f1c2a9e-3b7d-4c1a-9e2f-0a1b2c3d4e5f";
    const session = "mcp-session-step-7c1e";
    secrets.push(session);
    const pending = await fx.client.append({ event: pendingStep(approvalId) }, as(tenant, AGENT, session));
    const resolution = await fx.client.append(
      {
        event: {
          type: "approval.resolution",
          approvalId,
          capability: "http.request",
          argsHash: "a".repeat(64),
          approved: true,
          channel: "console",
          principal: ALICE,
          resolvedBy: `${ALICE} (console)`,
        },
      },
      as(tenant, ALICE, "console-session-1"),
    );
    const pendingId = `msg_${tenant}_${pending.entry!.seq}`;
    const resolvedId = `msg_${tenant}_${resolution.entry!.seq}`;
    await receiver.waitFor("the step's two events", () => receiver.byId(pendingId).length > 0 && receiver.byId(resolvedId).length > 0);

    const [p] = receiver.byId(pendingId);
    expect(p!.headers["content-type"]).toBe("application/json");
    expect(verified(p!)).toEqual({
      type: "approval.pending",
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      data: {
        tenant,
        kind: "step",
        approval_id: approvalId,
        ledger_seq: Number(pending.entry!.seq),
        capability: "http.request",
        risk: "high",
        requested_by: AGENT,
        expires_at: "2030-01-02T00:00:00.000Z",
        channels: ["approver", "operator", "console"],
        console_url: `${PUBLIC_URL}/approvals/step/${approvalId}`,
        args_hash: "a".repeat(64),
      },
    });
    expect(verified(receiver.byId(resolvedId)[0]!)).toMatchObject({
      type: "approval.resolved",
      data: { tenant, kind: "step", approval_id: approvalId, outcome: "approved", channel: "console", resolved_by: ALICE, console_url: `${PUBLIC_URL}/approvals/step/${approvalId}` },
    });
    // The receiver answers before the dispatcher marks the row delivered: wait for the mark.
    let rows = await outbox.list(tenant);
    for (let i = 0; i < 200 && rows.some((r) => !r.deliveredAt); i++) {
      await new Promise((r) => setTimeout(r, 20));
      rows = await outbox.list(tenant);
    }
    expect(rows.map((r) => [r.entrySeq, r.attempts, r.deliveredAt !== null, r.failedAt])).toEqual([
      [Number(pending.entry!.seq), 1, true, null],
      [Number(resolution.entry!.seq), 1, true, null],
    ]);
  });

  it("a spend and a wire: pending when held for a person, resolved when declined or approved", async () => {
    const tenant = newTenant("spend");
    const session = "mcp-session-spend-91ab";
    secrets.push(session);
    const held = await fx.client.evaluateSpendGate({ policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } }, as(tenant, AGENT, session));
    expect(held.state).toBe("HITL_REQUIRED");
    const declined = await fx.client.declineSpend({ requestSeq: held.ledgerSeq, approvedVia: "approver_role", reason: "not this quarter" }, as(tenant, ALICE));

    const heldWire = await fx.client.requestAuthorization({ tool: "wire_treasury_transfer", arguments: wire }, as(tenant, AGENT, session));
    expect(heldWire.status).toBe("HITL_REQUIRED");
    const approved = await fx.client.approveSpend({ requestSeq: heldWire.ledgerSeq, approvedVia: "approver_role" }, as(tenant, ALICE));
    expect(approved.receiptPending).toBe(true);
    // The requester collects the receipt and runs the wire: none of it is an approval event.
    const collected = await fx.client.collectSpendApproval({ requestSeq: heldWire.ledgerSeq, ttlSeconds: 60 }, as(tenant, AGENT, session));
    const receipt = collected.receipt!;
    secrets.push(String(receipt.nonce), String(receipt.signature));
    expect((await fx.client.executeReferenceTool({ tool: "wire_treasury_transfer", arguments: wire, receipt }, as(tenant, AGENT, session))).executed).toBe(true);

    const id = (seq: bigint) => `msg_${tenant}_${seq}`;
    const ids = [id(held.ledgerSeq), id(declined.ledgerSeq), id(heldWire.ledgerSeq), id(approved.ledgerSeq)];
    await receiver.waitFor("the four spend events", () => ids.every((i) => receiver.byId(i).length > 0));
    const [heldEvent, declinedEvent, wireEvent, approvedEvent] = ids.map((i) => verified(receiver.byId(i)[0]!));
    const heldSeq = Number(held.ledgerSeq);
    const wireSeq = Number(heldWire.ledgerSeq);
    expect(heldEvent).toMatchObject({
      type: "approval.pending",
      data: { tenant, kind: "spend", request_seq: heldSeq, ledger_seq: heldSeq, spend_policy: "equity", requested_by: AGENT, console_url: `${PUBLIC_URL}/approvals/spend/${heldSeq}` },
    });
    expect(heldEvent!.data).not.toHaveProperty("tool");
    expect(declinedEvent).toMatchObject({
      type: "approval.resolved",
      data: { kind: "spend", request_seq: heldSeq, ledger_seq: Number(declined.ledgerSeq), spend_policy: "equity", requested_by: AGENT, outcome: "rejected", channel: "approver", resolved_by: ALICE },
    });
    const stored = (await fx.client.getSpendRequest({ requestSeq: heldWire.ledgerSeq }, as(tenant, AGENT))).request!;
    expect(wireEvent).toEqual({
      type: "approval.pending",
      timestamp: expect.any(String),
      data: {
        tenant,
        kind: "spend",
        request_seq: wireSeq,
        ledger_seq: wireSeq,
        tool: "wire_treasury_transfer",
        spend_policy: "wire",
        requested_by: AGENT,
        // What the person sees on the console and in `approvals list`.
        expires_at: stored.expiresAt,
        channels: stored.channels,
        console_url: `${PUBLIC_URL}/approvals/spend/${wireSeq}`,
        args_hash: stored.argsHash,
      },
    });
    expect(approvedEvent).toMatchObject({
      type: "approval.resolved",
      data: { kind: "spend", request_seq: wireSeq, tool: "wire_treasury_transfer", expires_at: stored.expiresAt, args_hash: stored.argsHash, outcome: "approved", channel: "approver", resolved_by: ALICE },
    });
    // Exactly the four: collection, execution and the rest notify nobody.
    expect(receiver.received.filter((r) => r.id.startsWith(`msg_${tenant}_`)).map((r) => r.id).sort()).toEqual([...ids].sort());
  });

  it("a receiver that fails twice (a 500, then no answer) gets the event on the third try, with the same webhook-id", async () => {
    const tenant = newTenant("flaky");
    receiver.answer = (r) => (r.id.startsWith(`msg_${tenant}_`) ? ([500, "hang"] as const)[r.nth - 1] ?? 200 : 204);
    const appended = await fx.client.append({ event: pendingStep("11111111-2222-4333-8444-555555555555") }, as(tenant, AGENT));
    const id = `msg_${tenant}_${appended.entry!.seq}`;
    await receiver.waitFor("the third attempt", () => receiver.byId(id).length >= 3);
    const attempts = receiver.byId(id);
    expect(attempts.map((a) => a.nth)).toEqual([1, 2, 3]);
    // The same message each time, signed afresh for each attempt.
    expect(new Set(attempts.map((a) => a.body)).size).toBe(1);
    for (const a of attempts) expect(verified(a).data.approval_id).toBe("11111111-2222-4333-8444-555555555555");
    let row = (await outbox.list(tenant))[0];
    for (let i = 0; i < 200 && !row?.deliveredAt; i++) {
      await new Promise((r) => setTimeout(r, 20));
      row = (await outbox.list(tenant))[0];
    }
    expect(row).toMatchObject({ attempts: 3, failedAt: null, lastError: null });
    expect(row!.deliveredAt).toBeInstanceOf(Date);
    expect(log.lines.filter((l) => l.webhookId === id && l.level === 40).map((l) => l.problem)).toEqual(["HTTP 500", "no answer within 1000 ms"]);
    receiver.answer = () => 204;
  });

  it("after the last attempt the row is failed and the webhook-id logged at error", async () => {
    const tenant = newTenant("down");
    receiver.answer = (r) => (r.id.startsWith(`msg_${tenant}_`) ? 503 : 204);
    const appended = await fx.client.append({ event: pendingStep("99999999-2222-4333-8444-555555555555") }, as(tenant, AGENT));
    const id = `msg_${tenant}_${appended.entry!.seq}`;
    await receiver.waitFor("three attempts", () => receiver.byId(id).length >= 3);
    let row = (await outbox.list(tenant))[0];
    for (let i = 0; i < 200 && !row?.failedAt; i++) {
      await new Promise((r) => setTimeout(r, 20));
      row = (await outbox.list(tenant))[0];
    }
    expect(row).toMatchObject({ attempts: 3, deliveredAt: null, lastError: "HTTP 503" });
    expect(row!.failedAt).toBeInstanceOf(Date);
    const errors = log.lines.filter((l) => l.level === 50 && l.webhookId === id);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toBe(`webhook ${id} not delivered after 3 attempts; giving up`);
    expect(JSON.stringify(log.lines)).not.toContain(SECRET.slice(6));
    receiver.answer = () => 204;
    // Never sent again.
    expect(receiver.byId(id)).toHaveLength(3);
  });

  it("no body holds an argument, a receipt, a nonce, a key or a session id", () => {
    expect(receiver.received.length).toBeGreaterThanOrEqual(6);
    for (const r of receiver.received) for (const s of secrets) expect(r.body, s).not.toContain(s);
    // Nor anything that names them.
    for (const r of receiver.received) expect(r.body).not.toMatch(/"(arguments|action|receipt|nonce|session|sessionId|resolvedBy|memo|beneficiary)"/);
  });

  it("outbox rows are the tenant's own (row-level security) and delivery state, not audit: updatable, not deletable", async () => {
    const tenant = newTenant("rls");
    await fx.client.append({ event: pendingStep("77777777-2222-4333-8444-555555555555") }, as(tenant, AGENT));
    const count = (t: string) => fx.db.tenantTx(t, (q) => q.query<{ n: string | number }>("SELECT count(*) AS n FROM ledger.webhook_outbox")).then((r) => Number(r.rows[0]!.n));
    expect(await count(tenant)).toBe(1);
    expect(await count("nobody-here")).toBe(0);
    // Ids only, listed for every tenant: how a dispatcher finds the tenants with rows.
    expect(await outbox.tenants()).toContain(tenant);
    await expect(fx.db.tenantTx(tenant, (q) => q.query("INSERT INTO ledger.webhook_tenants (tenant_id) VALUES ('someone-else')"))).rejects.toThrow(/row-level security/);
    await expect(fx.db.tenantTx(tenant, (q) => q.query("DELETE FROM ledger.webhook_outbox"))).rejects.toThrow(/permission denied/);
    const updated = await fx.db.tenantTx(tenant, (q) => q.query("UPDATE ledger.webhook_outbox SET attempts = attempts"));
    expect(updated.rowCount).toBe(1);
  });

  it("without webhooks configured nothing is written to the outbox", async () => {
    const off = await fx.restart({ webhooks: undefined, ...(db ? { db } : {}) });
    try {
      const tenant = newTenant("off");
      await off.client.append({ event: pendingStep("88888888-2222-4333-8444-555555555555") }, as(tenant, AGENT));
      expect(await outbox.list(tenant)).toEqual([]);
    } finally {
      await off.close();
    }
  });

  it("two dispatchers on one store (two replicas) send each row once", async () => {
    const tenant = newTenant("replicas");
    const second = await fx.restart({ ...(db ? { db } : {}) });
    const ids: string[] = [];
    try {
      // Appended through both cores, so both dispatchers are woken for the tenant each time.
      for (let i = 0; i < 10; i++) {
        const core = i % 2 === 0 ? fx : second;
        const appended = await core.client.append({ event: pendingStep(`4444444${i}-2222-4333-8444-555555555555`) }, as(tenant, AGENT));
        ids.push(`msg_${tenant}_${appended.entry!.seq}`);
      }
      await receiver.waitFor("all ten events", () => ids.every((id) => receiver.byId(id).length > 0));
      let rows = await outbox.list(tenant);
      for (let i = 0; i < 200 && rows.some((r) => !r.deliveredAt); i++) {
        await new Promise((r) => setTimeout(r, 20));
        rows = await outbox.list(tenant);
      }
    } finally {
      await second.close();
    }
    expect(ids.map((id) => receiver.byId(id).length)).toEqual(ids.map(() => 1));
    expect((await outbox.list(tenant)).map((r) => r.attempts)).toEqual(ids.map(() => 1));
  });

  // Last: it stops this fixture's dispatcher.
  it("an undelivered row survives a restart: the new core on the same store sends it, with the same webhook-id", async () => {
    await fx.core.close();
    const tenant = newTenant("restart");
    let up = false;
    receiver.answer = (r) => (r.id.startsWith(`msg_${tenant}_`) && !up ? 500 : 204);
    const before = await fx.restart({ webhooks: { ...config, retrySeconds: Array.from({ length: 20 }, () => 0.2) }, ...(db ? { db } : {}) });
    let id: string;
    try {
      const appended = await before.client.append({ event: pendingStep("33333333-2222-4333-8444-555555555555") }, as(tenant, AGENT));
      id = `msg_${tenant}_${appended.entry!.seq}`;
      await receiver.waitFor("a refused attempt", () => receiver.byId(id).length >= 1);
    } finally {
      await before.close();
    }
    const refused = receiver.byId(id).length;
    const row = (await outbox.list(tenant))[0]!;
    expect(row.deliveredAt).toBeNull();
    expect(row.failedAt).toBeNull();

    up = true;
    const after = await fx.restart({ ...(db ? { db } : {}) });
    try {
      await receiver.waitFor("the delivery after the restart", () => receiver.byId(id).some((r) => r.nth > refused));
      const delivered = receiver.byId(id).at(-1)!;
      expect(verified(delivered).data).toMatchObject({ tenant, approval_id: "33333333-2222-4333-8444-555555555555" });
      expect(delivered.body).toBe(receiver.byId(id)[0]!.body);
    } finally {
      await after.close();
    }
  });
});
