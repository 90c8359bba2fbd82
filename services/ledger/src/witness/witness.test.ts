import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseNote, type NoteSigner } from "@chaos-core/kit";
import { signCheckpoint } from "../log/checkpoint.js";
import { consistencyProof, hashLeaf, rootOf } from "../log/merkle.js";
import { cosign, cosignatureOf, cosignerKeyId, cosignerVerifierKey, parseCosignerKey } from "./cosignature.js";
import { createWitness, type Witness } from "./witness.js";

const dir = mkdtempSync(join(tmpdir(), "chaos-core-witness-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const logKey = generateKeyPairSync("ed25519");
const witnessKey = generateKeyPairSync("ed25519");
const witnessSigner: NoteSigner = { name: "witness.example/w1", ...witnessKey };
const cosigner = parseCosignerKey(cosignerVerifierKey(witnessSigner.name, witnessKey.publicKey));
const NOW = 1_790_000_000;

/** A log's leaves: `n` entries, or another history (`fork`) of the same length. */
const leaves = (n: number, fork = "") => Array.from({ length: n }, (_, i) => hashLeaf(Buffer.from(`${fork}entry ${i}`)));
const checkpoint = (origin: string, l: Buffer[], size: number, key = logKey) => signCheckpoint({ origin, size, root: rootOf(l, size) }, { name: origin, ...key });
const request = (old: number, proof: Buffer[], note: string) => `old ${old}\n${proof.map((h) => `${h.toString("base64")}\n`).join("")}\n${note}`;

let stateCounter = 0;
const newWitness = (stateFile = join(dir, `state-${++stateCounter}.json`)) =>
  createWitness({ signer: witnessSigner, logs: [{ originPrefix: "chaos-core/ledger/", publicKey: logKey.publicKey }], stateFile, now: () => NOW });

describe("tlog-cosignature v1 (Ed25519)", () => {
  it("reads the key ID and timestamp of the spec's example cosignature", () => {
    // c2sp.org/tlog-cosignature's example line for witness.example.com/w1 (its key is not published, so only its layout is checked).
    const blob = Buffer.from("jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==", "base64");
    expect(blob).toHaveLength(4 + 8 + 64);
    // The spec's signed-message example says "time 1679315147".
    expect(Number(blob.readBigUInt64BE(4))).toBe(1679315147);
  });

  it("reads a witness key whose base64 holds '+' (split at the first two '+' only)", () => {
    // Keys until one whose encoding holds a '+' after the type byte: the split must not cut it.
    for (let i = 0; i < 200; i++) {
      const pair = generateKeyPairSync("ed25519");
      const vkey = cosignerVerifierKey("witness.example/w9", pair.publicKey);
      if (vkey.split("+").length === 3) continue;
      expect(parseCosignerKey(vkey).keyId).toEqual(cosignerKeyId("witness.example/w9", pair.publicKey));
      return;
    }
    throw new Error("no key with a '+' in its encoding in 200 tries");
  });

  it("signs the header, the time and the whole note body, under a key ID with type 0x04, and verifies only that", () => {
    const note = checkpoint("chaos-core/ledger/acme", leaves(3), 3);
    const line = cosign(parseNote(note).text, witnessSigner, NOW);
    expect(line).toMatch(/^\u2014 witness\.example\/w1 \S+\n$/);
    const blob = Buffer.from(line.trim().split(" ")[2]!, "base64");
    expect(blob.subarray(0, 4)).toEqual(cosignerKeyId(witnessSigner.name, witnessKey.publicKey));
    expect(Number(blob.readBigUInt64BE(4))).toBe(NOW);
    expect(cosignatureOf(note + line, cosigner)).toBe(NOW);
    // The log's own signature is not a cosignature; another text is not what was cosigned.
    expect(cosignatureOf(note, cosigner)).toBeUndefined();
    const other = checkpoint("chaos-core/ledger/acme", leaves(4), 4);
    expect(cosignatureOf(other + line, cosigner)).toBeUndefined();
    expect(() => parseCosignerKey(cosignerVerifierKey(witnessSigner.name, witnessKey.publicKey).replace("witness.example/w1", "w2"))).toThrow(/key ID does not match/);
  });
});

describe("a witness (tlog-witness add-checkpoint)", () => {
  const acme = "chaos-core/ledger/acme";
  const log = leaves(9);

  it("cosigns a first checkpoint and then only consistent ones, answering 409 with its size to a stale old size", async () => {
    const w = await newWitness();
    const first = await w.addCheckpoint(request(0, [], checkpoint(acme, log, 3)));
    expect(first.status).toBe(200);
    expect(cosignatureOf(checkpoint(acme, log, 3) + first.body, cosigner)).toBe(NOW);
    const next = await w.addCheckpoint(request(3, consistencyProof(log, 3, 7), checkpoint(acme, log, 7)));
    expect(next.status).toBe(200);
    expect(await w.addCheckpoint(request(0, [], checkpoint(acme, log, 9)))).toEqual({ status: 409, contentType: "text/x.tlog.size", body: "7\n" });
    // The same checkpoint again: consistent with itself.
    expect((await w.addCheckpoint(request(7, [], checkpoint(acme, log, 7)))).status).toBe(200);
    // Every tenant's log is its own origin, under the same key.
    expect((await w.addCheckpoint(request(0, [], checkpoint("chaos-core/ledger/globex", leaves(2, "g"), 2)))).status).toBe(200);
    expect(Object.keys((await w.state()).logs).sort()).toEqual([acme, "chaos-core/ledger/globex"]);
  });

  it("refuses a fork of the same size, a smaller tree and a proof that does not hold, keeping each as evidence", async () => {
    const w = await newWitness();
    expect((await w.addCheckpoint(request(0, [], checkpoint(acme, log, 7)))).status).toBe(200);
    const forked = leaves(9, "rewritten ");
    const sameSize = await w.addCheckpoint(request(7, [], checkpoint(acme, forked, 7)));
    expect(sameSize).toMatchObject({ status: 409, body: "7\n" });
    const smaller = await w.addCheckpoint(request(7, [], checkpoint(acme, log, 5)));
    expect(smaller).toMatchObject({ status: 409, body: "7\n" });
    const rewritten = await w.addCheckpoint(request(7, consistencyProof(forked, 7, 9), checkpoint(acme, forked, 9)));
    expect(rewritten.status).toBe(422);
    const { evidence, logs } = await w.state();
    expect(evidence.map((e) => e.why)).toEqual([
      expect.stringMatching(/^a checkpoint of size 7 with another root than the one cosigned: a fork$/),
      expect.stringMatching(/^a checkpoint of size 5, smaller than the cosigned 7/),
      expect.stringMatching(/^the consistency proof from size 7 to 9 does not verify/),
    ]);
    expect(evidence[0]).toMatchObject({ origin: acme, cosigned: checkpoint(acme, log, 7), offered: checkpoint(acme, forked, 7) });
    // Nothing refused moved what it cosigned.
    expect(logs[acme]?.size).toBe(7);
  });

  it("answers 404 for an unknown origin, 403 for a key it does not trust, 400 for a malformed request, and remembers across restarts", async () => {
    const file = join(dir, "restart.json");
    const w = await newWitness(file);
    expect((await w.addCheckpoint(request(0, [], checkpoint("someone/else", log, 3)))).status).toBe(404);
    expect((await w.addCheckpoint(request(0, [], checkpoint(acme, log, 3, generateKeyPairSync("ed25519"))))).status).toBe(403);
    expect((await w.addCheckpoint("old 01\n\n" + checkpoint(acme, log, 3))).status).toBe(400);
    expect((await w.addCheckpoint(request(4, [], checkpoint(acme, log, 3)))).status).toBe(400);
    expect((await w.addCheckpoint(`old 0\nnot base64!\n\n${checkpoint(acme, log, 3)}`)).status).toBe(400);
    expect((await w.addCheckpoint(request(0, [], checkpoint(acme, log, 3)))).status).toBe(200);
    const again: Witness = await newWitness(file);
    expect(await again.addCheckpoint(request(0, [], checkpoint(acme, log, 9)))).toMatchObject({ status: 409, body: "3\n" });
  });

  it("takes concurrent submissions one at a time: of two from the same old size, one is cosigned", async () => {
    const w = await newWitness();
    expect((await w.addCheckpoint(request(0, [], checkpoint(acme, log, 3)))).status).toBe(200);
    const answers = await Promise.all([
      w.addCheckpoint(request(3, consistencyProof(log, 3, 7), checkpoint(acme, log, 7))),
      w.addCheckpoint(request(3, consistencyProof(log, 3, 9), checkpoint(acme, log, 9))),
    ]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
  });
});
