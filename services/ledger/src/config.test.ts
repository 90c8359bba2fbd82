import { randomBytes } from "node:crypto";
import { ConfigError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { DEFAULT_WEBHOOK_RETRY_SECONDS, loadLedgerConfig } from "./config.js";

const BASE = {
  CHAOS_CORE_DATA_DIR: "/tmp/x",
  CHAOS_CORE_CONTEXT_KEY: "k".repeat(32),
  CHAOS_CORE_LEDGER_KEYS_FILE: "/tmp/keys.json",
  POLICY_ADDR: "127.0.0.1:50051",
};
const key = randomBytes(32);
const SECRET = `whsec_${key.toString("base64")}`;

/** The message of the ConfigError `env` raises. */
function problem(env: Record<string, string>): string {
  try {
    loadLedgerConfig({ ...BASE, ...env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("no ConfigError");
}

describe("the ledger's webhook configuration", () => {
  it("is off without CHAOS_CORE_WEBHOOK_URL", () => {
    expect(loadLedgerConfig(BASE).webhooks).toBeUndefined();
  });

  it("reads the URL, the secrets, the timeout, the schedule and the public URL", () => {
    const other = randomBytes(24);
    const config = loadLedgerConfig({
      ...BASE,
      CHAOS_CORE_WEBHOOK_URL: "https://hooks.example.com/chaos",
      CHAOS_CORE_WEBHOOK_SECRET: `${SECRET}, whsec_${other.toString("base64")}`,
      CHAOS_CORE_WEBHOOK_TIMEOUT_MS: "2500",
      CHAOS_CORE_WEBHOOK_RETRY_SECONDS: "0.1, 2,60",
      CHAOS_CORE_PUBLIC_URL: "https://chaos.example.com/",
    });
    expect(config.webhooks).toEqual({
      url: "https://hooks.example.com/chaos",
      keys: [key, other],
      timeoutMs: 2500,
      retrySeconds: [0.1, 2, 60],
      publicUrl: "https://chaos.example.com",
    });
  });

  it("defaults to a 5 s timeout and Standard Webhooks' schedule; http is fine to a loopback host", () => {
    const config = loadLedgerConfig({ ...BASE, CHAOS_CORE_WEBHOOK_URL: "http://127.0.0.1:9000/hook", CHAOS_CORE_WEBHOOK_SECRET: SECRET });
    expect(config.webhooks).toMatchObject({ timeoutMs: 5000, retrySeconds: [5, 300, 1800, 7200, 18000, 36000, 36000] });
    expect(DEFAULT_WEBHOOK_RETRY_SECONDS).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    expect(config.webhooks?.publicUrl).toBeUndefined();
    expect(loadLedgerConfig({ ...BASE, CHAOS_CORE_WEBHOOK_URL: "http://[::1]:9000/", CHAOS_CORE_WEBHOOK_SECRET: SECRET }).webhooks?.url).toBe("http://[::1]:9000/");
  });

  it("needs the secret with the URL and the URL with the secret", () => {
    expect(problem({ CHAOS_CORE_WEBHOOK_URL: "https://hooks.example.com" })).toMatch(/CHAOS_CORE_WEBHOOK_SECRET: is required with CHAOS_CORE_WEBHOOK_URL/);
    expect(problem({ CHAOS_CORE_WEBHOOK_SECRET: SECRET })).toMatch(/CHAOS_CORE_WEBHOOK_URL: is required with CHAOS_CORE_WEBHOOK_SECRET/);
  });

  it("refuses plain http to another host, other schemes and credentials in the URL, naming the variable", () => {
    const env = (url: string) => ({ CHAOS_CORE_WEBHOOK_URL: url, CHAOS_CORE_WEBHOOK_SECRET: SECRET });
    expect(problem(env("http://hooks.example.com/x"))).toMatch(/CHAOS_CORE_WEBHOOK_URL: must be https:\/\/ \(http:\/\/ only to a loopback host/);
    expect(problem(env("ftp://hooks.example.com/x"))).toMatch(/CHAOS_CORE_WEBHOOK_URL: must be an https:\/\/ URL/);
    expect(problem(env("https://u:p@hooks.example.com/x"))).toMatch(/CHAOS_CORE_WEBHOOK_URL: must not hold credentials/);
    expect(problem(env("hooks.example.com"))).toMatch(/CHAOS_CORE_WEBHOOK_URL: must be a URL/);
  });

  it("refuses a secret that is not whsec_ and 24 bytes or more, without echoing it", () => {
    const short = `whsec_${randomBytes(16).toString("base64")}`;
    for (const bad of [short, key.toString("base64"), "whsec_not base64!", `${SECRET},${short}`]) {
      const message = problem({ CHAOS_CORE_WEBHOOK_URL: "https://hooks.example.com", CHAOS_CORE_WEBHOOK_SECRET: bad });
      expect(message).toMatch(/CHAOS_CORE_WEBHOOK_SECRET: (the secret|secret 2 of 2) must be whsec_ followed by the base64 of at least 24 random bytes/);
      expect(message).not.toContain(bad.slice(6, 20));
    }
  });

  it("refuses a bad timeout, schedule or public URL, naming each", () => {
    const on = { CHAOS_CORE_WEBHOOK_URL: "https://hooks.example.com", CHAOS_CORE_WEBHOOK_SECRET: SECRET };
    expect(problem({ ...on, CHAOS_CORE_WEBHOOK_TIMEOUT_MS: "60000" })).toMatch(/CHAOS_CORE_WEBHOOK_TIMEOUT_MS: must be from 100 to 20000/);
    expect(problem({ ...on, CHAOS_CORE_WEBHOOK_TIMEOUT_MS: "soon" })).toMatch(/CHAOS_CORE_WEBHOOK_TIMEOUT_MS: must be a number of milliseconds/);
    for (const bad of ["5,,300", "0", "-1", "5,x", "999999999"]) {
      expect(problem({ ...on, CHAOS_CORE_WEBHOOK_RETRY_SECONDS: bad }), bad).toMatch(/CHAOS_CORE_WEBHOOK_RETRY_SECONDS: must be 1 to 20 comma-separated waits/);
    }
    expect(problem({ ...on, CHAOS_CORE_PUBLIC_URL: "chaos.example.com" })).toMatch(/CHAOS_CORE_PUBLIC_URL: must be an absolute URL/);
  });
});
