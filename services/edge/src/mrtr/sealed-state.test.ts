import { createCipheriv, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createMrtrKeyring, type MrtrKeyring } from "./keyring.js";
import {
  argumentsDigest,
  checkRequestStateTarget,
  MAX_REQUEST_STATE_CHARS,
  openRequestState,
  sealRequestState,
  type OpenResult,
  type SealInput,
} from "./sealed-state.js";

const T0 = Date.parse("2026-11-01T12:00:00.000Z");
const clock = (ms: number) => () => ms;

const secretA = randomBytes(32);
const secretB = randomBytes(32);
const ring = (active: string, keys: Record<string, Buffer>): MrtrKeyring => createMrtrKeyring(active, new Map(Object.entries(keys)));
const keyring = ring("k1", { k1: secretA });

const ARGS = { approval_id: "6f1c2a9e-3b7d-4c1a-9e2f-0a1b2c3d4e5f" };
const INPUT: SealInput = {
  tenant: "acme",
  principal: "agent@acme",
  method: "tools/call",
  name: "chaoscore_execute",
  digest: argumentsDigest(ARGS),
  flow: "Zm9vYmFyYmF6cXV4MTIzNA",
  phase: "form",
  fields: { approval_id: ARGS.approval_id, q: "a".repeat(64) },
};
const CALLER = { tenant: "acme", principal: "agent@acme", method: "tools/call", name: "chaoscore_execute", digest: argumentsDigest(ARGS) };

function seal(k: MrtrKeyring = keyring, input: SealInput = INPUT, at = T0, ttlSeconds = 600) {
  return sealRequestState(k, input, { ttlSeconds, now: clock(at) });
}

function open(state: unknown, k: MrtrKeyring = keyring, expect: Parameters<typeof openRequestState>[2] = CALLER, at = T0 + 1000): OpenResult {
  return openRequestState(k, state, expect, { now: clock(at) });
}

/** The base64url body of a state with one byte of (iv ‖ ciphertext ‖ tag) changed. */
function withByteFlipped(state: string, index: (length: number) => number): string {
  const [prefix, kid, body] = state.split(".") as [string, string, string];
  const bytes = Buffer.from(body, "base64url");
  const i = index(bytes.length);
  bytes[i] = bytes[i]! ^ 0x01;
  return `${prefix}.${kid}.${bytes.toString("base64url")}`;
}

describe("sealed requestState", () => {
  it("round trip: cc1.<kid>.<base64url>, a few hundred characters, nothing readable, every field back", () => {
    const { state, payload } = seal();
    expect(state).toMatch(/^cc1\.k1\.[A-Za-z0-9_-]+$/);
    expect(state.length).toBeLessThan(600);
    // Encrypted, not only signed: none of what it binds is visible to the client.
    const body = Buffer.from(state.split(".")[2]!, "base64url").toString("latin1");
    for (const secret of ["acme", "agent@acme", "chaoscore_execute", ARGS.approval_id, INPUT.flow]) expect(body).not.toContain(secret);
    expect(payload).toEqual({
      v: 1,
      tenant: "acme",
      principal: "agent@acme",
      m: "tools/call",
      n: "chaoscore_execute",
      d: INPUT.digest,
      flow: INPUT.flow,
      jti: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/),
      iat: T0,
      exp: T0 + 600_000,
      phase: "form",
      approval_id: ARGS.approval_id,
      q: "a".repeat(64),
    });
    expect(open(state)).toEqual({ ok: true, kid: "k1", payload });
    // A fresh IV and jti every time: two seals of one input share nothing.
    const again = seal();
    expect(again.state).not.toBe(state);
    expect(again.payload.jti).not.toBe(payload.jti);
  });

  it("a tampered byte anywhere (IV, ciphertext, tag) is refused: tag", () => {
    const { state } = seal();
    for (const at of [() => 0, () => 12, (n: number) => Math.floor(n / 2), (n: number) => n - 1]) {
      expect(open(withByteFlipped(state, at))).toMatchObject({ ok: false, reason: "tag", kid: "k1" });
    }
    // A changed character of the text: another byte string, or not canonical base64url.
    const chars = state.split("");
    const i = state.length - 10;
    chars[i] = chars[i] === "A" ? "B" : "A";
    expect(open(chars.join(""))).toMatchObject({ ok: false, reason: expect.stringMatching(/^(tag|malformed)$/) });
    const last = state.slice(0, -1) + (state.endsWith("A") ? "B" : "A");
    expect(open(last)).toMatchObject({ ok: false, reason: expect.stringMatching(/^(tag|malformed)$/) });
  });

  it("a truncated state is refused: tag when it still has an IV and a tag, malformed when it cannot", () => {
    const { state } = seal();
    const [prefix, kid, body] = state.split(".") as [string, string, string];
    const bytes = Buffer.from(body, "base64url");
    const cut = (n: number) => `${prefix}.${kid}.${bytes.subarray(0, n).toString("base64url")}`;
    expect(open(cut(bytes.length - 1))).toMatchObject({ ok: false, reason: "tag" });
    expect(open(cut(40))).toMatchObject({ ok: false, reason: "tag" });
    expect(open(cut(28))).toMatchObject({ ok: false, reason: "malformed", problem: expect.stringContaining("too short") });
    expect(open(`${prefix}.${kid}.`)).toMatchObject({ ok: false, reason: "malformed" });
    expect(open(`${prefix}.${kid}`)).toMatchObject({ ok: false, reason: "malformed" });
  });

  it("anything not shaped like a state is malformed, and nothing the client sends throws", () => {
    const { state } = seal();
    const body = state.split(".")[2]!;
    for (const bad of [undefined, null, 42, {}, "", "cc1", "cc2.k1." + body, `cc1.k1.${body}.x`, `cc1..${body}`, `cc1.k.1.${body}`, `cc1.k1.${body}=`, `cc1.k1.${body.slice(0, 10)}+${body.slice(11)}`, `cc1.k1.${"A".repeat(MAX_REQUEST_STATE_CHARS)}`]) {
      expect(open(bad), String(bad).slice(0, 40)).toMatchObject({ ok: false, reason: "malformed" });
    }
  });

  it("an unknown kid is refused as such, and a kid rotated out stops opening", () => {
    const { state } = seal();
    expect(open(state.replace(/^cc1\.k1\./, "cc1.k9."))).toMatchObject({ ok: false, reason: "unknown_kid", kid: "k9" });
    // The same kid name holding another secret is another key: the tag fails.
    expect(open(state, ring("k1", { k1: secretB }))).toMatchObject({ ok: false, reason: "tag" });
    // The kid is authenticated: a state re-labelled with another listed kid does not open.
    const both = ring("k1", { k1: secretA, k2: secretA });
    expect(open(state.replace(/^cc1\.k1\./, "cc1.k2."), both)).toMatchObject({ ok: false, reason: "tag" });
    expect(open(state, ring("k2", { k2: secretB }))).toMatchObject({ ok: false, reason: "unknown_kid" });
  });

  it("a rotated kid still opens: a new active kid seals, the old one keeps opening what it sealed", () => {
    const old = seal(keyring);
    const rotated = ring("k2", { k2: secretB, k1: secretA });
    const fresh = seal(rotated);
    expect(fresh.state).toMatch(/^cc1\.k2\./);
    expect(open(old.state, rotated)).toMatchObject({ ok: true, kid: "k1", payload: old.payload });
    expect(open(fresh.state, rotated)).toMatchObject({ ok: true, kid: "k2", payload: fresh.payload });
    // A replica that has not taken the new file yet cannot open the new kid's states.
    expect(open(fresh.state, keyring)).toMatchObject({ ok: false, reason: "unknown_kid" });
  });

  it("expires at exp: open up to the last millisecond before, refused from exp on", () => {
    const { state } = seal(keyring, INPUT, T0, 60);
    expect(open(state, keyring, CALLER, T0 + 59_999)).toMatchObject({ ok: true });
    const expired = open(state, keyring, CALLER, T0 + 60_000);
    expect(expired).toMatchObject({ ok: false, reason: "expired", problem: expect.stringContaining("2026-11-01T12:01:00.000Z") });
    // An expired state of the caller's own still names its handles (for the ledger record).
    expect(expired).toMatchObject({ jti: expect.any(String), flow: INPUT.flow, name: "chaoscore_execute" });
  });

  it("another principal, another tenant: refused, each with its reason, and none of the state's handles given out", () => {
    const { state } = seal();
    const principal = open(state, keyring, { ...CALLER, principal: "mallory@acme" });
    expect(principal).toEqual({ ok: false, reason: "principal", problem: "requestState belongs to another principal", kid: "k1" });
    const tenant = open(state, keyring, { ...CALLER, tenant: "globex" });
    expect(tenant).toEqual({ ok: false, reason: "tenant", problem: "requestState belongs to another tenant", kid: "k1" });
    // Identity is checked before expiry: another principal's expired state says "principal".
    expect(open(state, keyring, { ...CALLER, principal: "mallory@acme" }, T0 + 3_600_000)).toMatchObject({ reason: "principal" });
  });

  it("another method, tool name or arguments: refused as method, name, digest", () => {
    const { state, payload } = seal();
    expect(open(state, keyring, { ...CALLER, method: "prompts/get" })).toMatchObject({ ok: false, reason: "method" });
    expect(open(state, keyring, { ...CALLER, name: "approve_spend" })).toMatchObject({ ok: false, reason: "name", jti: payload.jti });
    const other = argumentsDigest({ approval_id: "7f1c2a9e-3b7d-4c1a-9e2f-0a1b2c3d4e5f" });
    expect(open(state, keyring, { ...CALLER, digest: other })).toMatchObject({ ok: false, reason: "digest" });
    // Without a target (the verify hook has no params) the rest is checked later, by the handler.
    const opened = open(state, keyring, { tenant: "acme", principal: "agent@acme", method: "tools/call" });
    expect(opened.ok).toBe(true);
    if (!opened.ok) return;
    expect(checkRequestStateTarget(opened.payload, { name: "chaoscore_execute", digest: CALLER.digest })).toEqual({ ok: true });
    expect(checkRequestStateTarget(opened.payload, { name: "chaoscore_plan" })).toMatchObject({ ok: false, reason: "name" });
    expect(checkRequestStateTarget(opened.payload, { digest: other })).toMatchObject({ ok: false, reason: "digest" });
  });

  it("the digest is of the canonical JSON: key order does not matter, a value does", () => {
    expect(argumentsDigest({ a: 1, b: [true, "x"] })).toBe(argumentsDigest({ b: [true, "x"], a: 1 }));
    expect(argumentsDigest({ a: 1 })).not.toBe(argumentsDigest({ a: 2 }));
    expect(argumentsDigest(undefined)).toBe(argumentsDigest({}));
    expect(argumentsDigest({})).toMatch(/^[0-9a-f]{64}$/);
  });

  it("a payload version it does not read is refused as version, one without its fields as malformed", () => {
    // Sealed the way sealRequestState does, with a payload it would never write.
    const sealRaw = (payload: unknown, aad = "chaos-core/mrtr/v1|k1") => {
      const iv = randomBytes(12);
      const c = createCipheriv("aes-256-gcm", keyring.keyFor("k1")!, iv);
      c.setAAD(Buffer.from(aad));
      const ct = Buffer.concat([c.update(JSON.stringify(payload)), c.final()]);
      return `cc1.k1.${Buffer.concat([iv, ct, c.getAuthTag()]).toString("base64url")}`;
    };
    const { payload } = seal();
    expect(open(sealRaw(payload))).toMatchObject({ ok: true });
    // The associated data is part of the seal: the right key without it does not verify.
    expect(open(sealRaw(payload, ""))).toMatchObject({ ok: false, reason: "tag" });
    expect(open(sealRaw({ ...payload, v: 2 }))).toMatchObject({ ok: false, reason: "version" });
    expect(open(sealRaw({ ...payload, exp: "later" }))).toMatchObject({ ok: false, reason: "malformed" });
    expect(open(sealRaw([1]))).toMatchObject({ ok: false, reason: "version" });
  });

  it("refuses to seal what it could not open, or what would shadow its own fields", () => {
    const bad: Array<[Partial<SealInput>, RegExp]> = [
      [{ fields: { tenant: "globex" } }, /fields\.tenant: is a field of the state itself/],
      [{ fields: { jti: "x" } }, /fields\.jti/],
      [{ fields: { big: "x".repeat(5000) } }, /at most 4096/],
      [{ digest: "abc" }, /digest must be a lowercase hex SHA-256/],
      [{ flow: "short" }, /requestRef must be 16 to 128 base64url characters/],
      [{ method: "tools/list" as never }, /method must be one of tools\/call, prompts\/get, resources\/read/],
      [{ name: "" }, /name must be/],
      [{ phase: "" }, /phase is required/],
    ];
    for (const [change, message] of bad) {
      expect(() => seal(keyring, { ...INPUT, ...change }), message.source).toThrow(message);
    }
    expect(() => seal(keyring, INPUT, T0, 0)).toThrow(/ttlSeconds must be a whole number from 1 to 3600/);
    expect(() => seal(keyring, INPUT, T0, 3601)).toThrow(/ttlSeconds/);
    expect(seal(keyring, INPUT, T0, 3600).payload.exp).toBe(T0 + 3_600_000);
  });
});
