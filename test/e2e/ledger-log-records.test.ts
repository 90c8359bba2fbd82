import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { eventually } from "../support/eventually.js";
import { startOtlpReceiver, type OtlpReceiver } from "../support/otlp-receiver.js";
import { httpClient, removeDir, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * The audit trail leaves as it is made (docs/ledger.md, "The audit trail in the SIEM"): `chaos-core
 * serve` with only the standard OTLP settings sends one OpenTelemetry log record per ledger entry
 * to a collector — here a local OTLP/HTTP receiver — with the entry's position, hashes, type,
 * tenant, principal and decision, and none of what the event's arguments held.
 */

interface LedgerView {
  entries: Array<{ seq: number; principal: string; content_hash: string; event: Record<string, unknown> }>;
}

describe("ledger entries as OpenTelemetry log records", () => {
  const dir = tempDir("chaos-core-audit-logs-");
  const secret = "the vault passphrase is tango-7731";
  let receiver: OtlpReceiver;
  let serve: ServeProcess;
  let client: Client;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    await seedDataDir(dir);
    serve = await startServe({
      CHAOS_CORE_DATA_DIR: dir,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "chaos-core-audit",
      OTEL_TRACES_EXPORTER: "none",
      OTEL_METRICS_EXPORTER: "none",
      OTEL_BLRP_SCHEDULE_DELAY: "100",
    });
    client = await httpClient(serve.url);
  }, 90_000);

  afterAll(async () => {
    await client?.close();
    await serve?.stop();
    await receiver?.close();
    removeDir(dir);
  });

  it("sends one record per entry, with its hashes, type, tenant, principal and decision, and none of the arguments", async () => {
    const steps = [
      { id: "s1", capability: "memory.remember", input: { key: "vault", value: secret } },
      { id: "s2", capability: "memory.recall", input: { query: "vault" } },
    ];
    await client.callTool({ name: "chaoscore_execute", arguments: { steps } });
    const ledger = (await client.callTool({ name: "inspect_audit_ledger", arguments: { limit: 100 } })).structuredContent as unknown as LedgerView;
    expect(ledger.entries.length).toBeGreaterThanOrEqual(3);

    const records = await eventually(
      "a log record for every ledger entry",
      () => {
        const got = receiver.logs.filter((r) => r.eventName === "chaoscore.ledger.entry");
        return got.length >= ledger.entries.length ? got : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    expect(receiver.rejected).toEqual([]);
    // One each: the same positions, no more.
    expect(records.map((r) => r.attributes["chaoscore.ledger.seq"]).sort((a, b) => Number(a) - Number(b))).toEqual(ledger.entries.map((e) => e.seq).sort((a, b) => a - b));
    for (const entry of ledger.entries) {
      const record = records.find((r) => r.attributes["chaoscore.ledger.seq"] === entry.seq)!;
      expect(record.service).toBe("chaos-core-audit");
      expect(record.attributes).toMatchObject({
        "chaoscore.tenant": "default",
        "chaoscore.principal": entry.principal,
        "chaoscore.ledger.type": entry.event["type"],
        "chaoscore.ledger.content_hash": entry.content_hash,
      });
      expect(record.attributes["chaoscore.ledger.sig"]).toMatch(/^[0-9a-f]{64}$/);
    }
    const decision = records.find((r) => r.attributes["chaoscore.ledger.type"] === "step.decision" && r.attributes["chaoscore.capability"] === "memory.remember");
    expect(decision?.attributes).toMatchObject({ "chaoscore.policy.decision": "ALLOW", "chaoscore.args_hash": expect.stringMatching(/^[0-9a-f]{64}$/) });
    // Never the arguments (nor the event's reason text, or anything else not named).
    for (const record of records) {
      expect(record.raw).not.toContain("tango-7731");
      expect(record.raw).not.toContain("vault passphrase");
      expect(Object.keys(record.attributes).every((k) => k.startsWith("chaoscore."))).toBe(true);
    }
  });
});
