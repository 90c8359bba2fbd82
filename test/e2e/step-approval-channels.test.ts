import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { autoAcceptingClient } from "../support/elicitation.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, startServe, tempDir, type ServeProcess } from "../support/processes.js";

type Structured = Record<string, unknown>;
type Entry = { principal: string; event: Structured };

/**
 * `chaos-core serve` over Streamable HTTP, with a client whose host answers every form with
 * "approve" by itself (no person, no approver role). No built-in capability is high risk, so
 * policy.json gives memory.remember the channels the default gives high risk; the default itself
 * is shown in services/edge/src/tools/approvals.test.ts with a high-risk test capability, over
 * the same transports. Here the real server must not count the client's answer, must record the
 * attempt in its ledger, and must count it once the operator opts memory.remember in.
 */
describe("step approval channels against chaos-core serve, with a client that auto-accepts every form", () => {
  const dir = tempDir("chaos-core-channels-");
  const asked: string[] = [];
  let serve: ServeProcess;
  let client: Client;
  const policy = (channels: string[]) =>
    writeFileSync(
      join(dir, "policy.json"),
      JSON.stringify({ requireConfirmationFor: ["memory.remember"], approvalChannels: { capabilities: { "memory.remember": channels } } }),
    );

  beforeAll(async () => {
    await seedDataDir(dir);
    policy(["approver", "operator", "console"]);
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dir });
    client = await httpClient(serve.url, undefined, autoAcceptingClient(asked));
  });

  afterAll(async () => {
    await client?.close();
    await serve?.stop();
    removeDir(dir);
  });

  const call = async (name: string, args: Structured) => (await client.callTool({ name, arguments: args })) as { isError?: boolean; structuredContent?: Structured; content: Array<{ text?: string }> };
  async function pending(value: string): Promise<string> {
    const res = await call("chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input: { key: "payout", value } }] });
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    const step = (res.structuredContent!.results as Structured[])[0]!;
    expect(step.status).toBe("pending_approval");
    return (step.approval as { approval_id: string }).approval_id;
  }
  async function ledgerOf(id: string): Promise<Entry[]> {
    const res = await call("inspect_audit_ledger", { limit: 50 });
    return (res.structuredContent!.entries as Entry[]).filter((e) => e.event.approvalId === id);
  }
  async function remembered(): Promise<unknown> {
    const res = await call("chaoscore_recall", { key: "payout" });
    return (res.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value;
  }

  it("does not ask the client, runs nothing, records the attempt and names who can approve", async () => {
    const id = await pending("ACME Ltd 25000");
    const res = await call("chaoscore_execute", { approval_id: id });
    expect(res.isError).toBe(true);
    const text = res.content.map((c) => c.text ?? "").join("\n");
    expect(text).toContain(`approval ${id} has not been answered, and policy does not accept an answer from this client for it`);
    expect(text).toContain(`- approver: A person holding the approver role in this tenant calls chaoscore_approve {"approval_id": "${id}", "approve": true}`);
    expect(text).toContain(`- operator: The operator of this Chaos Core runs chaos-core approvals approve ${id} --data-dir ${dir}`);
    expect(asked).toEqual([]);
    expect(await remembered()).toBeUndefined();
    const entries = await ledgerOf(id);
    expect(entries.some((e) => e.event.type === "step.outcome" && e.event.errorCode === "approval_required")).toBe(true);
    expect(entries.some((e) => e.event.type === "approval.resolution")).toBe(false);
  });

  it("counts the client's answer once the operator opts memory.remember in, recorded as client_elicitation", async () => {
    const before = (await call("chaoscore_inspect", { what: "policy" })).structuredContent as { policy: { version: number } };
    policy(["client_elicitation", "approver", "operator", "console"]);
    await expect
      .poll(async () => ((await call("chaoscore_inspect", { what: "policy" })).structuredContent as { policy: { version: number } }).policy.version, {
        timeout: 15_000,
        interval: 250,
      })
      .toBeGreaterThan(before.policy.version);

    const id = await pending("ACME Ltd 25000 (opted in)");
    const res = await call("chaoscore_execute", { approval_id: id });
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    expect((res.structuredContent!.results as Structured[])[0]).toMatchObject({ status: "executed", ran: true });
    expect(asked).toHaveLength(1);
    expect(await remembered()).toBe("ACME Ltd 25000 (opted in)");
    expect((await ledgerOf(id)).find((e) => e.event.type === "approval.resolution")).toMatchObject({
      principal: "local",
      event: { channel: "client_elicitation", principal: "local", approved: true },
    });
  });
});
