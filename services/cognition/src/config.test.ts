import { ConfigError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { fileURLToPath } from "node:url";
import { loadCognitionConfig } from "./config.js";

/** The installed app's root is the checkout here: its chaoscore.lock is the default. */
const CHECKOUT_LOCK = fileURLToPath(new URL("../../../chaoscore.lock", import.meta.url));

const KEY = "k".repeat(32);
const BASE = { CHAOS_CORE_CONTEXT_KEY: KEY, POLICY_ADDR: "127.0.0.1:50051", MEMORY_ADDR: "127.0.0.1:50052", LEDGER_ADDR: "127.0.0.1:50054" };

describe("loadCognitionConfig", () => {
  it("defaults to 127.0.0.1:50053, in-process plans and the heuristic provider", () => {
    expect(loadCognitionConfig(BASE)).toEqual({
      host: "127.0.0.1",
      port: 50053,
      contextKey: KEY,
      policyAddr: "127.0.0.1:50051",
      memoryAddr: "127.0.0.1:50052",
      ledgerAddr: "127.0.0.1:50054",
      plans: { kind: "memory" },
      provider: { id: "heuristic", selection: "inferred" },
      logLevel: "info",
      contractLockFile: CHECKOUT_LOCK,
      policySnapshots: true,
      httpAllowedAddresses: [],
      tenantUpstreams: { secrets: { env: {} } },
    });
    // Tenants' registry upstreams resolve their headers from the upstream secrets only, with or without an upstreams file.
    expect(loadCognitionConfig({ ...BASE, CHAOS_CORE_UPSTREAM_SECRET_WIKI: "s", DATABASE_URL: "postgres://x", CHAOS_CORE_UPSTREAM_SECRETS_DIR: "/run/secrets/upstreams", CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES: "4096" }).tenantUpstreams).toEqual({
      secrets: { env: { CHAOS_CORE_UPSTREAM_SECRET_WIKI: "s" }, secretsDir: "/run/secrets/upstreams" },
      maxResultBytes: 4096,
    });
    expect(loadCognitionConfig({ ...BASE, CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS: "60" }).tenantUpstreams.tokenMaxSeconds).toBe(60);
    expect(() => loadCognitionConfig({ ...BASE, CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS: "5" })).toThrow(/CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS: must be at least 10/);
    expect(loadCognitionConfig({ ...BASE, CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "10.20.0.0/16, 127.0.0.1" }).httpAllowedAddresses).toEqual(["10.20.0.0/16", "127.0.0.1"]);
    expect(() => loadCognitionConfig({ ...BASE, CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "10.20.0.0/40" })).toThrow(/^CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "10\.20\.0\.0\/40" has an invalid prefix length/);
    expect(loadCognitionConfig({ ...BASE, CHAOS_CORE_POLICY_SNAPSHOTS: "off" }).policySnapshots).toBe(false);
    expect(() => loadCognitionConfig({ ...BASE, CHAOS_CORE_POLICY_SNAPSHOTS: "yes" })).toThrow(/CHAOS_CORE_POLICY_SNAPSHOTS: must be on or off/);
    expect(loadCognitionConfig({ ...BASE, CHAOS_CORE_CONTRACT_LOCK_FILE: "/etc/chaos/chaoscore.lock" }).contractLockFile).toBe("/etc/chaos/chaoscore.lock");
  });

  it("takes a second accepted call-context key while the key is rotated, and names a short one", () => {
    expect(loadCognitionConfig({ ...BASE, CHAOS_CORE_CONTEXT_KEY_ACCEPTED: "n".repeat(32) }).contextKeyAccepted).toBe("n".repeat(32));
    expect(() => loadCognitionConfig({ ...BASE, CHAOS_CORE_CONTEXT_KEY_ACCEPTED: "short" })).toThrow(/CHAOS_CORE_CONTEXT_KEY_ACCEPTED: must be at least 32 characters/);
  });

  it("keeps plans in Redis under a prefix when REDIS_URL is set", () => {
    expect(loadCognitionConfig({ ...BASE, REDIS_URL: "redis://r:6379" }).plans).toEqual({ kind: "redis", url: "redis://r:6379", prefix: "chaoscore:" });
    expect(loadCognitionConfig({ ...BASE, REDIS_URL: "redis://r:6379", CHAOS_CORE_REDIS_PREFIX: "t:1:" }).plans).toMatchObject({ prefix: "t:1:" });
  });

  it("reads the provider from the same record", () => {
    expect(loadCognitionConfig({ ...BASE, OPENAI_BASE_URL: "http://127.0.0.1:1/v1", OPENAI_MODEL: "m" }).provider).toMatchObject({
      id: "openai-compatible",
      selection: "inferred",
    });
    expect(() => loadCognitionConfig({ ...BASE, CHAOS_CORE_PROVIDER: "openai" })).toThrow(/OPENAI_API_KEY/);
  });

  it("names every missing or bad variable", () => {
    let error: unknown;
    try {
      loadCognitionConfig({ PORT: "x", REDIS_URL: "http://nope" });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const name of ["CHAOS_CORE_CONTEXT_KEY", "POLICY_ADDR", "MEMORY_ADDR", "LEDGER_ADDR", "PORT", "REDIS_URL"]) expect(message).toContain(name);
  });
});
