import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  createMrtrKeyring,
  deriveMrtrKey,
  generateMrtrKeyringFile,
  loadMrtrKeyring,
  loadOrCreateMrtrKeyring,
  MRTR_KEYRING_FILE,
  MRTR_KID_RE,
  newMrtrKeyringFile,
  parseMrtrKeyring,
  type MrtrKeyring,
  type MrtrKeyringLogger,
} from "./keyring.js";

const dir = mkdtempSync(join(tmpdir(), "chaos-core-mrtr-keyring-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const secret = (bytes = 32) => randomBytes(bytes).toString("base64url");

/** Encrypts with `a`'s key for `kid` and decrypts with `b`'s: true when both hold the same key. */
function sameKey(a: MrtrKeyring, b: MrtrKeyring, kid: string): boolean {
  const iv = randomBytes(12);
  const c = createCipheriv("aes-256-gcm", a.keyFor(kid)!, iv);
  const ct = Buffer.concat([c.update("x"), c.final()]);
  const d = createDecipheriv("aes-256-gcm", b.keyFor(kid)!, iv);
  d.setAuthTag(c.getAuthTag());
  try {
    return Buffer.concat([d.update(ct), d.final()]).toString() === "x";
  } catch {
    return false;
  }
}

function problemOf(value: unknown): string {
  try {
    parseMrtrKeyring(value, "k.json");
  } catch (err) {
    expect(err).toMatchObject({ code: "failed_precondition" });
    return (err as Error).message;
  }
  throw new Error("parsed");
}

describe("the MRTR keyring", () => {
  it("derives each kid's AES-256 key with HKDF-SHA256 (salt \"chaos-core mrtr\", info \"requestState v1 <kid>\")", () => {
    const raw = randomBytes(32);
    const expected = Buffer.from(hkdfSync("sha256", raw, "chaos-core mrtr", "requestState v1 k1", 32));
    expect(deriveMrtrKey(raw, "k1").equals(expected)).toBe(true);
    // The kid is part of the derivation: one secret under two kids gives two keys.
    expect(deriveMrtrKey(raw, "k2").equals(expected)).toBe(false);
    const keyring = createMrtrKeyring("k1", new Map([["k1", raw]]));
    expect(keyring.keyFor("k1")!.export().equals(expected)).toBe(true);
    expect(keyring.keyFor("k1")!.symmetricKeySize).toBe(32);
  });

  it("parses a keyring with a retired kid: the active one first, both open, an unlisted kid none", () => {
    const doc = { active: "k2", keys: { k1: { secret: secret() }, k2: { secret: `${secret(48)}` } } };
    const keyring = parseMrtrKeyring(doc, "k.json");
    expect(keyring.activeKid).toBe("k2");
    expect(keyring.kids()).toEqual(["k2", "k1"]);
    expect(keyring.keyFor("k1")).toBeDefined();
    expect(keyring.keyFor("k3")).toBeUndefined();
    // The same document gives the same keys (every replica mounting the file agrees).
    expect(sameKey(keyring, parseMrtrKeyring(doc, "again"), "k1")).toBe(true);
    // A padded secret is the same secret.
    const padded = Buffer.from(randomBytes(32)).toString("base64url");
    expect(sameKey(parseMrtrKeyring({ active: "a", keys: { a: { secret: padded } } }, "x"), parseMrtrKeyring({ active: "a", keys: { a: { secret: `${padded}=` } } }, "y"), "a")).toBe(true);
  });

  it("names each wrong field at its full path, and never echoes a secret", () => {
    const short = secret(31);
    const cases: Array<[unknown, RegExp]> = [
      [[], /mrtr keyring k\.json: .*expected object, got array/],
      [{ keys: {} }, /active: required, expected string/],
      [{ active: "k1" }, /keys: required, expected object/],
      [{ active: "k1", keys: {} }, /active: kid "k1" is not listed under "keys" \(it is empty\)/],
      [{ active: "k9", keys: { k1: { secret: secret() } } }, /active: kid "k9" is not listed under "keys" \(listed: k1\)/],
      [{ active: "k1", keys: { k1: { secret: short } } }, /keys\.k1\.secret: must decode to at least 32 bytes/],
      [{ active: "k1", keys: { k1: { secret: `${secret()}+/` } } }, /keys\.k1\.secret: must be base64url/],
      [{ active: "k1", keys: { k1: { secret: 42 } } }, /keys\.k1\.secret: expected string, got number/],
      [{ active: "k1", keys: { k1: {} } }, /keys\.k1\.secret: required, expected string/],
      [{ active: "k1", keys: { k1: { secret: secret(), private: "x" } } }, /keys\.k1\.private: unknown field; accepted fields: secret/],
      [{ active: "k1", keys: { k1: { secret: secret() } }, activ: "k1" }, /activ: unknown field \(did you mean "active"\?\)/],
      [{ active: "k1", keys: { "a.b": { secret: secret() }, k1: { secret: secret() } } }, /keys: field name "a\.b": must be 1-64 characters/],
      [{ active: "-k", keys: { k1: { secret: secret() } } }, /active: must be 1-64 characters/],
    ];
    for (const [doc, message] of cases) expect(problemOf(doc), JSON.stringify(doc)).toMatch(message);
    expect(problemOf({ active: "k1", keys: { k1: { secret: short } } })).not.toContain(short);
    // Every problem at once, each at its own depth.
    const both = problemOf({ active: "k1", keys: { k1: { secret: "x" }, k2: { secret: 1 } } });
    expect(both).toMatch(/keys\.k1\.secret: must decode to at least 32 bytes.*; keys\.k2\.secret: expected string/);
  });

  it("loads a file, and names the file when it is missing or not JSON", async () => {
    const path = join(dir, "operator.json");
    writeFileSync(path, JSON.stringify({ active: "ops-2026", keys: { "ops-2026": { secret: secret() } } }));
    expect((await loadMrtrKeyring(path)).activeKid).toBe("ops-2026");
    await expect(loadMrtrKeyring(join(dir, "missing.json"))).rejects.toThrow(/mrtr keyring .*missing\.json: file not found/);
    const bad = join(dir, "bad.json");
    writeFileSync(bad, "{");
    await expect(loadMrtrKeyring(bad)).rejects.toThrow(/mrtr keyring .*bad\.json: not valid JSON/);
  });

  it("generates a 0600 file with one 32-byte secret under a random kid, and refuses to overwrite it", async () => {
    const path = join(dir, "generated.json");
    const kid = await generateMrtrKeyringFile(path);
    expect(kid).toMatch(/^mrtr-[0-9a-f]{12}$/);
    expect(kid).toMatch(MRTR_KID_RE);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const file = JSON.parse(readFileSync(path, "utf8")) as { active: string; keys: Record<string, { secret: string }> };
    expect(file.active).toBe(kid);
    expect(Buffer.from(file.keys[kid]!.secret, "base64url")).toHaveLength(32);
    expect((await loadMrtrKeyring(path)).kids()).toEqual([kid]);
    const before = readFileSync(path, "utf8");
    await expect(generateMrtrKeyringFile(path)).rejects.toMatchObject({ code: "already_exists" });
    expect(readFileSync(path, "utf8")).toBe(before);
    expect(newMrtrKeyringFile().keys).not.toEqual(newMrtrKeyringFile().keys);
  });

  it("standalone: generates <data dir>/mrtr-keyring.json once, says so, and loads the same key afterwards", async () => {
    const dataDir = join(dir, "data", "nested");
    const lines: Array<{ obj: object; msg: string }> = [];
    const logger: MrtrKeyringLogger = { info: (obj, msg) => lines.push({ obj, msg }) };
    const first = await loadOrCreateMrtrKeyring(dataDir, logger);
    const path = join(dataDir, MRTR_KEYRING_FILE);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(lines).toEqual([{ obj: { kid: first.activeKid, path }, msg: expect.stringContaining("generated a new key") }]);
    const second = await loadOrCreateMrtrKeyring(dataDir, logger);
    expect(lines).toHaveLength(1);
    expect(second.activeKid).toBe(first.activeKid);
    expect(sameKey(first, second, first.activeKid)).toBe(true);
  });
});
