import { resolve } from "node:path";
import { ConfigError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { loadPolicyConfig } from "./config.js";

const KEY = "k".repeat(32);

describe("loadPolicyConfig", () => {
  it("uses the file store under CHAOS_CORE_DATA_DIR with the default host and port", () => {
    expect(loadPolicyConfig({ CHAOS_CORE_DATA_DIR: "some/dir", CHAOS_CORE_CONTEXT_KEY: KEY })).toEqual({
      host: "127.0.0.1",
      port: 50051,
      contextKey: KEY,
      logLevel: "info",
      adminPort: 50056,
      store: { kind: "file", path: resolve("some/dir", "policy.json") },
      httpAllowedAddresses: [],
    });
  });

  it("reads what a tenant's upstream is checked against: the operator's file and allowed ranges, a bad range named", () => {
    const config = loadPolicyConfig({ CHAOS_CORE_DATA_DIR: "d", CHAOS_CORE_CONTEXT_KEY: KEY, CHAOS_CORE_UPSTREAMS_FILE: "ops/upstreams.json", CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "10.20.0.0/16" });
    expect(config).toMatchObject({ upstreamsFile: resolve("ops/upstreams.json"), httpAllowedAddresses: ["10.20.0.0/16"] });
    expect(() => loadPolicyConfig({ CHAOS_CORE_DATA_DIR: "d", CHAOS_CORE_CONTEXT_KEY: KEY, CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "not-an-address" })).toThrow(/^CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: /);
  });

  it("reads the admin port and where tenant generations are published", () => {
    const config = loadPolicyConfig({
      DATABASE_URL: "postgres://u@db:5432/chaos",
      CHAOS_CORE_CONTEXT_KEY: KEY,
      CHAOS_CORE_ADMIN_PORT: "7000",
      REDIS_URL: "redis://redis:6379",
    });
    expect(config).toMatchObject({ adminPort: 7000, redis: { url: "redis://redis:6379", prefix: "chaoscore:" } });
    expect(() => loadPolicyConfig({ DATABASE_URL: "postgres://u@db/c", CHAOS_CORE_CONTEXT_KEY: KEY, CHAOS_CORE_ADMIN_PORT: "x" })).toThrow(
      /CHAOS_CORE_ADMIN_PORT/,
    );
  });

  it("prefers Postgres when DATABASE_URL is set", () => {
    const config = loadPolicyConfig({
      DATABASE_URL: "postgres://u@db:5432/chaos",
      CHAOS_CORE_DATA_DIR: "/data",
      CHAOS_CORE_CONTEXT_KEY: KEY,
      HOST: "0.0.0.0",
      PORT: "6000",
      LOG_LEVEL: "warn",
    });
    expect(config).toMatchObject({
      host: "0.0.0.0",
      port: 6000,
      logLevel: "warn",
      store: { kind: "postgres", databaseUrl: "postgres://u@db:5432/chaos" },
    });
  });

  it.each([
    [{ CHAOS_CORE_DATA_DIR: "/d" }, "CHAOS_CORE_CONTEXT_KEY: is required"],
    [{ CHAOS_CORE_DATA_DIR: "/d", CHAOS_CORE_CONTEXT_KEY: "short" }, "CHAOS_CORE_CONTEXT_KEY: must be at least 32 characters"],
    [{ CHAOS_CORE_CONTEXT_KEY: KEY }, "DATABASE_URL: set DATABASE_URL (Postgres) or CHAOS_CORE_DATA_DIR (a policy.json file there)"],
    [{ CHAOS_CORE_DATA_DIR: "/d", CHAOS_CORE_CONTEXT_KEY: KEY, PORT: "70000" }, "PORT: must be between 0 and 65535"],
    [{ CHAOS_CORE_DATA_DIR: "/d", CHAOS_CORE_CONTEXT_KEY: KEY, PORT: "http" }, "PORT:"],
    [{ DATABASE_URL: "not a url", CHAOS_CORE_CONTEXT_KEY: KEY }, "DATABASE_URL: must be a postgres:// or postgresql:// URL"],
    [{ CHAOS_CORE_DATA_DIR: "/d", CHAOS_CORE_CONTEXT_KEY: KEY, LOG_LEVEL: "loud" }, "LOG_LEVEL:"],
  ])("fails fast naming the variable: %j", (env, message) => {
    expect(() => loadPolicyConfig(env)).toThrow(ConfigError);
    expect(() => loadPolicyConfig(env)).toThrow(message);
  });

  it("treats an empty variable as unset", () => {
    expect(loadPolicyConfig({ CHAOS_CORE_DATA_DIR: "/d", CHAOS_CORE_CONTEXT_KEY: KEY, PORT: "" }).port).toBe(50051);
  });
});
