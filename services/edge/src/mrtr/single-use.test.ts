/**
 * The edge's single use of a sealed requestState against the real ledger handlers (a fresh
 * Postgres database): sealed, opened and bound here, consumed once there, every refusal
 * recorded; no ledger, nothing consumed.
 */
import { randomBytes } from "node:crypto";
import { REQUEST_STATE_REFUSAL_REASONS as LEDGER_REASONS } from "@chaos-core/ledger";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestLedger, type TestLedger } from "../test-support/ledger.js";
import { createMrtrKeyring } from "./keyring.js";
import { argumentsDigest, openRequestState, REQUEST_STATE_REFUSAL_REASONS, sealRequestState } from "./sealed-state.js";
import { consumeRequestState, recordRequestStateRefusal } from "./single-use.js";

const keyring = createMrtrKeyring("k1", new Map([["k1", randomBytes(32)]]));
const call = (principal = "agent@acme") => ({ tenant: "acme", principal, requestRef: randomBytes(16).toString("base64url") });
const ARGS = { approval_id: "6f1c2a9e-3b7d-4c1a-9e2f-0a1b2c3d4e5f" };

function sealFor(principal = "agent@acme") {
  return sealRequestState(
    keyring,
    { tenant: "acme", principal, method: "tools/call", name: "chaoscore_execute", digest: argumentsDigest(ARGS), flow: call().requestRef, phase: "form" },
    { ttlSeconds: 600 },
  );
}

let ledger: TestLedger;
beforeAll(async () => {
  ledger = await startTestLedger("mrtr_single_use");
});
afterAll(async () => {
  await ledger?.close();
});

async function eventAt(seq: bigint) {
  const res = await ledger.client.listEntries({ afterSeq: seq - 1n, limit: 1 }, { ctx: call() });
  return res.entries[0]?.event;
}

describe("single use of a sealed requestState through the ledger", () => {
  it("an opened state is consumed once; the replay is refused and recorded", async () => {
    const { state } = sealFor();
    const opened = openRequestState(keyring, state, { tenant: "acme", principal: "agent@acme", method: "tools/call", name: "chaoscore_execute", digest: argumentsDigest(ARGS) });
    expect(opened.ok).toBe(true);
    if (!opened.ok) return;
    const first = await consumeRequestState(ledger.client, call(), opened.payload);
    expect(first).toMatchObject({ consumed: true, code: "consumed" });
    expect(await eventAt(first.entrySeq)).toMatchObject({ type: "mrtr.state_consumed", jti: opened.payload.jti, flow: opened.payload.flow, tool: "chaoscore_execute" });
    const replay = await consumeRequestState(ledger.client, call(), opened.payload);
    expect(replay).toMatchObject({ consumed: false, code: "already_consumed" });
    expect(await eventAt(replay.entrySeq)).toMatchObject({ type: "mrtr.state_refused", reason: "already_consumed" });
  });

  it("a refusal is recorded with its reason, and another principal's state names none of its handles", async () => {
    const { state } = sealFor("agent@acme");
    const refused = openRequestState(keyring, state, { tenant: "acme", principal: "mallory@acme", method: "tools/call" });
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    const seq = await recordRequestStateRefusal(ledger.client, call("mallory@acme"), refused);
    expect(await eventAt(seq)).toEqual({ type: "mrtr.state_refused", reason: "principal", kid: "k1", jti: null, flow: null, tool: null });
    // The caller's own state with other arguments: its handles are recorded.
    const own = openRequestState(keyring, state, { tenant: "acme", principal: "agent@acme", method: "tools/call", digest: argumentsDigest({}) });
    if (own.ok) throw new Error("opened");
    const ownSeq = await recordRequestStateRefusal(ledger.client, call(), own);
    expect(await eventAt(ownSeq)).toMatchObject({ reason: "digest", jti: own.jti, tool: "chaoscore_execute" });
  });

  it("every reason the edge refuses with is one the ledger records", async () => {
    const ledgerReasons = LEDGER_REASONS.filter((r) => r.by.split(", ").includes("edge")).map((r) => r.reason);
    expect([...REQUEST_STATE_REFUSAL_REASONS].sort()).toEqual([...ledgerReasons].sort());
    for (const reason of REQUEST_STATE_REFUSAL_REASONS) {
      await expect(recordRequestStateRefusal(ledger.client, call(), { ok: false, reason, problem: "" })).resolves.toBeGreaterThan(0n);
    }
  });

  it("without a ledger nothing is consumed: unavailable", async () => {
    const { payload } = sealFor();
    await expect(consumeRequestState(undefined, call(), payload)).rejects.toMatchObject({ code: "unavailable", message: expect.stringContaining("nothing ran") });
    await expect(recordRequestStateRefusal(undefined, call(), { ok: false, reason: "tag", problem: "" })).rejects.toMatchObject({ code: "unavailable" });
  });
});
