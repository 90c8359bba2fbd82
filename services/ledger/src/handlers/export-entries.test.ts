import { ContextSigner, createGrpcClient, createLogger, type GrpcClient, type RunningGrpcServer, type ServiceClient } from "@chaos-core/kit";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyExport } from "../log/verify.js";
import { startLedgerServer } from "../server.js";
import { createLedgerFixture, type LedgerFixture } from "../test-support/ledger-fixture.js";

// ExportEntries: the ledger's JSONL export of the caller's tenant, over both transports.

const KEY = "ledger-export-test-key-0123456789abcdef";

let fx: LedgerFixture;
let server: RunningGrpcServer;
let grpc: GrpcClient<typeof LedgerService>;

beforeAll(async () => {
  fx = await createLedgerFixture({ name: "chaoscore_ledger_export", nonces: "memory" });
  const signer = new ContextSigner(KEY);
  server = await startLedgerServer({ host: "127.0.0.1", port: 0, signer, core: fx.core, logger: createLogger("ledger-test", "silent") });
  grpc = createGrpcClient(LedgerService, `127.0.0.1:${server.port}`, signer);
});

afterAll(async () => {
  grpc?.close();
  await server?.shutdown(1000);
  await fx?.close();
});

const as = (tenant: string) => ({ ctx: { tenant, principal: "operator" } });

async function exportText(client: ServiceClient<typeof LedgerService>, tenant: string): Promise<string> {
  let text = "";
  for await (const res of client.exportEntries({}, as(tenant))) text += res.line;
  return text;
}

async function storeExport(tenant: string): Promise<string> {
  let text = "";
  for await (const line of fx.core.store.exportLedger(tenant)) text += line;
  return text;
}

describe.each([
  ["in-process", () => fx.client],
  ["gRPC", () => grpc.client],
])("ExportEntries over the %s transport", (name, client) => {
  const mine = `${name === "gRPC" ? "grpc" : "local"}-mine`;
  const theirs = `${name === "gRPC" ? "grpc" : "local"}-theirs`;

  it("streams the caller's tenant's log exactly as the store exports it, verifiable with the public key, and nothing of another tenant's", async () => {
    for (let i = 0; i < 12; i++) await client().append({ event: { type: "test.event", i, secret: `mine-${i}` } }, as(mine));
    for (let i = 0; i < 3; i++) await client().append({ event: { type: "test.event", i, secret: `theirs-${i}` } }, as(theirs));

    const text = await exportText(client(), mine);
    const lines = text.split("\n");
    expect(lines.pop()).toBe(""); // every line ends with its line break
    expect(JSON.parse(lines[0]!)).toMatchObject({ type: "header", format: "chaos-core-ledger/1", tenant: mine });
    const records = lines.slice(1).map((l) => JSON.parse(l) as { type: string; tenant?: string; seq?: number; event?: { secret: string } });
    const entries = records.filter((r) => r.type === "entry");
    expect(entries.map((e) => e.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(entries.every((e) => e.tenant === mine && e.event?.secret.startsWith("mine-"))).toBe(true);
    expect(text).not.toContain("theirs-");
    // Everything appended before the call is covered by the last checkpoint.
    expect(records[records.length - 1]).toMatchObject({ type: "checkpoint", size: 12 });

    expect(text).toBe(await storeExport(mine));
    const report = await verifyExport(text, fx.core.store.verifierKey(mine));
    expect(report).toMatchObject({ ok: true, entries: 12 });

    const theirsText = await exportText(client(), theirs);
    expect(theirsText).not.toContain("mine-");
    expect((await verifyExport(theirsText, fx.core.store.verifierKey(theirs))).ok).toBe(true);
  });

  it("exports a header alone for a tenant with an empty log", async () => {
    const text = await exportText(client(), `${mine}-empty`);
    expect(text.split("\n").filter(Boolean).map((l) => JSON.parse(l).type)).toEqual(["header"]);
  });
});
