import { createLogger } from "@chaos-core/kit";
import type { ServerContext } from "@modelcontextprotocol/server";
import { describe, expect, it } from "vitest";
import type { EdgeDeps } from "../deps/edge-deps.js";
import type { ModernScope } from "../sessions/server-scope.js";
import { newMrtrKeyringFile, parseMrtrKeyring } from "../mrtr/keyring.js";
import { argumentsDigest, sealRequestState } from "../mrtr/sealed-state.js";
import { createRecordingLedger } from "../test-support/recording-ledger.js";
import type { HumanAsk } from "../definitions/tool.js";
import { answerOf, questionDigest, requestStateVerifier } from "./mrtr-round.js";

// The verify hook and the question digest, without a transport: what the SDK calls before any
// handler, against a ledger that records what it is sent.

const keyring = parseMrtrKeyring(newMrtrKeyringFile(), "test");
const scope: ModernScope = { era: "modern", tenant: "t1", principal: "agent" };
const logger = createLogger("mrtr-round-test", "silent");
const flow = "f".repeat(22);

function depsWith(ledger = createRecordingLedger({ recordRequestStateRefusal: async () => ({ entrySeq: 5n }) })) {
  return { ledger, deps: { ledger: ledger.client, mrtrKeyring: keyring, logger } as unknown as EdgeDeps };
}

const ctxFor = (method: string) => ({ mcpReq: { method } }) as unknown as ServerContext;

function seal(overrides: Partial<{ tenant: string; principal: string; now: () => number }> = {}): string {
  return sealRequestState(
    keyring,
    {
      tenant: overrides.tenant ?? scope.tenant,
      principal: overrides.principal ?? scope.principal,
      method: "tools/call",
      name: "chaoscore_execute",
      digest: argumentsDigest({ approval_id: "a-1" }),
      flow,
      phase: "approve",
      fields: { q: "0".repeat(64) },
    },
    { ttlSeconds: 60, ...(overrides.now ? { now: overrides.now } : {}) },
  ).state;
}

describe("requestStateVerifier", () => {
  it("hands the handler the opened payload and records nothing for a good state", async () => {
    const { ledger, deps } = depsWith();
    const verified = await requestStateVerifier(deps, scope, logger)(seal(), ctxFor("tools/call"));
    expect(verified).toMatchObject({ verified: true, kid: keyring.activeKid, payload: { flow, phase: "approve", n: "chaoscore_execute", q: "0".repeat(64) } });
    expect(ledger.calls).toEqual([]);
  });

  it.each([
    ["another principal's", () => seal({ principal: "mallory" }), "tools/call", "principal"],
    ["another tenant's", () => seal({ tenant: "t2" }), "tools/call", "tenant"],
    ["an expired", () => seal({ now: () => Date.now() - 120_000 }), "tools/call", "expired"],
    ["another method's", () => seal(), "prompts/get", "method"],
    ["a garbled", () => "cc1.nope", "tools/call", "malformed"],
  ])("refuses %s state, recording the reason under the caller's tenant and principal", async (_what, state, method, reason) => {
    const { ledger, deps } = depsWith();
    await expect(requestStateVerifier(deps, scope, logger)(state(), ctxFor(method))).rejects.toThrow(`requestState refused (${reason})`);
    const [recorded] = ledger.requests("recordRequestStateRefusal");
    expect(recorded).toMatchObject({ reason });
    const call = ledger.calls[0]!.call;
    expect(call).toMatchObject({ tenant: "t1", principal: "agent" });
    expect(call.requestRef).toMatch(/^[A-Za-z0-9_-]{22}$/);
    // Handles of a state that is not the caller's never reach the caller's records.
    if (reason === "principal" || reason === "tenant" || reason === "malformed") expect(recorded!["jti"]).toBe("");
    else expect(recorded!["flow"]).toBe(flow);
  });

  it("still refuses when the ledger cannot record the refusal", async () => {
    const { deps } = depsWith(createRecordingLedger({}));
    await expect(requestStateVerifier(deps, scope, logger)(seal({ principal: "mallory" }), ctxFor("tools/call"))).rejects.toThrow(/principal/);
  });

  it("refuses every state without a keyring", async () => {
    const { deps } = depsWith();
    const without = { ...deps, mrtrKeyring: undefined } as EdgeDeps;
    await expect(requestStateVerifier(without, scope, logger)(seal(), ctxFor("tools/call"))).rejects.toThrow(/no MRTR keyring/);
  });
});

describe("questionDigest and answerOf", () => {
  const form: HumanAsk = { mode: "form", key: "approve", message: "Run it?", requestedSchema: { type: "object", properties: { approve: { type: "boolean" } } } };

  it("changes with anything the person is shown, and only with that", () => {
    expect(questionDigest(form)).toMatch(/^[0-9a-f]{64}$/);
    expect(questionDigest({ ...form })).toBe(questionDigest(form));
    expect(questionDigest({ ...form, message: "Run it now?" })).not.toBe(questionDigest(form));
    expect(questionDigest({ mode: "url", key: "console", message: "Run it?", url: "https://x/approvals/step/1", elicitationId: "e1" })).not.toBe(
      questionDigest({ mode: "url", key: "console", message: "Run it?", url: "https://x/approvals/step/2", elicitationId: "e1" }),
    );
    // The 2025-only correlation id is not part of what the person sees.
    expect(questionDigest({ mode: "url", key: "console", message: "m", url: "https://x", elicitationId: "a" })).toBe(
      questionDigest({ mode: "url", key: "console", message: "m", url: "https://x", elicitationId: "b" }),
    );
  });

  it("reads an answer only for the resumed question's key", () => {
    const extra = { mcpReq: { inputResponses: { approve: { action: "accept", content: { approve: true } }, other: { action: "decline" } } } } as unknown as ServerContext;
    const resumed = { flow, key: "approve", question: questionDigest(form), carried: {} };
    expect(answerOf(extra, resumed, "approve")).toEqual({ kind: "accept", content: { approve: true } });
    expect(answerOf(extra, resumed, "other")).toEqual({ kind: "missing" });
    expect(answerOf(extra, undefined, "approve")).toEqual({ kind: "missing" });
  });
});
