/**
 * Signed checkpoints leave as they are made (issue 35 item 3): with `CHAOS_CORE_WEBHOOK_CHECKPOINTS`
 * each checkpoint the integrator signs is a `ledger.checkpoint` event, written to the durable
 * outbox in the transaction that signs it and delivered to a real local receiver, signed (checked
 * with the `standardwebhooks` library) — and one the receiver could not take is delivered after
 * a restart. Its note verifies with the public key alone.
 */
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../../../../test/support/webhook-receiver.js";
import { openCheckpoint, verifierKey } from "../log/checkpoint.js";
import { parseVerifierKey } from "../log/checkpoint.js";
import { as } from "../test-support/flows.js";
import { createLedgerFixture, type LedgerFixture } from "../test-support/ledger-fixture.js";
import type { CheckpointWebhookEvent } from "./checkpoint-events.js";
import { createWebhookOutbox } from "./outbox.js";

const key = randomBytes(32);
const SECRET = `whsec_${key.toString("base64")}`;

describe("ledger.checkpoint webhooks", () => {
  let receiver: WebhookReceiver;
  let fx: LedgerFixture;
  let restarted: LedgerFixture | undefined;

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    fx = await createLedgerFixture({
      name: "chaoscore_checkpoint_webhooks",
      nonces: "memory",
      webhooks: { url: receiver.url, keys: [key], timeoutMs: 1000, retrySeconds: [1, 1, 1, 1, 1], checkpoints: true },
    });
  }, 120_000);

  afterAll(async () => {
    await restarted?.close();
    await fx?.close();
    await receiver?.close();
  });

  it("sends each signed checkpoint, signed, its note verifiable with the public key", async () => {
    const tenant = `cp-${randomBytes(3).toString("hex")}`;
    for (let i = 0; i < 3; i++) await fx.client.append({ event: { type: "test.note", i } }, as(tenant, "agent"));
    const { checkpoint } = await fx.client.getCheckpoint({}, as(tenant, "agent"));
    const size = Number(checkpoint!.size);
    const id = `msg_${tenant}_checkpoint_${size}`;
    await receiver.waitFor("the newest checkpoint's event", () => receiver.byId(id).length > 0);
    const event = new Webhook(SECRET).verify(receiver.byId(id)[0]!.body, receiver.byId(id)[0]!.headers) as CheckpointWebhookEvent;
    expect(event).toEqual({
      type: "ledger.checkpoint",
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      data: { tenant, origin: `chaos-core/ledger/${tenant}`, size, root_hash: checkpoint!.rootHash, note: checkpoint!.note },
    });
    const vkey = verifierKey(event.data.origin, fx.keyring.active.publicKey);
    expect(openCheckpoint(event.data.note, [parseVerifierKey(vkey)])).toMatchObject({ origin: event.data.origin, size });
    // Every checkpoint of the log has its row, keyed by its size, beside no entry row (these entries notify nobody).
    const rows = await createWebhookOutbox(fx.db).list(tenant);
    expect(rows.every((r) => r.kind === "checkpoint")).toBe(true);
    expect(rows.map((r) => r.entrySeq)).toContain(size);
  });

  it("keeps a checkpoint the receiver could not take through a restart, and delivers it then", async () => {
    const tenant = `cp-${randomBytes(3).toString("hex")}`;
    receiver.answer = () => 503;
    await fx.client.append({ event: { type: "test.note", i: 0 } }, as(tenant, "agent"));
    const { checkpoint } = await fx.client.getCheckpoint({}, as(tenant, "agent"));
    const id = `msg_${tenant}_checkpoint_${Number(checkpoint!.size)}`;
    await receiver.waitFor("a refused attempt", () => receiver.byId(id).length > 0);
    // The process goes away with the row undelivered; a new one, on the same database, sends it.
    await fx.core.close();
    await fx.core.store.close();
    const refused = receiver.byId(id).length;
    receiver.answer = () => 204;
    restarted = await fx.restart();
    await receiver.waitFor("the checkpoint delivered after the restart", () => receiver.byId(id).length > refused, 20_000);
    const outbox = createWebhookOutbox(restarted.db);
    let row = (await outbox.list(tenant)).find((r) => r.kind === "checkpoint" && r.entrySeq === Number(checkpoint!.size));
    for (let i = 0; i < 100 && !row?.deliveredAt; i++) {
      await new Promise((r) => setTimeout(r, 50));
      row = (await outbox.list(tenant)).find((r) => r.kind === "checkpoint" && r.entrySeq === Number(checkpoint!.size));
    }
    expect(row?.deliveredAt).not.toBeNull();
  }, 60_000);
});
