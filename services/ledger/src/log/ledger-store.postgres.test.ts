import { generateKeyPairSync } from "node:crypto";
import { chainHash, chpFloat, contentHash, createPostgresDb, type Db } from "@chaos-core/kit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../../test/support/postgres.js";
import { openCheckpoint, parseVerifierKey } from "./checkpoint.js";
import { createLedgerStore, type LedgerSigningKey, type LedgerStore } from "./ledger-store.js";
import { hashLeaf, verifyConsistency, verifyInclusion } from "./merkle.js";
import { APPEND_ONLY_TABLES, migrateLedger } from "./migrations.js";
import { verifyExport, verifyStoredLedger } from "./verify.js";

let database: TestDatabase;
let db: Db;
let admin: pg.Client;
let store: LedgerStore;
const { privateKey, publicKey } = generateKeyPairSync("ed25519");
const key: LedgerSigningKey = { privateKey, publicKey };

let tenantCounter = 0;
/** Each test writes its own tenant's log, so tests never see each other's entries. */
const newTenant = (): string => `t${++tenantCounter}-${process.pid}`;

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_ledger");
  db = createPostgresDb({ connectionString: database.url });
  expect(await migrateLedger(db)).toEqual(["0001_audit_log", "0002_spend_requests", "0003_webhooks", "0004_sequence_then_integrate", "0005_sequence_rows", "0006_webhook_checkpoints"]);
  expect(await migrateLedger(db)).toEqual([]);
  admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  store = createLedgerStore(db, { key });
});

afterAll(async () => {
  await admin?.end();
  await db?.close();
  await database?.drop();
});

async function appendMany(tenant: string, n: number, concurrent = false, s: LedgerStore = store) {
  const make = (i: number) => s.append(tenant, { session: "sess-1", principal: "agent@example.com", event: { kind: "decision", i } });
  if (concurrent) return Promise.all(Array.from({ length: n }, (_, i) => make(i)));
  const out = [];
  for (let i = 0; i < n; i++) out.push(await make(i));
  return out;
}

async function exportText(tenant: string): Promise<string> {
  let text = "";
  for await (const line of store.exportLedger(tenant)) text += line;
  return text;
}

/** Runs `fn` with the append-only trigger of `table` off, as the owner would, then turns it back on. */
async function withTriggerDisabled(table: string, fn: () => Promise<unknown>): Promise<void> {
  await admin.query(`ALTER TABLE ledger.${table} DISABLE TRIGGER ${table}_append_only`);
  try {
    await fn();
  } finally {
    await admin.query(`ALTER TABLE ledger.${table} ENABLE TRIGGER ${table}_append_only`);
  }
}

describe("ledger store on Postgres", () => {
  it("appends a hash chain that verifies with only the public key, live and exported", async () => {
    const tenant = newTenant();
    const floaty = await store.append(tenant, {
      session: "s",
      principal: "p",
      event: { notional: chpFloat(100), confidence: 0.55, count: 3, big: 12345678901234567890n, text: "naïve — ünïcode" },
    });
    const rest = await appendMany(tenant, 9);
    const all = [floaty, ...rest];
    expect(all.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(all[0]!.prev_sig).toBe("");
    for (let i = 1; i < all.length; i++) expect(all[i]!.prev_sig).toBe(all[i - 1]!.sig);
    expect(floaty.content_hash).toBe(contentHash(floaty.event));
    expect(floaty.ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    // Durable on resolve: another connection already sees the committed row.
    const seen = await admin.query("SELECT event::text AS event FROM ledger.entries WHERE tenant_id = $1 AND seq = 1", [tenant]);
    expect(seen.rows[0].event).toBe('{"big":12345678901234567890,"confidence":0.55,"count":3,"notional":100.0,"text":"naïve — ünïcode"}');

    const listed = await store.list(tenant, { afterSeq: 3, limit: 4 });
    expect(listed.map((e) => e.seq)).toEqual([4, 5, 6, 7]);
    expect(listed[0]).toEqual({ ...rest[2], treeSize: undefined, event: { kind: "decision", i: 2 } } as unknown);

    const vkey = store.verifierKey(tenant);
    expect(vkey.startsWith(`chaos-core/${tenant}+`)).toBe(true);
    const live = await verifyStoredLedger(store, tenant, vkey);
    expect(live).toMatchObject({ ok: true, entries: 10, verifiedSize: 10, tenant, origin: `chaos-core/${tenant}` });
    const exported = await verifyExport(await exportText(tenant), vkey);
    expect(exported).toMatchObject({ ok: true, entries: 10, verifiedSize: 10 });
    expect(exported.root).toBe(live.root);

    const cp = await store.latestCheckpoint(tenant);
    expect(cp?.size).toBe(10);
    expect(openCheckpoint(cp!.note, [parseVerifierKey(vkey)]).root.toString("base64")).toBe(live.root);
    expect(await store.chainStatus(tenant)).toMatchObject({ ok: true, size: 10, checked: 10, checkpoint: { size: 10, rootMatchesTree: true } });

    // Another key does not verify it.
    const other = generateKeyPairSync("ed25519").publicKey;
    const wrong = await verifyStoredLedger(store, tenant, other);
    expect(wrong.ok).toBe(false);
    expect(wrong.failure?.check).toBe("checkpoint_signature");
  });

  it("refuses events that are not JSON objects before they reach a batch", async () => {
    const tenant = newTenant();
    await expect(store.append(tenant, { session: "s", principal: "p", event: [] as unknown as Record<string, unknown> })).rejects.toThrow(/JSON object/);
    await expect(store.append(tenant, { session: "s", principal: "p", event: { x: Number.NaN } })).rejects.toThrow(/not a JSON number/);
    await expect(store.append(tenant, { session: "s\u0000", principal: "p", event: {} })).rejects.toThrow(/NUL/);
    await expect(store.append("Bad Tenant", { session: "s", principal: "p", event: {} })).rejects.toThrow(/tenant/);
    expect((await appendMany(tenant, 1))[0]!.seq).toBe(1);
  });

  it("group-commits 64 concurrent appends into consecutive seqs with fewer transactions", async () => {
    const tenant = newTenant();
    const before = store.stats();
    const entries = await appendMany(tenant, 64, true);
    const after = store.stats();
    expect(entries.map((e) => e.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: 64 }, (_, i) => i + 1));
    expect(new Set(entries.map((e) => e.sig)).size).toBe(64);
    expect(after.submitted - before.submitted).toBe(64);
    expect(after.batches - before.batches).toBeLessThan(64);
    expect(after.failedBatches).toBe(before.failedBatches);
    expect((await verifyStoredLedger(store, tenant, store.verifierKey(tenant))).ok).toBe(true);
  });

  it("sequence_rows writes a batch only when its seqs follow the head, and keeps each event's text byte for byte", async () => {
    const tenant = newTenant();
    const [first] = await appendMany(tenant, 1);
    const head = async () => (await admin.query("SELECT size, last_sig FROM ledger.heads WHERE tenant_id = $1", [tenant])).rows[0];
    const before = await head();
    const row = (seq: number, event: string) => `{"seq":${seq},"ts":"t","session":"s","principal":"p","event":${event},"content_hash":"h","prev_sig":"","sig":"x${seq}"}`;
    // A gap inside the batch (2, 4, 3 after head 1): refused whole, the head where it was.
    await expect(
      admin.query("SELECT ledger.sequence_rows($1, $2, 1, $3)", [tenant, `[${row(2, "{}")},${row(4, "{}")},${row(3, "{}")}]`, first!.sig]),
    ).rejects.toMatchObject({ code: "22023", message: expect.stringMatching(/seqs must follow the head/) });
    await expect(admin.query("SELECT ledger.sequence_rows($1, '[]', 1, $2)", [tenant, first!.sig])).rejects.toMatchObject({ code: "22023" });
    expect(await head()).toEqual(before);
    // A head that moved: nothing written, 0 answered.
    expect((await admin.query("SELECT ledger.sequence_rows($1, $2, 0, '') AS n", [tenant, `[${row(1, "{}")}]`])).rows[0].n).toBe("0");
    // Written: the event's text exactly as sent (Postgres keeps a json value's text).
    const text = '{"a":[1,2.50,"\\u00e9 \\"q\\""],"b":{"c":null}}';
    expect((await admin.query("SELECT ledger.sequence_rows($1, $2, 1, $3) AS n", [tenant, `[${row(2, text)}]`, first!.sig])).rows[0].n).toBe("1");
    expect((await admin.query("SELECT event::text AS t FROM ledger.entries WHERE tenant_id = $1 AND seq = 2", [tenant])).rows[0].t).toBe(text);
  });

  it("two replicas appending to one tenant interleave without gaps or forks", async () => {
    const tenant = newTenant();
    const db2 = createPostgresDb({ connectionString: database.url });
    try {
      const replica = createLedgerStore(db2, { key });
      const rounds = await Promise.all(
        Array.from({ length: 5 }, async () => [...(await appendMany(tenant, 10, true, store)), ...(await appendMany(tenant, 10, true, replica))]),
      );
      const seqs = rounds.flat().map((e) => e.seq).sort((a, b) => a - b);
      expect(seqs).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
      const report = await verifyStoredLedger(store, tenant, store.verifierKey(tenant));
      expect(report).toMatchObject({ ok: true, entries: 100, verifiedSize: 100 });
      expect(replica.stats().batches).toBeGreaterThan(0);
    } finally {
      await db2.close();
    }
  });

  it("the application role can neither UPDATE nor DELETE nor TRUNCATE the append-only tables", async () => {
    const tenant = newTenant();
    await appendMany(tenant, 2);
    for (const sql of [
      "UPDATE ledger.entries SET principal = 'x' WHERE tenant_id = $1",
      "DELETE FROM ledger.entries WHERE tenant_id = $1",
      "UPDATE ledger.checkpoints SET note = 'x' WHERE tenant_id = $1",
      "DELETE FROM ledger.nodes WHERE tenant_id = $1",
      "DELETE FROM ledger.nonces WHERE tenant_id = $1",
      "UPDATE ledger.spend_requests SET arguments = '{}' WHERE tenant_id = $1",
      "DELETE FROM ledger.spend_requests WHERE tenant_id = $1",
    ]) {
      await expect(db.tenantTx(tenant, (q) => q.query(sql, [tenant])), sql).rejects.toMatchObject({ code: "42501" });
    }
    await expect(db.tenantTx(tenant, (q) => q.query("TRUNCATE ledger.entries"))).rejects.toMatchObject({ code: "42501" });
    // The one-round-trip append function scopes itself to the tenant it is given: not callable
    // by the application role, which could otherwise name another tenant.
    await expect(
      db.tenantTx(tenant, (q) =>
        q.query("SELECT ledger.sequence_batch('other', ARRAY[1]::bigint[], ARRAY['t'], ARRAY['s'], ARRAY['p'], ARRAY['{}'], ARRAY['h'], ARRAY[''], ARRAY['x'], 0, '')"),
      ),
    ).rejects.toMatchObject({ code: "42501" });
    await expect(
      db.tenantTx(tenant, (q) =>
        q.query(`SELECT ledger.sequence_rows('other', '[{"seq":1,"ts":"t","session":"s","principal":"p","event":{},"content_hash":"h","prev_sig":"","sig":"x"}]', 0, '')`),
      ),
    ).rejects.toMatchObject({ code: "42501" });
  });

  it("even the owner (a superuser) is stopped by the trigger", async () => {
    const tenant = newTenant();
    await appendMany(tenant, 2);
    await store.integrate(tenant); // so nodes and checkpoints have rows for the trigger to refuse
    await db.tenantTx(tenant, async (q) => {
      await q.query("INSERT INTO ledger.nonces (tenant_id, nonce) VALUES ($1, 'n1')", [tenant]);
      await q.query(
        `INSERT INTO ledger.spend_requests (tenant_id, request_seq, kind, policy_name, args_hash, arguments, principal, session, created_at)
         VALUES ($1, 1, 'spend', 'equity', 'h', '{}', 'p', 's', now())`,
        [tenant],
      );
    });
    for (const table of APPEND_ONLY_TABLES) {
      await expect(admin.query(`UPDATE ledger.${table} SET tenant_id = tenant_id WHERE tenant_id = $1`, [tenant])).rejects.toThrow(
        `ledger.${table} is append-only: UPDATE refused`,
      );
      await expect(admin.query(`DELETE FROM ledger.${table} WHERE tenant_id = $1`, [tenant])).rejects.toThrow(
        `ledger.${table} is append-only: DELETE refused`,
      );
      await expect(admin.query(`TRUNCATE ledger.${table}`)).rejects.toThrow(`ledger.${table} is append-only: TRUNCATE refused`);
    }
    const count = await admin.query("SELECT count(*)::int AS n FROM ledger.entries WHERE tenant_id = $1", [tenant]);
    expect(count.rows[0].n).toBe(2);
  });

  describe("tampering by the owner with the trigger disabled", () => {
    it("an edited event fails verify at exactly that seq (content_hash)", async () => {
      const tenant = newTenant();
      await appendMany(tenant, 12, true);
      await withTriggerDisabled("entries", () =>
        admin.query(`UPDATE ledger.entries SET event = '{"kind":"decision","i":999}' WHERE tenant_id = $1 AND seq = 7`, [tenant]),
      );
      const report = await verifyStoredLedger(store, tenant, store.verifierKey(tenant));
      expect(report.ok).toBe(false);
      expect(report.failure).toMatchObject({ seq: 7, check: "content_hash" });
      expect((await verifyExport(await exportText(tenant), store.verifierKey(tenant))).failure).toMatchObject({ seq: 7, check: "content_hash" });
      expect(await store.chainStatus(tenant)).toMatchObject({ ok: false, firstBad: { seq: 7, check: "content_hash" } });
    });

    it("an edited timestamp fails verify at exactly that seq (sig)", async () => {
      const tenant = newTenant();
      await appendMany(tenant, 12, true);
      await withTriggerDisabled("entries", () =>
        admin.query("UPDATE ledger.entries SET ts = '2020-01-01T00:00:00.000Z' WHERE tenant_id = $1 AND seq = 5", [tenant]),
      );
      const report = await verifyStoredLedger(store, tenant, store.verifierKey(tenant));
      expect(report.failure).toMatchObject({ seq: 5, check: "sig" });
    });

    it("an edited sig fails verify at exactly that seq, inside a multi-entry commit", async () => {
      const tenant = newTenant();
      await appendMany(tenant, 12, true);
      const sig = "0".repeat(64);
      await withTriggerDisabled("entries", () => admin.query("UPDATE ledger.entries SET sig = $2 WHERE tenant_id = $1 AND seq = 9", [tenant, sig]));
      const report = await verifyStoredLedger(store, tenant, store.verifierKey(tenant));
      expect(report.failure).toMatchObject({ seq: 9, check: "sig" });
    });

    it("a history rewritten and re-chained fails at the first signed root it no longer matches", async () => {
      const tenant = newTenant();
      // One commit and one integration (one signed checkpoint) per entry.
      for (let i = 0; i < 10; i++) {
        await appendMany(tenant, 1);
        await store.integrate(tenant);
      }
      const rows = (await admin.query("SELECT seq, ts, session, principal, event::text AS event, sig FROM ledger.entries WHERE tenant_id = $1 ORDER BY seq", [tenant])).rows as Array<
        Record<string, string>
      >;
      // The attacker changes entry 6 and recomputes every hash after it: the chain is valid again.
      let prev = rows[4]!.sig!;
      await withTriggerDisabled("entries", async () => {
        for (const row of rows.slice(5)) {
          const seq = Number(row.seq);
          const event = seq === 6 ? { kind: "decision", i: 5, forged: true } : (JSON.parse(row.event!) as Record<string, unknown>);
          const content = contentHash(event);
          const sig = chainHash(prev, { seq, ts: row.ts, tenant, session: row.session, principal: row.principal, event, content_hash: content });
          await admin.query(
            "UPDATE ledger.entries SET event = $3::json, content_hash = $4, prev_sig = $5, sig = $6 WHERE tenant_id = $1 AND seq = $2",
            [tenant, seq, JSON.stringify(event), content, prev, sig],
          );
          prev = sig;
        }
      });
      const report = await verifyStoredLedger(store, tenant, store.verifierKey(tenant));
      expect(report.failure).toMatchObject({ seq: 6, check: "checkpoint_root", range: { from: 6, to: 6 } });
      expect(report.verifiedSize).toBe(5);
      expect((await verifyExport(await exportText(tenant), store.verifierKey(tenant))).failure).toMatchObject({ seq: 6, check: "checkpoint_root" });
    });

    it("entries removed at the tail are missing from the signed size", async () => {
      const tenant = newTenant();
      await appendMany(tenant, 6);
      await store.integrate(tenant);
      await withTriggerDisabled("entries", () => admin.query("DELETE FROM ledger.entries WHERE tenant_id = $1 AND seq > 4", [tenant]));
      const report = await verifyStoredLedger(store, tenant, store.verifierKey(tenant));
      expect(report.failure).toMatchObject({ seq: 5, check: "missing_entries" });
    });
  });

  it("inclusion and consistency proofs from the store verify against signed checkpoints; corrupted ones fail", async () => {
    const tenant = newTenant();
    for (const n of [1, 2, 5, 1, 8, 3, 13, 4]) {
      await appendMany(tenant, n, true);
      await store.integrate(tenant);
    }
    const v = [parseVerifierKey(store.verifierKey(tenant))];
    const sizes: number[] = [];
    for await (const r of store.readLedger(tenant)) if (r.type === "checkpoint") sizes.push(r.checkpoint.size);
    expect(sizes.at(-1)).toBe(37);

    for (const size of sizes) {
      const cp = await store.checkpointAt(tenant, size);
      const root = openCheckpoint(cp!.note, v).root;
      for (let seq = 1; seq <= size; seq++) {
        const p = await store.inclusionProof(tenant, { seq }, size);
        const entry = (await store.list(tenant, { afterSeq: seq - 1, limit: 1 }))[0]!;
        const leaf = hashLeaf(Buffer.from(entry.sig, "hex"));
        expect(p.leafHash).toBe(leaf.toString("hex"));
        const proof = p.proof.map((h) => Buffer.from(h, "hex"));
        expect(verifyInclusion(p.index, p.treeSize, leaf, proof, root), `${seq} in ${size}`).toBe(true);
        if (proof.length > 0) {
          proof[0]![5]! ^= 0x20;
          expect(verifyInclusion(p.index, p.treeSize, leaf, proof, root)).toBe(false);
        }
      }
    }
    const latest = await store.inclusionProof(tenant, { index: 0 });
    expect(latest.treeSize).toBe(37);

    for (const from of sizes) {
      for (const to of sizes.filter((s) => s >= from)) {
        const p = await store.consistencyProof(tenant, from, to);
        const r1 = openCheckpoint(p.fromCheckpoint!.note, v).root;
        const r2 = openCheckpoint(p.toCheckpoint.note, v).root;
        const proof = p.proof.map((h) => Buffer.from(h, "hex"));
        expect(verifyConsistency(from, to, r1, r2, proof), `${from}→${to}`).toBe(true);
        if (proof.length > 0) {
          proof[proof.length - 1]![0]! ^= 0x01;
          expect(verifyConsistency(from, to, r1, r2, proof)).toBe(false);
        }
      }
    }
    await expect(store.inclusionProof(tenant, { seq: 38 })).rejects.toMatchObject({ code: "not_found" });
    await expect(store.inclusionProof(tenant, { seq: 1 }, 4)).rejects.toMatchObject({ code: "not_found" }); // no checkpoint at 4
  });

  it("keeps tenants apart: tenant B sees none of A's entries, checkpoints or nodes", async () => {
    const a = newTenant();
    const b = newTenant();
    await appendMany(a, 3);
    expect(await store.list(b)).toEqual([]);
    expect(await store.latestCheckpoint(b)).toBeNull();
    await expect(store.inclusionProof(b, { seq: 1 })).rejects.toMatchObject({ code: "not_found" });
    const counts = await db.tenantTx(b, async (q) => {
      const out: Record<string, unknown> = {};
      for (const t of ["entries", "nodes", "checkpoints", "heads"]) {
        out[t] = Number((await q.query<{ n: string }>(`SELECT count(*) AS n FROM ledger.${t}`)).rows[0]!.n);
      }
      return out;
    });
    expect(counts).toEqual({ entries: 0, nodes: 0, checkpoints: 0, heads: 0 });
    await expect(
      db.tenantTx(b, (q) =>
        q.query("INSERT INTO ledger.entries (tenant_id, seq, ts, session, principal, event, content_hash, prev_sig, sig) VALUES ($1, 99, '', '', '', '{}', '', '', '')", [a]),
      ),
    ).rejects.toMatchObject({ code: "42501" });
    await appendMany(b, 1);
    expect((await store.list(b)).map((e) => [e.tenant, e.seq])).toEqual([[b, 1]]);
  });

  describe("hooks", () => {
    it("a hook's insert commits together with its entry, which records the hook's event", async () => {
      const tenant = newTenant();
      await appendMany(tenant, 2);
      const entry = await store.append(tenant, {
        session: "s",
        principal: "p",
        event: { kind: "placeholder" },
        hook: async (tx, ctx) => {
          await tx.query("INSERT INTO ledger.nonces (tenant_id, nonce, entry_seq) VALUES ($1, 'nonce-1', $2)", [ctx.tenant, ctx.seq]);
          return { kind: "receipt.consumed", nonce: "nonce-1", seq: ctx.seq };
        },
      });
      expect(entry.seq).toBe(3);
      expect(entry.event).toEqual({ kind: "receipt.consumed", nonce: "nonce-1", seq: 3 });
      const nonce = await admin.query("SELECT entry_seq FROM ledger.nonces WHERE tenant_id = $1 AND nonce = 'nonce-1'", [tenant]);
      expect(Number(nonce.rows[0].entry_seq)).toBe(3);
      expect((await verifyStoredLedger(store, tenant, store.verifierKey(tenant))).ok).toBe(true);
    });

    it("a throwing hook rejects only its own append, and its writes are rolled back", async () => {
      const tenant = newTenant();
      const before = store.stats().batches;
      const results = await Promise.allSettled([
        store.append(tenant, { session: "s", principal: "p", event: { n: 1 } }),
        store.append(tenant, {
          session: "s",
          principal: "p",
          event: {},
          hook: async (tx) => {
            await tx.query("INSERT INTO ledger.nonces (tenant_id, nonce) VALUES ($1, 'burned')", [tenant]);
            throw new Error("replayed_receipt");
          },
        }),
        store.append(tenant, {
          session: "s",
          principal: "p",
          event: {},
          // A hook whose SQL fails leaves the transaction aborted; the savepoint restores it.
          hook: async (tx) => {
            await tx.query("INSERT INTO ledger.nonces (tenant_id, nonce) VALUES ($1, 'dup'), ($1, 'dup')", [tenant]);
            return {};
          },
        }),
        store.append(tenant, { session: "s", principal: "p", event: { n: 2 } }),
      ]);
      expect(store.stats().batches - before).toBe(1);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled"]);
      expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ message: "replayed_receipt" });
      expect((results[3] as PromiseFulfilledResult<{ seq: number }>).value.seq).toBe(2);
      const nonces = await admin.query("SELECT count(*)::int AS n FROM ledger.nonces WHERE tenant_id = $1", [tenant]);
      expect(nonces.rows[0].n).toBe(0);
      expect((await verifyStoredLedger(store, tenant, store.verifierKey(tenant))).ok).toBe(true);
    });

    it("a failing commit rejects every append of the batch, hook writes included, and the next flush starts clean", async () => {
      const tenant = newTenant();
      await appendMany(tenant, 2);
      // Someone wrote seq 3 around the store: the batch's insert conflicts and must fail closed.
      await admin.query(
        "INSERT INTO ledger.entries (tenant_id, seq, ts, session, principal, event, content_hash, prev_sig, sig) VALUES ($1, 3, '', '', '', '{}', '', '', '')",
        [tenant],
      );
      const results = await Promise.allSettled([
        store.append(tenant, { session: "s", principal: "p", event: { n: 3 } }),
        store.append(tenant, {
          session: "s",
          principal: "p",
          event: {},
          hook: async (tx, ctx) => {
            await tx.query("INSERT INTO ledger.nonces (tenant_id, nonce, entry_seq) VALUES ($1, 'lost', $2)", [ctx.tenant, ctx.seq]);
            return { nonce: "lost" };
          },
        }),
      ]);
      expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
      const nonces = await admin.query("SELECT count(*)::int AS n FROM ledger.nonces WHERE tenant_id = $1", [tenant]);
      expect(nonces.rows[0].n).toBe(0);

      await withTriggerDisabled("entries", () => admin.query("DELETE FROM ledger.entries WHERE tenant_id = $1 AND seq = 3", [tenant]));
      const next = await appendMany(tenant, 2, true);
      expect(next.map((e) => e.seq).sort()).toEqual([3, 4]);
      expect((await verifyStoredLedger(store, tenant, store.verifierKey(tenant))).ok).toBe(true);
    });
  });
});
