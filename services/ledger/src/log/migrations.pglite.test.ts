import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPgliteDb, type Db } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openCheckpoint, parseVerifierKey } from "./checkpoint.js";
import { createLedgerStore, type LedgerStore } from "./ledger-store.js";
import { hashLeaf, verifyInclusion } from "./merkle.js";
import { migrateLedger } from "./migrations.js";
import { verifyExport, verifyStoredLedger } from "./verify.js";

// The embedded database standalone runs on: the same migrations and SQL as Postgres.
let db: Db;
let store: LedgerStore;
let dataDir: string;

beforeAll(async () => {
  // A data directory starts much faster than an in-memory PGlite.
  dataDir = await mkdtemp(join(tmpdir(), "chaoscore-ledger-"));
  db = await createPgliteDb({ dataDir });
  expect(await migrateLedger(db)).toEqual(["0001_audit_log", "0002_spend_requests", "0003_webhooks", "0004_sequence_then_integrate"]);
  expect(await migrateLedger(db)).toEqual([]);
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  store = createLedgerStore(db, { key: { name: "standalone/{tenant}", privateKey, publicKey } });
});

afterAll(async () => {
  await db?.close();
  await rm(dataDir, { recursive: true, force: true });
});

describe("ledger on PGlite", () => {
  it("appends (with a hook), proves and verifies", async () => {
    const first = await Promise.all(
      Array.from({ length: 5 }, (_, i) => store.append("default", { session: "s", principal: "p", event: { i } })),
    );
    expect(first.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    const hooked = await store.append("default", {
      session: "s",
      principal: "p",
      event: {},
      hook: async (tx, ctx) => {
        await tx.query("INSERT INTO ledger.nonces (tenant_id, nonce, entry_seq) VALUES ($1, 'n', $2)", [ctx.tenant, ctx.seq]);
        return { nonce: "n" };
      },
    });
    expect(hooked.seq).toBe(6);
    await expect(
      store.append("default", { session: "s", principal: "p", event: {}, hook: () => Promise.reject(new Error("no")) }),
    ).rejects.toThrow("no");

    const vkey = store.verifierKey("default");
    expect(vkey.startsWith("standalone/default+")).toBe(true);
    expect(await verifyStoredLedger(store, "default", vkey)).toMatchObject({ ok: true, entries: 6, verifiedSize: 6 });
    let text = "";
    for await (const line of store.exportLedger("default")) text += line;
    expect((await verifyExport(text, vkey)).ok).toBe(true);

    const p = await store.inclusionProof("default", { seq: 3 });
    const root = openCheckpoint(p.checkpoint.note, [parseVerifierKey(vkey)]).root;
    const leaf = hashLeaf(Buffer.from(first[2]!.sig, "hex"));
    expect(verifyInclusion(p.index, p.treeSize, leaf, p.proof.map((h) => Buffer.from(h, "hex")), root)).toBe(true);
  });

  it("refuses UPDATE and DELETE to the application role and, through the trigger, to the owner", async () => {
    await expect(db.tenantTx("default", (q) => q.query("UPDATE ledger.entries SET principal = 'x'"))).rejects.toThrow(/permission denied/);
    await expect(db.tenantTx("default", (q) => q.query("DELETE FROM ledger.nonces"))).rejects.toThrow(/permission denied/);
    await expect(db.adminTx((q) => q.query("UPDATE ledger.entries SET principal = 'x'"))).rejects.toThrow(/append-only: UPDATE refused/);
    await expect(db.adminTx((q) => q.query("DELETE FROM ledger.checkpoints"))).rejects.toThrow(/append-only: DELETE refused/);
    await expect(db.adminTx((q) => q.query("TRUNCATE ledger.nodes"))).rejects.toThrow(/append-only: TRUNCATE refused/);
    expect((await store.list("default")).length).toBe(6);
  });
});
