import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPostgresDb, type Db } from "@chaos-core/kit";
import { cosignatureOf, cosignerVerifierKey, createLedgerStore, createWitness, migrateLedger, parseCosignerKey, type LedgerStore } from "@chaos-core/ledger";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";
import { loadOrCreateWitnessKey, parseTrustedLogs, startWitnessServer } from "./witness-command.js";

/**
 * `chaos-core witness` over HTTP, witnessing a real ledger's checkpoints (Postgres): the ledger's
 * own consistency proofs between its signed checkpoints get each one cosigned, as C2SP
 * tlog-witness defines the exchange; a checkpoint of another history is refused.
 */

let database: TestDatabase;
let db: Db;
let store: LedgerStore;
let dir: string;
const ledgerKey = generateKeyPairSync("ed25519");

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_witness_cli");
  db = createPostgresDb({ connectionString: database.url });
  await migrateLedger(db);
  store = createLedgerStore(db, { key: { name: "chaos-core/ledger/{tenant}", ...ledgerKey } });
  dir = await mkdtemp(join(tmpdir(), "chaoscore-witness-cli-"));
});

afterAll(async () => {
  await store?.close();
  await db?.close();
  await database?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const append = async (tenant: string, n: number) => {
  for (let i = 0; i < n; i++) await store.append(tenant, { session: "", principal: "agent", event: { type: "note", i } });
  await store.drain();
};

describe("chaos-core witness", () => {
  it("cosigns a real ledger's checkpoints as it grows, over HTTP, and refuses a stale or malformed one", async () => {
    const keyFile = join(dir, "witness.key");
    const key = await loadOrCreateWitnessKey(keyFile);
    expect(key.generated).toBe(true);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    expect((await loadOrCreateWitnessKey(keyFile)).generated).toBe(false);
    const logs = await parseTrustedLogs(`chaos-core/ledger/=${store.verifierKey("acme")}`);
    const witness = await createWitness({ signer: { name: "witness.test/w1", ...key }, logs, stateFile: join(dir, "state.json") });
    const { url, server } = await startWitnessServer(witness, "127.0.0.1", 0);
    const cosigner = parseCosignerKey(cosignerVerifierKey("witness.test/w1", key.publicKey));
    const post = (body: string) => fetch(`${url}/add-checkpoint`, { method: "POST", body });
    try {
      await append("acme", 3);
      const first = (await store.latestCheckpoint("acme"))!;
      const one = await post(`old 0\n\n${first.note}`);
      expect(one.status).toBe(200);
      expect(cosignatureOf(first.note + (await one.text()), cosigner)).toBeGreaterThan(0);

      await append("acme", 4);
      const next = (await store.latestCheckpoint("acme"))!;
      const proof = await store.consistencyProof("acme", first.size, next.size);
      const body = `old ${first.size}\n${proof.proof.map((h) => `${Buffer.from(h, "hex").toString("base64")}\n`).join("")}\n${next.note}`;
      const two = await post(body);
      expect(two.status, await two.clone().text()).toBe(200);
      expect(cosignatureOf(next.note + (await two.text()), cosigner)).toBeGreaterThan(0);

      const stale = await post(`old 0\n\n${first.note}`);
      expect(stale.status).toBe(409);
      expect(stale.headers.get("content-type")).toBe("text/x.tlog.size");
      expect(await stale.text()).toBe(`${next.size}\n`);

      expect((await post(`old x\n\n${next.note}`)).status).toBe(400);
      expect((await fetch(`${url}/add-checkpoint`)).status).toBe(405);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
    } finally {
      server.close();
    }
  });

  it("names what is wrong with --log", async () => {
    await expect(parseTrustedLogs("chaos-core/ledger/")).rejects.toThrow(/--log entry 1 is PREFIX=KEY/);
    await expect(parseTrustedLogs("chaos-core/ledger/=not-a-key")).rejects.toThrow(/--log entry 1 \(chaos-core\/ledger\/\): the key is neither a verifier key nor a readable PEM public key/);
  });
});
