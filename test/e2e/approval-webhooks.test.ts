import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from "../support/webhook-receiver.js";

type Structured = Record<string, unknown>;
type Event = { type: string; timestamp: string; data: Structured };

function structured(res: Awaited<ReturnType<Client["callTool"]>>): Structured {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as Structured;
}

/**
 * The webhook against the real `chaos-core serve`, configured only through its environment: a
 * local HTTP receiver gets the pending and the resolved event of a step approval and of a spend,
 * each verified with the `standardwebhooks` library, and a receiver that refuses the first two
 * attempts still gets the event, on the third, with the same webhook-id.
 */
describe("approval webhooks from chaos-core serve", () => {
  const dir = tempDir("chaos-core-webhooks-");
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  const PUBLIC_URL = "http://127.0.0.1:8999";
  let receiver: WebhookReceiver;
  let serve: ServeProcess;
  let client: Client;
  const env = () => ({
    CHAOS_CORE_DATA_DIR: dir,
    CHAOS_CORE_WEBHOOK_URL: receiver.url,
    CHAOS_CORE_WEBHOOK_SECRET: secret,
    CHAOS_CORE_WEBHOOK_TIMEOUT_MS: "1000",
    CHAOS_CORE_WEBHOOK_RETRY_SECONDS: "0.2,0.2",
    CHAOS_CORE_PUBLIC_URL: PUBLIC_URL,
  });
  const approvals = (...args: string[]) => runToExit(["approvals", ...args], { CHAOS_CORE_DATA_DIR: dir }, 30_000);
  const verified = (r: ReceivedWebhook) => new Webhook(secret).verify(r.body, r.headers) as Event;
  /** The first delivery of each event matching `match`, verified, in ledger order. */
  const events = (match: (e: Event) => boolean) =>
    [...new Map(receiver.received.map((r) => [r.id, r])).values()].map(verified).filter(match).sort((a, b) => Number(a.data.ledger_seq) - Number(b.data.ledger_seq));

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    await seedDataDir(dir);
    writeFileSync(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["memory.remember"] }));
    serve = await startServe(env());
    client = await httpClient(serve.url);
  });

  afterAll(async () => {
    await client?.close();
    await serve?.stop();
    await receiver?.close();
    removeDir(dir);
  });

  it("a step: pending when the agent's call needs approval, resolved when the operator approves", async () => {
    const pending = structured(
      await client.callTool({
        name: "chaoscore_execute",
        arguments: { steps: [{ id: "s1", capability: "memory.remember", input: { key: "deploy-window", value: "friday 18:00, token tok-7731" } }] },
      }),
    );
    const id = ((pending.results as Structured[])[0]!.approval as { approval_id: string }).approval_id;
    const step = (e: Event) => e.data.approval_id === id;
    await receiver.waitFor("the step's pending event", () => events(step).length >= 1);
    expect(events(step)[0]).toMatchObject({
      type: "approval.pending",
      data: {
        tenant: "default",
        kind: "step",
        approval_id: id,
        capability: "memory.remember",
        risk: expect.any(String),
        requested_by: "local",
        expires_at: expect.stringMatching(/^\d{4}-/),
        channels: expect.arrayContaining(["operator"]),
        console_url: `${PUBLIC_URL}/approvals/step/${id}`,
        args_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      },
    });

    const approved = await approvals("approve", id);
    expect(approved.code, approved.stderr).toBe(0);
    await receiver.waitFor("the step's resolved event", () => events(step).length >= 2);
    expect(events(step)[1]).toMatchObject({
      type: "approval.resolved",
      data: { kind: "step", approval_id: id, outcome: "approved", channel: "operator", resolved_by: "operator", console_url: `${PUBLIC_URL}/approvals/step/${id}` },
    });
  });

  it("a spend: pending when held for a person, resolved when the operator approves; a wire rejected too", async () => {
    const gate = structured(
      await client.callTool({ name: "evaluate_spend_gate", arguments: { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } } }),
    );
    expect(gate.state).toBe("HITL_REQUIRED");
    const seq = gate.ledger_seq as number;
    const spend = (n: number) => (e: Event) => e.data.request_seq === n;
    await receiver.waitFor("the spend's pending event", () => events(spend(seq)).length >= 1);
    expect(events(spend(seq))[0]).toMatchObject({
      type: "approval.pending",
      data: { tenant: "default", kind: "spend", request_seq: seq, ledger_seq: seq, spend_policy: "equity", requested_by: "local", console_url: `${PUBLIC_URL}/approvals/spend/${seq}` },
    });
    expect((await approvals("approve-spend", String(seq))).code).toBe(0);
    await receiver.waitFor("the spend's resolved event", () => events(spend(seq)).length >= 2);
    expect(events(spend(seq))[1]).toMatchObject({ type: "approval.resolved", data: { request_seq: seq, outcome: "approved", channel: "operator", resolved_by: "operator" } });

    const wire = { beneficiary: "Initech Holdings", amount: 4200, currency: "USD", memo: "urgent, do not delay", confidence: 0.9 };
    const held = structured(await client.callTool({ name: "request_authorization", arguments: { tool: "wire_treasury_transfer", args: wire } }));
    const wireSeq = held.request_seq as number;
    expect((await approvals("reject-spend", String(wireSeq), "--reason", "unknown beneficiary")).code).toBe(0);
    await receiver.waitFor("the wire's two events", () => events(spend(wireSeq)).length >= 2);
    expect(events(spend(wireSeq)).map((e) => [e.type, e.data.tool, e.data.outcome])).toEqual([
      ["approval.pending", "wire_treasury_transfer", undefined],
      ["approval.resolved", "wire_treasury_transfer", "rejected"],
    ]);
  });

  it("a receiver that fails twice (a 500, then no answer) gets the event on the third try, with the same webhook-id", async () => {
    let target: string | undefined;
    receiver.answer = (r) => {
      if (target === undefined && (JSON.parse(r.body) as Event).data.request_seq !== undefined) target = r.id;
      return r.id === target ? (([500, "hang"] as const)[r.nth - 1] ?? 200) : 204;
    };
    try {
      const gate = structured(
        await client.callTool({ name: "evaluate_spend_gate", arguments: { policy: "equity", action: { action: "BUY", asset: "MSFT", notional: 400, confidence: 0.9 } } }),
      );
      const id = `msg_default_${gate.ledger_seq as number}`;
      await receiver.waitFor("the third attempt", () => receiver.byId(id).length >= 3);
      expect(target).toBe(id);
      const tries = receiver.byId(id);
      expect(tries.map((t) => t.nth)).toEqual([1, 2, 3]);
      expect(new Set(tries.map((t) => t.body)).size).toBe(1);
      for (const t of tries) expect(verified(t).data).toMatchObject({ request_seq: gate.ledger_seq, spend_policy: "equity" });
    } finally {
      receiver.answer = () => 204;
    }
  });

  it("no body holds the arguments, a session id or the secret", () => {
    const session = (client.transport as StreamableHTTPClientTransport).sessionId!;
    expect(session).toBeTruthy();
    expect(receiver.received.length).toBeGreaterThanOrEqual(6);
    for (const r of receiver.received) {
      for (const s of [session, secret.slice(6), "friday 18:00", "tok-7731", "Initech Holdings", "urgent, do not delay", "unknown beneficiary", "AAPL"]) {
        expect(r.body, s).not.toContain(s);
      }
    }
    expect(serve.stderr()).not.toContain(secret.slice(6));
  });
});
