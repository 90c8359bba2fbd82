import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { signatureOf, signWebhook, webhookId } from "./signature.js";

const secret = (key: Buffer) => `whsec_${key.toString("base64")}`;

describe("Standard Webhooks v1 signatures", () => {
  it("matches the specification's test vector", () => {
    // From the Standard Webhooks reference libraries' tests.
    const key = Buffer.from("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "base64");
    expect(signatureOf(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}')).toBe("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  });

  it("verifies with the standardwebhooks library under each of several secrets, and under no other", () => {
    const [a, b, c] = [randomBytes(32), randomBytes(24), randomBytes(32)];
    const body = JSON.stringify({ type: "approval.pending", data: { tenant: "acme", ledger_seq: 7 } });
    const headers = signWebhook([a, b], webhookId("acme", 7), body, new Date());
    expect(headers["webhook-id"]).toBe("msg_acme_7");
    expect(headers["webhook-signature"].split(" ")).toHaveLength(2);
    expect(new Webhook(secret(a)).verify(body, { ...headers })).toEqual(JSON.parse(body));
    expect(new Webhook(secret(b)).verify(body, { ...headers })).toEqual(JSON.parse(body));
    expect(() => new Webhook(secret(c)).verify(body, { ...headers })).toThrow(/No matching signature/);
    // One changed byte of the body, or another id, and nothing matches.
    expect(() => new Webhook(secret(a)).verify(body.replace("7", "8"), { ...headers })).toThrow(/No matching signature/);
    expect(() => new Webhook(secret(a)).verify(body, { ...headers, "webhook-id": "msg_acme_8" })).toThrow(/No matching signature/);
  });

  it("stamps the attempt's time in whole seconds, which a receiver refuses once it is old", () => {
    const key = randomBytes(32);
    const at = new Date(Date.now() - 10 * 60 * 1000 + 123);
    const headers = signWebhook([key], "msg_acme_1", "{}", at);
    expect(headers["webhook-timestamp"]).toBe(String(Math.floor(at.getTime() / 1000)));
    expect(() => new Webhook(secret(key)).verify("{}", { ...headers })).toThrow(/too old/);
  });

  it("needs a key", () => {
    expect(() => signWebhook([], "msg_acme_1", "{}", new Date())).toThrow(/at least one signing key/);
  });
});
