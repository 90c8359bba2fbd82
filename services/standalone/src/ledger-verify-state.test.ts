import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresDb, type Db } from "@chaos-core/kit";
import { canonicalEvent, chainEntry, createLedgerStore, migrateLedger, type LedgerEntry, type LedgerStore } from "@chaos-core/ledger";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";
import { runLedgerCommand } from "./ledger-command.js";

/**
 * A verifier that remembers (docs/ledger.md, "A verifier that remembers"), tried as an attacker
 * with the database's superuser would: edit one entry of tenant acme, re-chain every entry after
 * it (and the head row), and delete the tenant's checkpoints and tree nodes. The chain then
 * verifies and nothing in the database disagrees; only a checkpoint kept outside it can.
 */

let database: TestDatabase;
let db: Db;
let store: LedgerStore;
let dir: string;
const { privateKey, publicKey } = generateKeyPairSync("ed25519");

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const env = { HOME: join(dir, "home"), XDG_STATE_HOME: join(dir, "state") };
  const code = await runLedgerCommand(argv, { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) }, env });
  return { code, out, err };
}

/** The attack: entry `seq` changed, the chain after it recomputed, the head row moved along, the checkpoints and nodes deleted. */
async function rewriteAndHide(tenant: string, seq: number): Promise<void> {
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  try {
    await admin.query("SET session_replication_role = replica"); // the superuser's way past the append-only triggers
    const rows = (await admin.query("SELECT seq, ts, tenant_id, session, principal, event::text AS event FROM ledger.entries WHERE tenant_id = $1 ORDER BY seq", [tenant])).rows as Array<{
      seq: string;
      ts: string;
      tenant_id: string;
      session: string;
      principal: string;
      event: string;
    }>;
    let prev = "";
    for (const row of rows) {
      const n = Number(row.seq);
      const event = JSON.parse(row.event) as Record<string, unknown>;
      const c = canonicalEvent(n === seq ? { ...event, forged: true } : event);
      const e: LedgerEntry = chainEntry(prev, { seq: n, ts: row.ts, tenant: row.tenant_id, session: row.session, principal: row.principal, event: c.event, content_hash: c.hash }, c.text);
      if (n >= seq) await admin.query("UPDATE ledger.entries SET event = $3::json, content_hash = $4, prev_sig = $5, sig = $6 WHERE tenant_id = $1 AND seq = $2", [tenant, n, c.text, e.content_hash, e.prev_sig, e.sig]);
      prev = e.sig;
    }
    await admin.query("UPDATE ledger.heads SET last_sig = $2 WHERE tenant_id = $1", [tenant, prev]);
    await admin.query("DELETE FROM ledger.checkpoints WHERE tenant_id = $1", [tenant]);
    await admin.query("DELETE FROM ledger.nodes WHERE tenant_id = $1", [tenant]);
  } finally {
    await admin.end();
  }
}

async function truncateAndHide(tenant: string, keep: number): Promise<void> {
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  try {
    await admin.query("SET session_replication_role = replica");
    await admin.query("DELETE FROM ledger.entries WHERE tenant_id = $1 AND seq > $2", [tenant, keep]);
    await admin.query("DELETE FROM ledger.checkpoints WHERE tenant_id = $1", [tenant]);
    await admin.query("DELETE FROM ledger.nodes WHERE tenant_id = $1", [tenant]);
  } finally {
    await admin.end();
  }
}

async function appendSome(tenant: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await store.append(tenant, { session: "s", principal: "agent", event: { type: "note", i } });
  await store.drain();
}

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_ledger_verify_state");
  db = createPostgresDb({ connectionString: database.url });
  await migrateLedger(db);
  store = createLedgerStore(db, { key: { privateKey, publicKey } });
  dir = await mkdtemp(join(tmpdir(), "chaoscore-verify-state-"));
  await appendSome("acme", 25);
  await appendSome("globex", 12);
  await appendSome("initech", 8);
});

afterAll(async () => {
  await store?.close();
  await db?.close();
  await database?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("chaos-core ledger verify, remembering", () => {
  it("remembers the checkpoint it verified, then catches a rewrite whose checkpoints were deleted with it", async () => {
    const vkey = store.verifierKey("acme");
    const first = await run("verify", "--database-url", database.url, "--tenant", "acme", "--public-key", vkey);
    expect(first.code, first.out + first.err).toBe(0);
    expect(first.out).toContain("no checkpoint kept outside the database was remembered or given for this log");
    expect(first.out).toContain(`remembered checkpoint 25 in ${join(dir, "state", "chaos-core", "ledger-verify-state.json")}`);
    const state = JSON.parse(await readFile(join(dir, "state", "chaos-core", "ledger-verify-state.json"), "utf8")) as { logs: Record<string, { origin: string; tenant: string }> };
    expect(Object.values(state.logs)).toEqual([expect.objectContaining({ origin: "chaos-core/acme", tenant: "acme" })]);

    await rewriteAndHide("acme", 7);
    const caught = await run("verify", "--database-url", database.url, "--tenant", "acme", "--public-key", vkey);
    expect(caught.code).toBe(1);
    expect(caught.out).toContain("ledger NOT verified: acme (chaos-core/acme): first bad entry: seq 1 [outside_checkpoint] (somewhere in 1..25");
    expect(caught.out).toContain("the log is not consistent with the checkpoint of size 25 kept outside the database");
    // Nothing was remembered from the failed run: the next one is held to the same checkpoint.
    expect((await run("verify", "--database-url", database.url, "--tenant", "acme", "--public-key", vkey)).code).toBe(1);
  });

  it("says plainly when no outside copy exists: the same attack on a log verified nowhere before passes its chain, and the output says why that proves little", async () => {
    const vkey = store.verifierKey("globex");
    await rewriteAndHide("globex", 3);
    const r = await run("verify", "--database-url", database.url, "--tenant", "globex", "--public-key", vkey, "--state", join(dir, "fresh-state.json"));
    // Appended seconds ago: within the integration bound, so pending, not a finding.
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/the newest 12 entries \(since \S+\) are not yet integrated into a signed checkpoint/);
    expect(r.out).toContain("no checkpoint kept outside the database was remembered or given for this log: a history rewritten or truncated together with its checkpoints cannot be told apart from this one");
    // With a tight bound, entries that long without a checkpoint are a finding.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const bounded = await run("verify", "--database-url", database.url, "--tenant", "globex", "--public-key", vkey, "--state", join(dir, "fresh-state.json"), "--integration-bound", "1");
    expect(bounded.code).toBe(1);
    expect(bounded.out).toContain("[unintegrated_entries]");
  });

  it("catches a truncation below a checkpoint an auditor kept (--trusted-checkpoint), and a remembered one", async () => {
    const vkey = store.verifierKey("initech");
    const state = join(dir, "initech-state.json");
    expect((await run("verify", "--database-url", database.url, "--tenant", "initech", "--public-key", vkey, "--state", state)).code).toBe(0);
    const kept = join(dir, "initech-checkpoint.json");
    const remembered = JSON.parse(await readFile(state, "utf8")) as { logs: Record<string, { checkpoint: string }> };
    await writeFile(kept, JSON.stringify({ note: Object.values(remembered.logs)[0]!.checkpoint }));

    await truncateAndHide("initech", 5);
    const auditor = await run("verify", "--database-url", database.url, "--tenant", "initech", "--public-key", vkey, "--state", join(dir, "empty.json"), "--trusted-checkpoint", kept);
    expect(auditor.code).toBe(1);
    expect(auditor.out).toContain("[missing_entries]");
    expect(auditor.out).toContain("a checkpoint kept outside the database signs 8 entries but only 5 are present: entries 6..8 were removed");
    const again = await run("verify", "--database-url", database.url, "--tenant", "initech", "--public-key", vkey, "--state", state);
    expect(again.code).toBe(1);
    expect(again.out).toContain("entries 6..8 were removed");
  });

  it("verifies across a key rotation with a key set, each key trusted for the sizes it signed", async () => {
    await appendSome("umbrella", 4);
    const oldKey = store.verifierKey("umbrella");
    // The operator rotates the ledger's key: the same log goes on, signed with the new one.
    await store.close();
    const next = generateKeyPairSync("ed25519");
    store = createLedgerStore(db, { key: next });
    await appendSome("umbrella", 3);
    const newKey = store.verifierKey("umbrella");
    const args = ["verify", "--database-url", database.url, "--tenant", "umbrella", "--state", join(dir, "umbrella-state.json")];
    const oldOnly = await run(...args, "--public-key", oldKey);
    expect(oldOnly.code).toBe(1);
    expect(oldOnly.out).toContain("[checkpoint_signature]");
    const keys = join(dir, "umbrella-keys.json");
    await writeFile(keys, JSON.stringify({ keys: [{ key: oldKey, untilSize: 4 }, { key: newKey, fromSize: 5 }] }));
    const both = await run(...args, "--public-key", keys);
    expect(both.code, both.out + both.err).toBe(0);
    expect(both.out).toContain("ledger verified: umbrella (chaos-core/umbrella): 7 entries");
    expect(both.out).toContain("remembered checkpoint 7");
    // Held to what it remembered under the new key, on the next run with the same set.
    const again = await run(...args, "--public-key", keys);
    expect(again.out).toContain("consistent with the checkpoints kept outside the database: the one of size 7 remembered");
    await writeFile(keys, JSON.stringify({ keys: [{ key: oldKey, until: 4 }] }));
    const bad = await run(...args, "--public-key", keys);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain(`--public-key ${keys}: keys[0].until: unknown field (key, fromSize, untilSize)`);
  });

  it("refuses a state file that is not one, naming it, and verifies nothing", async () => {
    const bad = join(dir, "bad-state.json");
    await writeFile(bad, "{ not json");
    const r = await run("verify", "--database-url", database.url, "--tenant", "acme", "--public-key", store.verifierKey("acme"), "--state", bad);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`cannot verify: the verify state ${bad} is not JSON`);
  });
});
