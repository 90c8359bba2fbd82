import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { autoAcceptingClient } from "../support/elicitation.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, startServe, stdioClient, tempDir, type ServeProcess } from "../support/processes.js";
import { enableEveryToolset } from "../support/toolsets.js";

type Structured = Record<string, unknown>;
type Result = { isError?: boolean; structuredContent?: Structured; content: Array<{ text?: string }> };
type Entry = { seq: number; principal: string; event: Structured };

const EVERY_CHANNEL = ["client_elicitation", "approver", "operator", "console"];

/**
 * Spends under the approval channels against the real binary, over stdio and over Streamable
 * HTTP, with a client whose host accepts every form by itself (no person, no approver role). By
 * default a spend takes no form answer: the wire is held for a person, the client is never asked,
 * approve_spend approves nothing and the ledger records the attempt. Once the operator opts the
 * wire in (policy.json, approvalChannels.spend.policies.wire), the same client's answer approves
 * it, recorded as client_elicitation.
 */
describe.each([["chaos-core stdio"], ["chaos-core serve"]])("spend approval channels against %s, with a client that auto-accepts every form", (how) => {
  const dir = tempDir("chaos-core-spend-channels-");
  const asked: string[] = [];
  let serve: ServeProcess | undefined;
  let client: Client;

  beforeAll(async () => {
    await seedDataDir(dir);
    const env = { CHAOS_CORE_DATA_DIR: dir };
    // The wire runs here: the local user's operator enabled the finance reference tools.
    await enableEveryToolset(env);
    if (how === "chaos-core stdio") {
      ({ client } = await stdioClient(env, undefined, autoAcceptingClient(asked)));
    } else {
      serve = await startServe(env);
      client = await httpClient(serve.url, undefined, autoAcceptingClient(asked));
    }
  });

  afterAll(async () => {
    await client?.close();
    await serve?.stop();
    removeDir(dir);
  });

  const call = async (name: string, args: Structured) => (await client.callTool({ name, arguments: args })) as Result;
  const structured = (res: Result) => {
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    return res.structuredContent!;
  };
  const errorText = (res: Result) => {
    expect(res.isError).toBe(true);
    return res.content.map((c) => c.text ?? "").join("\n");
  };
  const ledgerEntries = async (): Promise<Entry[]> => structured(await call("inspect_audit_ledger", { limit: 50 })).entries as Entry[];
  const policyVersion = async () => (structured(await call("chaoscore_inspect", { what: "policy" })).policy as { version: number }).version;
  const heldWire = async (args: Structured) => {
    const held = structured(await call("request_authorization", { tool: "wire_treasury_transfer", args }));
    expect(held.status).toBe("HITL_REQUIRED");
    return held as { request_seq: number; approval_channels: Array<{ channel: string }>; next_step: string };
  };

  it("by default: the wire is held for a person, the client is not asked, nothing is approved, and the ledger records the attempt", async () => {
    const wire = { beneficiary: "ACME Supplies GmbH", amount: 2500, currency: "EUR", memo: "invoice 42" };
    const decision = structured(await call("chaoscore_inspect", { what: "policy", spend_policy: "wire", tool: "wire_treasury_transfer" }));
    expect((decision.policy as { spend_decision: Structured }).spend_decision).toMatchObject({
      approval_channels: ["approver", "operator", "console"],
      matched_rule: "approvalChannels.spend.default",
    });

    const held = await heldWire(wire);
    const offered = held.approval_channels.map((c) => c.channel);
    expect(offered).toEqual(expect.arrayContaining(["approver", "operator"]));
    expect(offered).not.toContain("client_elicitation");
    expect(held.next_step).toContain(`chaos-core approvals approve-spend ${held.request_seq} --data-dir ${dir}`);

    const refused = errorText(await call("approve_spend", { request_seq: held.request_seq }));
    expect(refused).toContain(`no person has answered spend request ${held.request_seq} yet, and policy does not accept an answer from this client for it`);
    expect(refused).toContain("rule approvalChannels.spend.default");
    expect(refused).not.toMatch(/- client_elicitation/);
    expect(asked).toEqual([]);

    // Nothing ran, nothing was approved; the attempt is in the ledger.
    expect(structured(await call("wire_treasury_transfer", wire))).toMatchObject({ executed: false, detail_code: "approval_pending" });
    const entries = (await ledgerEntries()).filter((e) => e.event.request_seq === held.request_seq);
    expect(entries.find((e) => e.event.type === "spend.collect_refused")).toMatchObject({ principal: "local", event: { code: "approval_pending" } });
    expect(entries.some((e) => e.event.type === "spend.approved")).toBe(false);
  });

  it("with the operator's opt-in for wire the same client's answer approves it, recorded as client_elicitation, and the wire runs once", async () => {
    const before = await policyVersion();
    writeFileSync(join(dir, "policy.json"), JSON.stringify({ approvalChannels: { spend: { policies: { wire: EVERY_CHANNEL } } } }));
    await expect.poll(policyVersion, { timeout: 15_000, interval: 250 }).toBeGreaterThan(before);

    const wire = { beneficiary: "ACME Supplies GmbH", amount: 2600, currency: "EUR", memo: "invoice 43" };
    const held = await heldWire(wire);
    expect(held.approval_channels.map((c) => c.channel)).toContain("client_elicitation");
    const approved = structured(await call("approve_spend", { request_seq: held.request_seq }));
    expect(approved).toMatchObject({ state: "LOCKED", channel: "client_elicitation", human: { answer: "confirmed", via: "elicitation" } });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain('beneficiary = "ACME Supplies GmbH"');
    expect(asked[0]).toContain('memo = "invoice 43"');

    const ran = structured(await call("wire_treasury_transfer", { ...wire, receipt: approved.receipt }));
    expect(ran).toMatchObject({ executed: true });
    expect(structured(await call("wire_treasury_transfer", { ...wire, receipt: approved.receipt }))).toMatchObject({ executed: false, code: "replay" });
    const recorded = (await ledgerEntries()).find((e) => e.event.type === "spend.approved" && e.event.request_seq === held.request_seq);
    expect(recorded).toMatchObject({
      principal: "local",
      event: { channel: "client_elicitation", approver: "elicitation:local", channels_rule: "approvalChannels.spend.policies.wire" },
    });
  });
});
