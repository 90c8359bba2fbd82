import { ConfigError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { loadCouncilConfig } from "./config.js";

const KEY = "k".repeat(32);

function configError(env: Record<string, string | undefined>): string {
  try {
    loadCouncilConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("council config", () => {
  it("has defaults for host, port and log level", () => {
    expect(loadCouncilConfig({ CHAOS_CORE_CONTEXT_KEY: KEY, DATABASE_URL: "postgres://db/x" })).toEqual({
      host: "127.0.0.1",
      port: 50055,
      storage: { kind: "postgres", url: "postgres://db/x" },
      contextKey: KEY,
      logLevel: "info",
    });
  });

  it("reads every variable, and prefers DATABASE_URL over a data directory", () => {
    const config = loadCouncilConfig({
      CHAOS_CORE_CONTEXT_KEY: KEY,
      HOST: "0.0.0.0",
      PORT: "6005",
      LOG_LEVEL: "warn",
      CHAOS_CORE_DATA_DIR: "/data",
    });
    expect(config).toMatchObject({ host: "0.0.0.0", port: 6005, logLevel: "warn", storage: { kind: "pglite", dataDir: "/data" } });
    expect(loadCouncilConfig({ CHAOS_CORE_CONTEXT_KEY: KEY, CHAOS_CORE_DATA_DIR: "/data", DATABASE_URL: "postgresql://h/db" }).storage).toEqual({
      kind: "postgres",
      url: "postgresql://h/db",
    });
  });

  it("names each bad variable", () => {
    expect(configError({ DATABASE_URL: "postgres://db/x" })).toMatch(/CHAOS_CORE_CONTEXT_KEY: is required/);
    expect(configError({ DATABASE_URL: "postgres://db/x", CHAOS_CORE_CONTEXT_KEY: "short" })).toMatch(
      /CHAOS_CORE_CONTEXT_KEY: must be at least 32 characters/,
    );
    expect(configError({ CHAOS_CORE_CONTEXT_KEY: KEY })).toMatch(/DATABASE_URL: set DATABASE_URL \(Postgres\) or CHAOS_CORE_DATA_DIR/);
    expect(configError({ CHAOS_CORE_CONTEXT_KEY: KEY, DATABASE_URL: "mysql://db" })).toMatch(/DATABASE_URL: must be a postgres/);
    expect(configError({ CHAOS_CORE_CONTEXT_KEY: KEY, DATABASE_URL: "postgres://db", PORT: "http" })).toMatch(/PORT:/);
    expect(configError({ CHAOS_CORE_CONTEXT_KEY: KEY, DATABASE_URL: "postgres://db", LOG_LEVEL: "loud" })).toMatch(/LOG_LEVEL:/);
  });
});
