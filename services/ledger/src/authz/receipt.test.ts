import { describe, expect, it } from "vitest";
import { createKeyring, generateSigningKey } from "../keys/keyring.js";
import {
  newNonce,
  parseReceipt,
  parseUtcTimestamp,
  receiptSigningBytes,
  signReceipt,
  verifyReceiptSignature,
  type Receipt,
  type ReceiptFields,
} from "./receipt.js";

const k1 = generateSigningKey("k1");
const k2 = generateSigningKey("k2");
const keyring = createKeyring(k1);

const fields: Omit<ReceiptFields, "kid"> = {
  kind: "chaoscore.tool_approval_receipt",
  schema_version: 1,
  tenant: "acme",
  actor: "alice@example.com",
  tool: "stripe.create_charge",
  resource: "acct_live_acme",
  args_hash: "a".repeat(64),
  policy_version: "2025-01-31.1",
  risk: "high",
  issued_at: "2025-01-31T12:00:00.000Z",
  expiry: "2025-01-31T12:02:00.000Z",
  decision: "allow",
  nonce: newNonce(),
};

/** Replaces the character at `i` with another base64url character. */
function flipAt(s: string, i: number): string {
  const c = s[i] === "A" ? "B" : "A";
  return s.slice(0, i) + c + s.slice(i + 1);
}

describe("signReceipt / verifyReceiptSignature", () => {
  it("signs with the active kid and verifies, whatever the key order of the object", () => {
    const receipt = signReceipt(fields, keyring);
    expect(receipt.kid).toBe("k1");
    expect(receipt.signature).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(verifyReceiptSignature(receipt, keyring)).toEqual({ ok: true });
    const reordered = Object.fromEntries(Object.entries(receipt).reverse()) as Receipt;
    expect(verifyReceiptSignature(reordered, keyring)).toEqual({ ok: true });
  });

  it("signs the canonical JSON of every field but the signature", () => {
    const receipt = signReceipt(fields, keyring);
    const text = receiptSigningBytes(receipt).toString("utf8");
    expect(text.startsWith('{"actor":"alice@example.com","args_hash":')).toBe(true);
    expect(text).not.toContain("signature");
    expect(JSON.parse(text)).toEqual({ ...fields, kid: "k1" });
  });

  it("refuses a flipped signature character anywhere, including the last one's spare bits", () => {
    const receipt = signReceipt(fields, keyring);
    for (const i of [0, 40, 85]) {
      const tampered = { ...receipt, signature: flipAt(receipt.signature, i) };
      expect(verifyReceiptSignature(tampered, keyring)).toMatchObject({ ok: false, code: "bad_signature" });
    }
    // The final character of 64 bytes has 4 unused bits: a variant that decodes to the same bytes.
    const last = receipt.signature.at(-1)!;
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const sameBytes = alphabet[(alphabet.indexOf(last) & ~0xf) | ((alphabet.indexOf(last) + 1) & 0xf)]!;
    const variant = receipt.signature.slice(0, 85) + sameBytes;
    expect(Buffer.from(variant, "base64url").equals(Buffer.from(receipt.signature, "base64url"))).toBe(true);
    expect(verifyReceiptSignature({ ...receipt, signature: variant }, keyring)).toMatchObject({ ok: false, code: "bad_signature" });
  });

  it("refuses a deny receipt edited to allow", () => {
    const deny = signReceipt({ ...fields, decision: "deny" }, keyring);
    expect(verifyReceiptSignature({ ...deny, decision: "allow" }, keyring)).toMatchObject({ ok: false, code: "bad_signature" });
  });

  it("refuses any edited field", () => {
    const receipt = signReceipt(fields, keyring);
    for (const edit of [{ tenant: "other" }, { args_hash: "b".repeat(64) }, { risk: "low" as const }, { expiry: "2025-01-31T13:00:00.000Z" }]) {
      expect(verifyReceiptSignature({ ...receipt, ...edit }, keyring)).toMatchObject({ ok: false, code: "bad_signature" });
    }
  });

  it("refuses a receipt signed by another key under a known kid", () => {
    const forged = signReceipt(fields, createKeyring({ ...k2, kid: "k1" }));
    expect(verifyReceiptSignature(forged, keyring)).toMatchObject({ ok: false, code: "bad_signature" });
  });

  it("verifies with a retired public-only key, and not once the kid is removed", () => {
    const old = signReceipt(fields, createKeyring(k1));
    const rotated = createKeyring(k2, new Map([["k1", k1.publicKey]]));
    expect(verifyReceiptSignature(old, rotated)).toEqual({ ok: true });
    const rotatedOut = createKeyring(k2);
    expect(verifyReceiptSignature(old, rotatedOut)).toMatchObject({ ok: false, code: "unknown_key", problem: expect.stringContaining('"k1"') });
  });

  it("will not sign malformed fields", () => {
    expect(() => signReceipt({ ...fields, resource: "*" }, keyring)).toThrow(/resource: "\*" is a wildcard/);
    expect(() => signReceipt({ ...fields, nonce: "short" }, keyring)).toThrow(/nonce/);
    expect(() => signReceipt({ ...fields, extra: 1 } as typeof fields, keyring)).toThrow(/extra: unknown field; accepted fields: kind, schema_version, kid, /);
  });
});

describe("parseReceipt", () => {
  const receipt = signReceipt(fields, keyring);

  it("accepts a signed receipt as is", () => {
    expect(parseReceipt(JSON.parse(JSON.stringify(receipt)))).toEqual({ ok: true, receipt });
  });

  it.each([
    ["an unknown extra key", { ...receipt, note: "hi" }, /note: unknown field; accepted fields: kind, schema_version, kid, .*, nonce, signature$/],
    ["a missing signature", { ...receipt, signature: undefined }, /signature/],
    ["a wildcard actor", { ...receipt, actor: "*" }, /actor: "\*" is a wildcard/],
    ["an actor named any", { ...receipt, actor: "Any" }, /actor: "Any" names a set/],
    ["an empty tool", { ...receipt, tool: "" }, /tool: is empty/],
    ["an unknown kind", { ...receipt, kind: "chp.tool_approval_receipt" }, /kind/],
    ["another schema version", { ...receipt, schema_version: 2 }, /schema_version/],
    ["a decision other than allow or deny", { ...receipt, decision: "maybe" }, /decision/],
    ["a non-UTC timestamp", { ...receipt, issued_at: "2025-01-31T12:00:00+01:00" }, /issued_at: must be an RFC 3339 UTC/],
    ["an impossible date", { ...receipt, expiry: "2025-02-30T12:00:00Z" }, /expiry: must be an RFC 3339 UTC/],
    ["an expiry before issued_at", { ...receipt, expiry: "2025-01-31T11:00:00.000Z" }, /expiry: must be later than issued_at/],
    ["a short nonce", { ...receipt, nonce: "abc" }, /nonce: must be at least 128 bits/],
    ["an uppercase args_hash", { ...receipt, args_hash: "A".repeat(64) }, /args_hash/],
    ["a bad tenant", { ...receipt, tenant: "Acme Corp" }, /tenant/],
    ["not an object", "receipt", /expected object/],
  ])("refuses %s", (_what, value, problem) => {
    const result = parseReceipt(value);
    expect(result.ok).toBe(false);
    expect(result.ok ? "" : result.problem).toMatch(problem);
  });
});

describe("newNonce / parseUtcTimestamp", () => {
  it("makes 128-bit base64url nonces that do not repeat", () => {
    const nonces = new Set(Array.from({ length: 1000 }, newNonce));
    expect(nonces.size).toBe(1000);
    for (const nonce of nonces) expect(Buffer.from(nonce, "base64url")).toHaveLength(16);
  });

  it("reads RFC 3339 UTC only", () => {
    expect(parseUtcTimestamp("2025-01-31T12:00:00Z")).toBe(Date.UTC(2025, 0, 31, 12));
    expect(parseUtcTimestamp("2025-01-31T12:00:00.5Z")).toBe(Date.UTC(2025, 0, 31, 12, 0, 0, 500));
    for (const bad of ["2025-01-31 12:00:00Z", "2025-01-31T12:00:00", "2025-13-01T00:00:00Z", "2024-02-30T00:00:00Z", "1738324800"]) {
      expect(parseUtcTimestamp(bad)).toBeUndefined();
    }
  });
});
