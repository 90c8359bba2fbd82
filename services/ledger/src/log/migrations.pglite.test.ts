import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPgliteDb, migrate, type Db } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openCheckpoint, parseVerifierKey, signCheckpoint } from "./checkpoint.js";
import { canonicalEvent, chainEntry, type LedgerEntry } from "./entry.js";
import { createLedgerReader } from "./ledger-reader.js";
import { createLedgerStore, type LedgerStore } from "./ledger-store.js";
import { TreeFrontier, hashLeaf, verifyInclusion } from "./merkle.js";
import { LEDGER_MIGRATIONS, LEDGER_SCHEMA, migrateLedger } from "./migrations.js";
import { verifyExport, verifyStoredLedger } from "./verify.js";

// The embedded database standalone runs on: the same migrations and SQL as Postgres.
let db: Db;
let store: LedgerStore;
let dataDir: string;

beforeAll(async () => {
  // A data directory starts much faster than an in-memory PGlite.
  dataDir = await mkdtemp(join(tmpdir(), "chaoscore-ledger-"));
  db = await createPgliteDb({ dataDir });
  expect(await migrateLedger(db)).toEqual(["0001_audit_log", "0002_spend_requests", "0003_webhooks", "0004_sequence_then_integrate", "0005_sequence_rows", "0006_webhook_checkpoints"]);
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

/**
 * Writes `commits` the way the store did before 0004: every commit wrote its entries, the nodes
 * they completed, a signed checkpoint, and the head with the tree's border.
 */
async function writePerCommit(db: Db, tenant: string, commits: number[], signer: { name: string; privateKey: KeyObject; publicKey: KeyObject }) {
  const tree = new TreeFrontier();
  let prev = "";
  let seq = 0;
  const all: LedgerEntry[] = [];
  for (const size of commits) {
    await db.tenantTx(tenant, async (q) => {
      for (let i = 0; i < size; i++) {
        const c = canonicalEvent({ kind: "old", seq: seq + 1 });
        const e = chainEntry(prev, { seq: ++seq, ts: new Date().toISOString(), tenant, session: "s", principal: "p", event: c.event, content_hash: c.hash }, c.text);
        await q.query(
          "INSERT INTO ledger.entries (tenant_id, seq, ts, session, principal, event, content_hash, prev_sig, sig) VALUES ($1, $2, $3, $4, $5, $6::json, $7, $8, $9)",
          [tenant, e.seq, e.ts, e.session, e.principal, c.text, e.content_hash, e.prev_sig, e.sig],
        );
        const nodes: Array<[number, number, Buffer]> = [];
        tree.append(hashLeaf(Buffer.from(e.sig, "hex")), (id, hash) => {
          if (id.level > 0) nodes.push([id.level, id.index, hash]);
        });
        for (const [level, idx, hash] of nodes) {
          await q.query("INSERT INTO ledger.nodes (tenant_id, level, idx, hash) VALUES ($1, $2, $3, $4)", [tenant, level, idx, hash]);
        }
        prev = e.sig;
        all.push(e);
      }
      const note = signCheckpoint({ origin: signer.name, size: tree.size, root: tree.root() }, signer);
      await q.query("INSERT INTO ledger.checkpoints (tenant_id, size, root, note) VALUES ($1, $2, $3, $4)", [tenant, tree.size, tree.root(), note]);
      await q.query(
        `INSERT INTO ledger.heads (tenant_id, size, last_sig, frontier) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant_id) DO UPDATE SET size = $2, last_sig = $3, frontier = $4`,
        [tenant, tree.size, prev, tree.hashes.map((h) => h.toString("hex")).join("")],
      );
    });
  }
  return all;
}

describe("upgrading a ledger written before sequence-then-integrate (0004)", () => {
  it("keeps the old log verifiable, integrates new appends on top of it, and proves old and new entries", async () => {
    const dir = await mkdtemp(join(tmpdir(), "chaoscore-ledger-upgrade-"));
    const old = await createPgliteDb({ dataDir: dir });
    try {
      // A database at 0003, with a log in the per-commit format.
      expect(await migrate(old, LEDGER_SCHEMA, LEDGER_MIGRATIONS.slice(0, 3))).toEqual(["0001_audit_log", "0002_spend_requests", "0003_webhooks"]);
      const { privateKey, publicKey } = generateKeyPairSync("ed25519");
      const before = await writePerCommit(old, "default", [1, 2, 4, 1], { name: "upgrade/default", privateKey, publicKey });
      expect(await migrateLedger(old)).toEqual(["0004_sequence_then_integrate", "0005_sequence_rows", "0006_webhook_checkpoints"]);

      const upgraded = createLedgerStore(old, { key: { name: "upgrade/{tenant}", privateKey, publicKey }, integration: { autoStart: false } });
      try {
        const vkey = upgraded.verifierKey("default");
        const reader = createLedgerReader(old, { name: "upgrade/{tenant}" });
        expect(await verifyStoredLedger(reader, "default", vkey)).toMatchObject({ ok: true, entries: 8, verifiedSize: 8 });
        const after = await Promise.all(Array.from({ length: 5 }, (_, i) => upgraded.append("default", { session: "s", principal: "p", event: { i } })));
        expect(after.map((e) => e.seq).sort((a, b) => a - b)).toEqual([9, 10, 11, 12, 13]);
        expect(after.find((e) => e.seq === 9)!.prev_sig).toBe(before[7]!.sig);
        await upgraded.integrate("default");
        expect(await verifyStoredLedger(reader, "default", vkey)).toMatchObject({ ok: true, entries: 13, verifiedSize: 13 });
        const v = [parseVerifierKey(vkey)];
        for (const e of [before[2]!, before[7]!, ...after]) {
          const p = await upgraded.inclusionProof("default", { seq: e.seq });
          const root = openCheckpoint(p.checkpoint.note, v).root;
          expect(verifyInclusion(p.index, p.treeSize, hashLeaf(Buffer.from(e.sig, "hex")), p.proof.map((h) => Buffer.from(h, "hex")), root), `seq ${e.seq}`).toBe(true);
        }
        // Consistent with a checkpoint the old code signed.
        const c = await upgraded.consistencyProof("default", 3);
        expect(c.fromCheckpoint?.size).toBe(3);
        expect(c.to).toBe(13);
      } finally {
        await upgraded.close();
      }
    } finally {
      await old.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
