import { generateKeyPairSync, sign, verify } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  createKeyring,
  generateKeyringFile,
  generateSigningKey,
  jwkThumbprint,
  KID_RE,
  loadKeyring,
  loadOrCreateKeyring,
  STANDALONE_KEYRING_FILE,
  type Keyring,
  type KeyringLogger,
} from "./keyring.js";

const dir = mkdtempSync(join(tmpdir(), "chaos-core-keyring-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
function writeJson(value: unknown): string {
  const path = join(dir, `keyring-${n++}.json`);
  writeFileSync(path, typeof value === "string" ? value : JSON.stringify(value));
  return path;
}

const pem = (key: ReturnType<typeof generateSigningKey>) => ({
  private: key.privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
  public: key.publicKey.export({ format: "pem", type: "spki" }).toString(),
});

function signsAndVerifies(signer: ReturnType<typeof generateSigningKey>, keyring: Keyring, kid: string) {
  const data = Buffer.from("checkpoint");
  return verify(null, data, keyring.verificationKey(kid)!, sign(null, data, signer.privateKey));
}

describe("generateKeyringFile / loadKeyring", () => {
  it("writes a 0600 file with one Ed25519 key that loads back as the active signing key", async () => {
    const path = join(dir, "generated.json");
    const kid = await generateKeyringFile(path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const keyring = await loadKeyring(path);
    expect(keyring.active.kid).toBe(kid);
    expect(keyring.kids()).toEqual([kid]);
    expect(keyring.active.privateKey.asymmetricKeyType).toBe("ed25519");
    // The default kid is the key's RFC 7638 thumbprint behind a prefix that keeps it a valid kid.
    expect(kid).toBe(`ed25519:${jwkThumbprint(keyring.active.publicKey)}`);
    expect(kid).toMatch(KID_RE);
    const data = Buffer.from("x");
    expect(verify(null, data, keyring.verificationKey(kid)!, sign(null, data, keyring.active.privateKey))).toBe(true);
  });

  it("refuses to overwrite an existing file and leaves it untouched", async () => {
    const path = join(dir, "existing.json");
    await generateKeyringFile(path);
    const before = readFileSync(path, "utf8");
    await expect(generateKeyringFile(path)).rejects.toMatchObject({ code: "already_exists", message: expect.stringContaining(path) });
    expect(readFileSync(path, "utf8")).toBe(before);
  });

  it("gives each generated file its own key", async () => {
    const a = await generateKeyringFile(join(dir, "a.json"));
    const b = await generateKeyringFile(join(dir, "b.json"));
    expect(a).not.toBe(b);
  });

  it("reads PEM and base64 DER, and a public-only entry verifies but does not sign", async () => {
    const active = generateSigningKey("k2");
    const retired = generateSigningKey("k1");
    const path = writeJson({
      active: "k2",
      keys: {
        k2: { private: active.privateKey.export({ format: "der", type: "pkcs8" }).toString("base64").replace(/(.{20})/g, "$1\n") },
        k1: { public: retired.publicKey.export({ format: "der", type: "spki" }).toString("base64url") },
      },
    });
    const keyring = await loadKeyring(path);
    expect(keyring.active.kid).toBe("k2");
    expect(keyring.kids()).toEqual(["k2", "k1"]);
    expect(signsAndVerifies(retired, keyring, "k1")).toBe(true);
    expect(signsAndVerifies(active, keyring, "k2")).toBe(true);
    // A signature by the retired key does not verify under the active kid.
    expect(signsAndVerifies(retired, keyring, "k2")).toBe(false);
  });

  it("forgets a kid removed from the file (rotated out)", async () => {
    const k1 = generateSigningKey("k1");
    const k2 = generateSigningKey("k2");
    const before = await loadKeyring(writeJson({ active: "k2", keys: { k2: pem(k2), k1: { public: pem(k1).public } } }));
    expect(before.verificationKey("k1")).toBeDefined();
    const after = await loadKeyring(writeJson({ active: "k2", keys: { k2: { private: pem(k2).private } } }));
    expect(after.verificationKey("k1")).toBeUndefined();
    expect(after.kids()).toEqual(["k2"]);
  });

  it.each([
    ["a missing file", () => join(dir, "nope.json"), /nope\.json: file not found/],
    ["bad JSON", () => writeJson("{ active: "), /not valid JSON/],
    ["no keys", () => writeJson({ active: "k1" }), /keys: /],
    ["an active kid not listed", () => writeJson({ active: "k9", keys: { k1: pem(generateSigningKey()) } }), /active: kid "k9" is not listed/],
    [
      "an active kid with only a public key",
      () => writeJson({ active: "k1", keys: { k1: { public: pem(generateSigningKey()).public } } }),
      /keys\.k1: the active key needs "private"/,
    ],
    ["a malformed key", () => writeJson({ active: "k1", keys: { k1: { private: "not a key!" } } }), /keys\.k1\.private: neither a PEM block nor base64 DER/],
    [
      "a PEM that is not a key",
      () => writeJson({ active: "k1", keys: { k1: { private: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----" } } }),
      /keys\.k1\.private: not a PKCS#8 private key/,
    ],
    [
      "a key that is not Ed25519",
      () =>
        writeJson({
          active: "k1",
          keys: { k1: { private: generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "pem", type: "pkcs8" }).toString() } },
        }),
      /keys\.k1\.private: not an Ed25519 key \(found ec\)/,
    ],
    [
      "a private key in a public slot",
      () => writeJson({ active: "k1", keys: { k1: pem(generateSigningKey()), k0: { public: pem(generateSigningKey()).private } } }),
      /keys\.k0\.public: holds a private key/,
    ],
    [
      "a public key that is not the private key's half",
      () => writeJson({ active: "k1", keys: { k1: { private: pem(generateSigningKey()).private, public: pem(generateSigningKey()).public } } }),
      /keys\.k1: "public" is not the public half/,
    ],
    ["an entry with neither key", () => writeJson({ active: "k1", keys: { k1: {} } }), /keys\.k1: needs "private"/],
    ["an unknown field", () => writeJson({ active: "k1", keys: { k1: pem(generateSigningKey()) }, default: true }), /unknown field\(s\) default/],
    ["a kid with a space", () => writeJson({ active: "k 1", keys: { "k 1": pem(generateSigningKey()) } }), /active: must be 1-128 characters/],
  ])("refuses %s, naming the file and the problem", async (_what, makePath, message) => {
    const path = makePath();
    const failure = loadKeyring(path);
    await expect(failure).rejects.toMatchObject({ code: "failed_precondition", message: expect.stringContaining(`ledger keyring ${path}: `) });
    await expect(failure).rejects.toThrow(message);
  });
});

describe("loadOrCreateKeyring", () => {
  it("generates a keyring on first run and says so, then loads the same key without a word", async () => {
    // A data directory that does not exist yet is created.
    const dataDir = join(mkdtempSync(join(dir, "data-")), "fresh");
    const lines: { obj: object; msg: string }[] = [];
    const logger: KeyringLogger = { info: (obj, msg) => lines.push({ obj, msg }) };

    const first = await loadOrCreateKeyring(dataDir, logger);
    const path = join(dataDir, STANDALONE_KEYRING_FILE);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.obj).toEqual({ kid: first.active.kid, path });
    expect(lines[0]!.msg).toMatch(/generated a new ledger signing key .* back it up/);
    expect(statSync(path).mode & 0o777).toBe(0o600);

    const second = await loadOrCreateKeyring(dataDir, logger);
    expect(lines).toHaveLength(1);
    expect(second.active.kid).toBe(first.active.kid);
    expect(second.active.publicKey.equals(first.active.publicKey)).toBe(true);
  });

  it("does not paper over a broken keyring file with a new key", async () => {
    const dataDir = mkdtempSync(join(dir, "data-"));
    writeFileSync(join(dataDir, STANDALONE_KEYRING_FILE), "{}");
    await expect(loadOrCreateKeyring(dataDir, { info: () => undefined })).rejects.toMatchObject({ code: "failed_precondition" });
    expect(readFileSync(join(dataDir, STANDALONE_KEYRING_FILE), "utf8")).toBe("{}");
  });
});

describe("createKeyring", () => {
  it("refuses a signing key whose halves do not match", () => {
    const a = generateSigningKey("a");
    const b = generateSigningKey("b");
    expect(() => createKeyring({ kid: "a", privateKey: a.privateKey, publicKey: b.publicKey })).toThrow(/not the half/);
  });
});
