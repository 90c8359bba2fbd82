import { generateKeyPairSync } from "node:crypto";
import { createPostgresDb, type Db } from "@chaos-core/kit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../../test/support/postgres.js";
import { openCheckpoint, parseVerifierKey } from "./checkpoint.js";
import { createLedgerReader } from "./ledger-reader.js";
import { createLedgerStore, type LedgerStore } from "./ledger-store.js";
import { hashLeaf, verifyInclusion } from "./merkle.js";
import { migrateLedger } from "./migrations.js";
import { verifyStoredLedger } from "./verify.js";

// Sequence, then integrate: an append is acknowledged once its entry and chain link commit;
// the integrator signs it into a checkpoint on its schedule, or at once when a proof asks.
let database: TestDatabase;
let db: Db;
let admin: pg.Client;
const key = generateKeyPairSync("ed25519");
const stores: LedgerStore[] = [];
let n = 0;
const newTenant = (): string => `i${++n}-${process.pid}`;

function store(integration: Parameters<typeof createLedgerStore>[1]["integration"] = {}): LedgerStore {
  const s = createLedgerStore(db, { key, integration: { autoStart: false, ...integration } });
  stores.push(s);
  return s;
}

const append = (s: LedgerStore, tenant: string, i: number) => s.append(tenant, { session: "s", principal: "p", event: { kind: "decision", i } });

/** Polls `check` until it holds (the integrator's timer decides when; this only waits for it). */
async function eventually(check: () => Promise<boolean>, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_ledger_integrator");
  db = createPostgresDb({ connectionString: database.url });
  await migrateLedger(db);
  admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
});

afterAll(async () => {
  for (const s of stores) await s.close().catch(() => undefined);
  await admin?.end();
  await db?.close();
  await database?.drop();
});

describe("the integrator", () => {
  it("signs a just-appended entry into a checkpoint on its own schedule, with no one asking", async () => {
    const s = store({ intervalMs: 50 });
    // A reader has no integrator: what it sees is what the appending store's integrator did.
    const reader = createLedgerReader(db);
    const tenant = newTenant();
    const entry = await append(s, tenant, 1);
    expect(await reader.size(tenant)).toBe(1); // durable when acknowledged: sequenced
    await eventually(async () => ((await reader.latestCheckpoint(tenant))?.size ?? 0) >= entry.seq);
    expect(s.integrationStats()).toMatchObject({ failures: 0 });
    expect(s.integrationStats().passes).toBeGreaterThan(0);

    // Bursts are integrated in batches: far fewer signed checkpoints than appends.
    await Promise.all(Array.from({ length: 200 }, (_, i) => append(s, tenant, i)));
    await eventually(async () => ((await reader.latestCheckpoint(tenant))?.size ?? 0) === 201);
    const checkpoints = (await admin.query("SELECT count(*)::int AS n FROM ledger.checkpoints WHERE tenant_id = $1", [tenant])).rows[0].n as number;
    expect(checkpoints).toBeLessThan(201);
    expect(await verifyStoredLedger(reader, tenant, s.verifierKey(tenant))).toMatchObject({ ok: true, entries: 201, verifiedSize: 201 });
  });

  it("integrates as soon as batchEntries wait, without waiting for the interval", async () => {
    const s = store({ intervalMs: 600_000, batchEntries: 10 });
    const reader = createLedgerReader(db);
    const tenant = newTenant();
    await Promise.all(Array.from({ length: 10 }, (_, i) => append(s, tenant, i)));
    await eventually(async () => ((await reader.latestCheckpoint(tenant))?.size ?? 0) === 10);
    // Below the threshold, the (here: ten-minute) interval is what it waits for.
    await append(s, tenant, 11);
    await new Promise((r) => setTimeout(r, 200));
    expect((await reader.latestCheckpoint(tenant))?.size).toBe(10);
  });

  it("proves an entry asked for right after its append, by integrating it then", async () => {
    const s = store({ intervalMs: 600_000 });
    const tenant = newTenant();
    const entries = await Promise.all(Array.from({ length: 5 }, (_, i) => append(s, tenant, i)));
    const p = await s.inclusionProof(tenant, { seq: entries[3]!.seq });
    expect(p.treeSize).toBe(5);
    const root = openCheckpoint(p.checkpoint.note, [parseVerifierKey(s.verifierKey(tenant))]).root;
    const leaf = hashLeaf(Buffer.from(entries[3]!.sig, "hex"));
    expect(verifyInclusion(p.index, p.treeSize, leaf, p.proof.map((h) => Buffer.from(h, "hex")), root)).toBe(true);
    // The newest checkpoint, too, covers what was appended before it was asked for.
    await append(s, tenant, 6);
    expect((await s.latestCheckpoint(tenant))?.size).toBe(6);
    await expect(s.inclusionProof(tenant, { seq: 7 })).rejects.toMatchObject({ code: "not_found" });
  });

  it("answers 'not yet integrated' (unavailable) while another integrator holds the tree, and proves once it lets go", async () => {
    const s = store({ intervalMs: 600_000 });
    const tenant = newTenant();
    await append(s, tenant, 1);
    await s.integrate(tenant);
    const late = await append(s, tenant, 2);
    // Another replica's integrator mid-pass: the tree row is locked.
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT 1 FROM ledger.trees WHERE tenant_id = $1 FOR UPDATE", [tenant]);
      await expect(s.inclusionProof(tenant, { seq: late.seq })).rejects.toMatchObject({
        code: "unavailable",
        message: expect.stringContaining("not yet integrated"),
      });
      // The newest checkpoint there is stays the answer meanwhile: signed, truthful, older.
      expect((await s.latestCheckpoint(tenant))?.size).toBe(1);
      await holder.query("ROLLBACK");
      expect((await s.inclusionProof(tenant, { seq: late.seq })).treeSize).toBe(2);
    } finally {
      await holder.end();
    }
  });

  it("lets one integrator at a time work on a tenant across replicas, and either one catches up on the other's entries", async () => {
    const a = store({ intervalMs: 20 });
    const db2 = createPostgresDb({ connectionString: database.url });
    try {
      const b = createLedgerStore(db2, { key, integration: { autoStart: false, intervalMs: 20 } });
      const tenant = newTenant();
      await Promise.all(Array.from({ length: 20 }, async (_, w) => {
        for (let i = 0; i < 10; i++) await append(w % 2 === 0 ? a : b, tenant, i);
      }));
      await a.drain();
      await b.drain();
      const reader = createLedgerReader(db);
      expect((await reader.latestCheckpoint(tenant))?.size).toBe(200);
      expect(await verifyStoredLedger(reader, tenant, a.verifierKey(tenant))).toMatchObject({ ok: true, verifiedSize: 200 });
      expect(a.integrationStats().failures + b.integrationStats().failures).toBe(0);
      // Only b appends now, and b's integrator is stopped (a dead replica): a's sweep finds it.
      await b.close();
      const sweeper = store({ intervalMs: 20, sweepMs: 50, autoStart: true });
      const dead = createLedgerStore(db2, { key, integration: { autoStart: false, intervalMs: 600_000 } });
      await append(dead, tenant, 201);
      await eventually(async () => (await reader.latestCheckpoint(tenant))?.size === 201);
      expect(sweeper.integrationStats().integrated).toBeGreaterThan(0);
      await dead.close().catch(() => undefined);
    } finally {
      await db2.close();
    }
  });

  it("refuses to sign over an entry that does not link to the one before, and the read names it", async () => {
    const s = store({ intervalMs: 600_000 });
    const tenant = newTenant();
    await Promise.all(Array.from({ length: 4 }, (_, i) => append(s, tenant, i)));
    await admin.query("ALTER TABLE ledger.entries DISABLE TRIGGER entries_append_only");
    try {
      await admin.query("UPDATE ledger.entries SET prev_sig = $2 WHERE tenant_id = $1 AND seq = 3", [tenant, "0".repeat(64)]);
    } finally {
      await admin.query("ALTER TABLE ledger.entries ENABLE TRIGGER entries_append_only");
    }
    await expect(s.integrate(tenant)).rejects.toThrow(/entry 3 .* does not link to entry 2/);
    expect(await createLedgerReader(db).latestCheckpoint(tenant)).toBeNull();
    const report = await verifyStoredLedger(s, tenant, s.verifierKey(tenant));
    expect(report.failure).toMatchObject({ seq: 3, check: "prev_sig" });
  });
});
