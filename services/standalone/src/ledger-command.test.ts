import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPostgresDb, type Db } from "@chaos-core/kit";
import { createLedgerStore, migrateLedger, type LedgerStore } from "@chaos-core/ledger";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";
import { runToExit } from "../../../test/support/processes.js";
import { runLedgerCommand } from "./ledger-command.js";

let database: TestDatabase;
let db: Db;
let store: LedgerStore;
let dir: string;
const { privateKey, publicKey } = generateKeyPairSync("ed25519");

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runLedgerCommand(argv, { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) } });
  return { code, out, err };
}

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_ledger_cli");
  db = createPostgresDb({ connectionString: database.url });
  await migrateLedger(db);
  store = createLedgerStore(db, { key: { privateKey, publicKey } });
  dir = await mkdtemp(join(tmpdir(), "chaoscore-ledger-cli-"));
  for (let i = 0; i < 3; i++) {
    await Promise.all(Array.from({ length: 4 }, (_, j) => store.append("acme", { session: "s", principal: "p", event: { i, j } })));
  }
});

afterAll(async () => {
  await db?.close();
  await database?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("chaos-core ledger", () => {
  it("exports a tenant and verifies the export and the database with only the public key", async () => {
    const vkey = store.verifierKey("acme");
    const file = join(dir, "acme.jsonl");
    expect((await run("export", "--database-url", database.url, "--tenant", "acme", "--out", file)).code).toBe(0);
    expect((await readFile(file, "utf8")).split("\n")[0]).toContain('"type":"header"');

    const fromFile = await run("verify", "--file", file, "--public-key", vkey);
    expect(fromFile).toMatchObject({ code: 0 });
    expect(fromFile.out).toMatch(/^ledger verified: acme \(chaos-core\/acme\): 12 entries/);

    const pem = join(dir, "key.pem");
    await writeFile(pem, publicKey.export({ type: "spki", format: "pem" }));
    expect((await run("verify", "--database-url", database.url, "--tenant", "acme", "--public-key", pem)).code).toBe(0);

    const stdout = await run("export", "--database-url", database.url, "--tenant", "acme");
    expect(stdout.out).toBe(await readFile(file, "utf8"));

    const other = generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" });
    await writeFile(join(dir, "other.pem"), other);
    expect((await run("verify", "--file", file, "--public-key", join(dir, "other.pem"))).code).toBe(1);
  });

  it("exits 1 naming the first bad entry after the owner edits a row", async () => {
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      await admin.query("ALTER TABLE ledger.entries DISABLE TRIGGER entries_append_only");
      await admin.query(`UPDATE ledger.entries SET event = '{"i":0,"j":"changed"}' WHERE tenant_id = 'acme' AND seq = 6`);
      await admin.query("ALTER TABLE ledger.entries ENABLE TRIGGER entries_append_only");
    } finally {
      await admin.end();
    }
    const vkey = store.verifierKey("acme");
    const live = await run("verify", "--database-url", database.url, "--tenant", "acme", "--public-key", vkey);
    expect(live.code).toBe(1);
    expect(live.out).toContain("first bad entry: seq 6 [content_hash]");

    const file = join(dir, "tampered.jsonl");
    expect((await run("export", "--database-url", database.url, "--tenant", "acme", "--out", file)).code).toBe(0);
    const json = await run("verify", "--file", file, "--public-key", vkey, "--json");
    expect(json.code).toBe(1);
    expect(JSON.parse(json.out)).toMatchObject({ ok: false, failure: { seq: 6, check: "content_hash" } });

    // The real command line, end to end.
    const proc = await runToExit(["ledger", "verify", "--file", file, "--public-key", vkey], {});
    expect(proc.code).toBe(1);
    expect(proc.stdout).toContain("seq 6");
  });

  it("exits 2 on usage errors", async () => {
    const vkey = store.verifierKey("acme");
    const cases: string[][] = [
      [],
      ["frobnicate"],
      ["verify", "--public-key", vkey],
      ["verify", "--file", "x", "--database-url", database.url, "--public-key", vkey],
      ["verify", "--file", "x"],
      ["verify", "--database-url", database.url, "--public-key", vkey],
      ["verify", "--database-url", database.url, "--tenant", "Not A Tenant", "--public-key", vkey],
      ["verify", "--file", "x", "--public-key", join(dir, "missing-key")],
      ["verify", "--file", "x", "--public-key", vkey, "--bogus"],
      ["export", "--tenant", "acme"],
    ];
    for (const argv of cases) expect((await run(...argv)).code, argv.join(" ")).toBe(2);
    expect((await run("help")).code).toBe(0);
    // A missing export file is not a usage error: nothing could be verified.
    const missing = await run("verify", "--file", join(dir, "nope.jsonl"), "--public-key", vkey);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("cannot verify");
  });
});
