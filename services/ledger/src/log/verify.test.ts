import { generateKeyPairSync } from "node:crypto";
import { chpFloat, contentHash, parseChpJson } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { signCheckpoint, verifierKey, type NoteSigner } from "./checkpoint.js";
import {
  canonicalEvent,
  chainEntry,
  checkpointLine,
  entryLine,
  headerLine,
  leafData,
  parseCanonicalJson,
  type LedgerEntry,
} from "./entry.js";
import { TreeFrontier, hashLeaf } from "./merkle.js";
import { parseVerificationKeySet } from "./verification-keys.js";
import { ExportFormatError, parseExport, verifyExport, verifyLedger } from "./verify.js";

const { privateKey, publicKey } = generateKeyPairSync("ed25519");
const signer: NoteSigner = { name: "chaos-core/acme", privateKey, publicKey };
const vkey = verifierKey(signer.name, publicKey);

/** A ledger built the way the store builds it: `commits` gives the entries per commit, `signerOf` who signs each commit's checkpoint. */
function buildLedger(commits: number[], tenant = "acme", signerOf: (commit: number) => NoteSigner = () => signer): { entries: LedgerEntry[]; texts: string[]; notes: string[] } {
  const entries: LedgerEntry[] = [];
  const texts: string[] = [];
  const notes: string[] = [];
  const tree = new TreeFrontier();
  let prev = "";
  for (const n of commits) {
    for (let i = 0; i < n; i++) {
      const c = canonicalEvent({ kind: "spend", notional: chpFloat(100 + entries.length), i: entries.length });
      const e = chainEntry(prev, {
        seq: entries.length + 1,
        ts: new Date(Date.UTC(2025, 0, 1, 0, 0, entries.length)).toISOString(),
        tenant,
        session: "s",
        principal: "p",
        event: c.event,
        content_hash: c.hash,
      }, c.text);
      entries.push(e);
      texts.push(c.text);
      tree.append(hashLeaf(leafData(e.sig)));
      prev = e.sig;
    }
    notes.push(signCheckpoint({ origin: signer.name, size: tree.size, root: tree.root() }, signerOf(notes.length)));
  }
  return { entries, texts, notes };
}

function exportOf(l: { entries: LedgerEntry[]; texts: string[]; notes: string[] }): string {
  let out = headerLine("acme", signer.name);
  let c = 0;
  for (let i = 0; i < l.entries.length; i++) {
    out += entryLine(l.entries[i]!, l.texts[i]!);
    const size = i + 1;
    while (c < l.notes.length && l.notes[c]!.split("\n")[1] === String(size)) out += checkpointLine(size, l.notes[c++]!);
  }
  return out;
}

describe("verifyLedger", () => {
  it("accepts an intact ledger with a verifier key, a PEM or a KeyObject", async () => {
    const l = buildLedger([1, 3, 2]);
    for (const key of [vkey, publicKey.export({ type: "spki", format: "pem" }).toString(), publicKey]) {
      expect(await verifyLedger(l.entries, l.notes, key)).toMatchObject({ ok: true, entries: 6, checkpoints: 3, verifiedSize: 6, tenant: "acme" });
    }
    expect(await verifyLedger([], [], vkey)).toMatchObject({ ok: true, entries: 0 });
  });

  it("round-trips an export with floats intact", async () => {
    const text = exportOf(buildLedger([2, 2]));
    expect(text).toContain('"notional":100.0');
    expect(await verifyExport(text, vkey)).toMatchObject({ ok: true, entries: 4, verifiedSize: 4 });
    // JSON.parse would turn 100.0 into 100 and break every content hash; the export reader must not.
    const parsed = await parseExport(text.split("\n"));
    expect(parsed.entries).toHaveLength(4);
    expect(parsed.header).toMatchObject({ tenant: "acme", origin: signer.name });
  });

  it("names the exact entry for a changed field, a broken link, a gap or another tenant", async () => {
    const cases: Array<[string, (e: LedgerEntry[]) => void, number, string]> = [
      ["event", (e) => (e[3]!.event = { ...e[3]!.event, i: 99 }), 4, "content_hash"],
      ["principal", (e) => (e[2]!.principal = "mallory"), 3, "sig"],
      ["prev_sig", (e) => (e[4]!.prev_sig = e[2]!.sig), 5, "prev_sig"],
      ["gap", (e) => e.splice(2, 1), 3, "seq"],
      ["tenant", (e) => (e[1]!.tenant = "other"), 2, "tenant"],
      ["format", (e) => ((e[1] as unknown as Record<string, unknown>).ts = 5), 2, "format"],
    ];
    for (const [what, mutate, seq, check] of cases) {
      const l = buildLedger([6]);
      mutate(l.entries);
      const r = await verifyLedger(l.entries, l.notes, vkey);
      expect(r.failure, what).toMatchObject({ seq, check });
    }
  });

  it("names the first entry after the last matching checkpoint for a consistent rewrite", async () => {
    const l = buildLedger([2, 3, 4]);
    // Change entry 4 and re-chain everything after it: the chain alone is valid again.
    let prev = l.entries[2]!.sig;
    for (let i = 3; i < l.entries.length; i++) {
      const { prev_sig: _p, sig: _s, ...rest } = l.entries[i]!;
      const c = canonicalEvent(i === 3 ? { ...rest.event, forged: true } : rest.event);
      l.entries[i] = chainEntry(prev, { ...rest, event: c.event, content_hash: c.hash }, c.text);
      prev = l.entries[i]!.sig;
    }
    const r = await verifyLedger(l.entries, l.notes, vkey);
    // Checkpoints sign sizes 2, 5 and 9: size 2 still matches, size 5 does not.
    expect(r.failure).toMatchObject({ seq: 3, check: "checkpoint_root", range: { from: 3, to: 5 } });
    expect(r.verifiedSize).toBe(2);
  });

  it("refuses unsigned tails, removed tails, forged and foreign checkpoints", async () => {
    const l = buildLedger([2, 2]);
    const extra = buildLedger([5]);
    expect((await verifyLedger(extra.entries, l.notes, vkey)).failure).toMatchObject({ seq: 5, check: "unsigned_entries" });
    expect((await verifyLedger(l.entries.slice(0, 3), l.notes, vkey)).failure).toMatchObject({ seq: 4, check: "missing_entries" });
    expect((await verifyLedger(l.entries, [], vkey)).failure).toMatchObject({ seq: 1, check: "unsigned_entries" });

    const mallory = generateKeyPairSync("ed25519");
    const forgedNote = signCheckpoint({ origin: signer.name, size: 4, root: Buffer.alloc(32) }, { ...signer, ...mallory });
    const r = await verifyLedger(l.entries, [l.notes[0]!, forgedNote], vkey);
    expect(r.failure).toMatchObject({ seq: 3, check: "checkpoint_signature", range: { from: 3, to: 4 } });

    const other: NoteSigner = { name: "chaos-core/other", privateKey, publicKey };
    const foreign = buildLedger([2]);
    const foreignNote = signCheckpoint({ origin: other.name, size: 2, root: Buffer.alloc(32) }, other);
    const f = await verifyLedger(foreign.entries, [foreignNote], publicKey, { origin: signer.name });
    expect(f.failure).toMatchObject({ seq: 1, check: "checkpoint_origin" });
    expect((await verifyLedger(l.entries, ["garbage\n"], vkey)).failure).toMatchObject({ check: "unsigned_entries" });
  });

  it("refuses malformed export lines with the line number", async () => {
    await expect(parseExport('{"type":"entry"}\nnot json\n')).rejects.toThrow(/line 2/);
    await expect(parseExport('{"type":"mystery"}\n')).rejects.toThrow(ExportFormatError);
    await expect(parseExport('{"type":"header","format":"v0"}\n')).rejects.toThrow(/format/);
    await expect(parseExport('{"type":"checkpoint","size":1}\n')).rejects.toThrow(/note/);
  });
});

describe("parseCanonicalJson", () => {
  // The fast path must hash exactly as the lossless CHP parser, or verify would be unsound.
  const texts = [
    '{"a":1,"b":[true,null,"x"]}',
    '{"confidence":0.55,"n":-3}',
    '{"notional":100.0}',
    '{"big":12345678901234567890}',
    '{"f":1e+16}',
    '{"f":1e-07}',
    '{"f":10000000000000000}',
    '{"b":1,"a":2}',
    '{ "a": 1 }',
    '{"a":1,"a":1}',
    '{"s":"\\u00e9"}',
    '{"s":"é — ü","t":"line\\nbreak"}',
    '{"n":-0}',
    '{"n":-0.0}',
  ];
  it("hashes every text exactly as parseChpJson does", () => {
    for (const t of texts) expect(contentHash(parseCanonicalJson(t)), t).toBe(contentHash(parseChpJson(t)));
  });

  it("keeps floats that JSON.parse would flatten", () => {
    expect(parseCanonicalJson('{"notional":100.0}')).not.toEqual({ notional: 100 });
    expect(() => parseCanonicalJson('{"a":1,"a":2}')).toThrow();
    expect(() => parseCanonicalJson("not json")).toThrow();
  });
});

describe("verifyLedger with a checkpoint kept outside the database", () => {
  /** Entry 4 changed and everything after it re-chained: the chain alone verifies again. */
  function rewritten(l: ReturnType<typeof buildLedger>): LedgerEntry[] {
    const entries = [...l.entries];
    let prev = entries[2]!.sig;
    for (let i = 3; i < entries.length; i++) {
      const { prev_sig: _p, sig: _s, ...rest } = entries[i]!;
      const c = canonicalEvent(i === 3 ? { ...rest.event, forged: true } : rest.event);
      entries[i] = chainEntry(prev, { ...rest, event: c.event, content_hash: c.hash }, c.text);
      prev = entries[i]!.sig;
    }
    return entries;
  }
  const early = { pending: "allow" as const, now: Date.UTC(2025, 0, 1, 0, 0, 30), integrationBoundMs: 300_000 };

  it("catches a rewrite whose database checkpoints were deleted with it, naming the outside checkpoint", async () => {
    const l = buildLedger([2, 3, 4]);
    const remembered = l.notes[1]!; // size 5
    const forged = rewritten(l);
    // Nothing outside: the chain verifies, every entry pending — and the report says no outside checkpoint was given.
    expect(await verifyLedger(forged, [], vkey, early)).toMatchObject({ ok: true, pending: 9, outsideCheckpoints: 0, outsideSize: 0 });
    const r = await verifyLedger(forged, [], vkey, { ...early, outside: [remembered] });
    expect(r.failure).toMatchObject({ seq: 1, check: "outside_checkpoint", range: { from: 1, to: 5 } });
    expect(r.failure!.message).toMatch(/^the log is not consistent with the checkpoint of size 5 kept outside the database/);
  });

  it("catches a truncation below it, and matches an intact log, reporting the newest checkpoint to remember", async () => {
    const l = buildLedger([2, 3, 4]);
    const truncated = await verifyLedger(l.entries.slice(0, 4), [], vkey, { ...early, outside: [l.notes[1]!] });
    expect(truncated.failure).toMatchObject({ seq: 5, check: "missing_entries", message: expect.stringContaining("a checkpoint kept outside the database signs 5 entries but only 4 are present") });
    const intact = await verifyLedger(l.entries, l.notes, vkey, { outside: [l.notes[1]!] });
    expect(intact).toMatchObject({ ok: true, outsideCheckpoints: 1, outsideSize: 5, newest: { size: 9, note: l.notes[2] } });
  });

  it("reports a pending tail with its age, and fails one older than the integration bound", async () => {
    const l = buildLedger([3]);
    const young = await verifyLedger(l.entries, [], vkey, early);
    expect(young).toMatchObject({ ok: true, pending: 3, pendingSince: l.entries[0]!.ts });
    const old = await verifyLedger(l.entries, [], vkey, { ...early, now: Date.UTC(2025, 0, 1, 0, 10) });
    expect(old.failure).toMatchObject({ seq: 1, check: "unintegrated_entries", range: { from: 1, to: 3 } });
    expect(old.failure!.message).toMatch(/^entries 1\.\.3 have waited 600 s \(since 2025-01-01T00:00:00\.000Z\) for a signed checkpoint, longer than the integration bound \(300 s\)/);
  });
});

describe("verifyLedger across a key rotation", () => {
  const next = generateKeyPairSync("ed25519");
  const rotated: NoteSigner = { name: signer.name, ...next };
  const nextKey = verifierKey(signer.name, next.publicKey);
  // Commits 0 and 1 (sizes 2, 5) signed by the old key, commit 2 (size 9) by the new one.
  const l = buildLedger([2, 3, 4], "acme", (commit) => (commit < 2 ? signer : rotated));

  it("checks old checkpoints with the old key and new ones with the new, each only within its range", async () => {
    expect((await verifyLedger(l.entries, l.notes, vkey)).failure).toMatchObject({ seq: 6, check: "checkpoint_signature" });
    const set = { keys: [{ key: vkey, untilSize: 5 }, { key: nextKey, fromSize: 6 }] };
    expect(await verifyLedger(l.entries, l.notes, set)).toMatchObject({ ok: true, checkpoints: 3, verifiedSize: 9 });
    // The retired key, stolen after the rotation, signs a checkpoint of the later history: refused, as out of its range.
    const stolen = buildLedger([2, 3, 4]);
    expect((await verifyLedger(stolen.entries, stolen.notes, set)).failure).toMatchObject({ seq: 6, check: "checkpoint_signature" });
    expect((await verifyLedger(stolen.entries, stolen.notes, { keys: [{ key: vkey }, { key: nextKey, fromSize: 6 }] })).ok).toBe(true);
  });

  it("reads a key set as an operator writes it, naming a problem at its depth", () => {
    expect(parseVerificationKeySet(JSON.stringify({ keys: [{ key: vkey, untilSize: 5 }, { key: nextKey, fromSize: 6 }] })).keys).toHaveLength(2);
    const refused = (doc: unknown) => {
      try {
        parseVerificationKeySet(JSON.stringify(doc));
      } catch (err) {
        return (err as Error).message;
      }
      return "accepted";
    };
    expect(refused({ keys: [] })).toMatch(/at least one key/);
    expect(refused({ keys: [{ key: vkey }, { key: "not a key" }] })).toMatch(/^keys\[1\]\.key: /);
    expect(refused({ keys: [{ key: vkey, untilSize: -1 }] })).toBe("keys[0].untilSize: must be a whole number, 0 or more");
    expect(refused({ keys: [{ key: vkey, fromSize: 9, untilSize: 5 }] })).toBe("keys[0].untilSize: is below fromSize");
    expect(refused({ keys: [{ key: vkey, from: 1 }] })).toBe("keys[0].from: unknown field (key, fromSize, untilSize)");
  });
});
