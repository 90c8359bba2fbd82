import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger, createPostgresDb, type CallContext, type Db, type Env } from "@chaos-core/kit";
import { createLedgerStore, migrateLedger, type LedgerStore } from "@chaos-core/ledger";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";
import { runToExit } from "../../../test/support/processes.js";
import { loadStandaloneConfig } from "./config.js";
import { runLedgerCommand } from "./ledger-command.js";
import { createRuntime, type Runtime } from "./runtime.js";

let database: TestDatabase;
let db: Db;
let store: LedgerStore;
let dir: string;
const { privateKey, publicKey } = generateKeyPairSync("ed25519");

/** Runs the command in `env` (by default one whose per-user data directory is an empty temporary one). */
async function runIn(env: Env, ...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runLedgerCommand(argv, { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) }, env });
  return { code, out, err };
}

const home = () => ({ HOME: join(dir, "home"), XDG_DATA_HOME: join(dir, "home", "xdg"), XDG_STATE_HOME: join(dir, "home", "state") });
const run = (...argv: string[]) => runIn(home(), ...argv);

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_ledger_cli");
  db = createPostgresDb({ connectionString: database.url });
  await migrateLedger(db);
  store = createLedgerStore(db, { key: { privateKey, publicKey } });
  dir = await mkdtemp(join(tmpdir(), "chaoscore-ledger-cli-"));
  for (let i = 0; i < 3; i++) {
    await Promise.all(Array.from({ length: 4 }, (_, j) => store.append("acme", { session: "s", principal: "p", event: { i, j } })));
  }
  // Integrated and signed before the commands read it, so two exports of it are the same bytes.
  await store.drain();
});

afterAll(async () => {
  await store?.close();
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
      ["verify", "--file", "x", "--database-url", database.url, "--public-key", vkey],
      ["verify", "--file", "x", "--data-dir", dir, "--public-key", vkey],
      ["verify", "--database-url", database.url, "--data-dir", dir, "--public-key", vkey],
      ["verify", "--database-url", "mysql://nope", "--tenant", "acme", "--public-key", vkey],
      ["verify", "--file", "x"],
      ["verify", "--database-url", database.url, "--public-key", vkey],
      ["verify", "--database-url", database.url, "--tenant", "Not A Tenant", "--public-key", vkey],
      ["verify", "--file", "x", "--public-key", join(dir, "missing-key")],
      ["verify", "--file", "x", "--public-key", vkey, "--bogus"],
      ["export", "--database-url", database.url],
      ["export", "--database-url", database.url, "--data-dir", dir, "--tenant", "acme"],
    ];
    for (const argv of cases) expect((await run(...argv)).code, argv.join(" ")).toBe(2);
    expect((await run("help")).code).toBe(0);
    // A missing export file is not a usage error: nothing could be verified.
    const missing = await run("verify", "--file", join(dir, "nope.jsonl"), "--public-key", vkey);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("cannot verify");
    // Nothing names the ledger: the data directory a server in this environment would use, which does not exist.
    const nowhere = await run("verify", "--public-key", vkey);
    expect(nowhere.code).toBe(1);
    expect(nowhere.err).toContain(`there is no chaos-core data directory at ${join(dir, "home", "xdg", "chaos-core")}`);
  });
});

describe("chaos-core ledger on a data directory (the embedded default)", () => {
  const ctx: CallContext = { tenant: "default", principal: "agent" };
  let dataDir: string;
  let runtime: Runtime | undefined;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "chaoscore-ledger-cli-embedded-"));
    const config = loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: dataDir, LOG_LEVEL: "silent" });
    runtime = await createRuntime(config, createLogger("ledger-cli-test", "silent"), { version: "0.0.0", sessionTtlSeconds: 600, admin: true });
    for (let i = 0; i < 3; i++) await runtime.deps.ledger!.append({ event: { type: "test.event", i } }, { ctx });
  });

  afterAll(async () => {
    await runtime?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("exports and verifies it offline, its server running or stopped, printing the root_hash inspect_audit_ledger shows", async () => {
    const { checkpoint } = await runtime!.deps.ledger!.getCheckpoint({}, { ctx });
    expect(checkpoint?.size).toBe(3n);
    const root = checkpoint!.rootHash;

    // Running: the server holds the directory; the command reads through its admin endpoint.
    const live = await runIn(home(), "verify", "--data-dir", dataDir);
    expect(live.err).toBe("");
    expect(live).toMatchObject({ code: 0 });
    // Checkpoints are signed per integration batch: how many depends on timing, the root does not.
    expect(live.out).toMatch(new RegExp(`3 entries, [1-3] signed checkpoints, root_hash ${root.replace(/[+/=]/g, "\\$&")} \\(base64\\)`));
    const exported = await runIn(home(), "export", "--data-dir", dataDir);
    expect(exported.code).toBe(0);
    expect(exported.out.split("\n").filter((l) => l.startsWith('{"type":"entry"'))).toHaveLength(3);

    await runtime!.close();
    runtime = undefined;

    // Stopped: the command takes the directory itself; found from CHAOS_CORE_DATA_DIR alone.
    const env = { ...home(), CHAOS_CORE_DATA_DIR: dataDir };
    const offline = await runIn(env, "verify", "--json");
    expect(offline.code).toBe(0);
    expect(JSON.parse(offline.out)).toMatchObject({ ok: true, tenant: "default", entries: 3, root });
    const file = join(dir, "embedded.jsonl");
    expect((await runIn(env, "export", "--out", file)).code).toBe(0);
    expect(await readFile(file, "utf8")).toBe(exported.out);
    // And the export, anywhere, with only the verifier key the tools show.
    expect((await runIn(home(), "verify", "--file", file, "--public-key", checkpoint!.verifierKey)).code).toBe(0);
  });
});
