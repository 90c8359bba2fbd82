import { describe, expect, it } from "vitest";
import { ConfigError, loadLifecycleConfig } from "./config.js";

describe("loadLifecycleConfig", () => {
  it("defaults to a 25 s grace and migrating on start", () => {
    expect(loadLifecycleConfig({})).toEqual({ shutdownGraceMs: 25_000, migrate: "auto" });
  });

  it("reads CHAOS_CORE_SHUTDOWN_GRACE_SECONDS and CHAOS_CORE_MIGRATE", () => {
    expect(loadLifecycleConfig({ CHAOS_CORE_SHUTDOWN_GRACE_SECONDS: "50", CHAOS_CORE_MIGRATE: "verify" })).toEqual({ shutdownGraceMs: 50_000, migrate: "verify" });
  });

  it.each([
    [{ CHAOS_CORE_SHUTDOWN_GRACE_SECONDS: "soon" }, "CHAOS_CORE_SHUTDOWN_GRACE_SECONDS", /must be a number of seconds/],
    [{ CHAOS_CORE_SHUTDOWN_GRACE_SECONDS: "-1" }, "CHAOS_CORE_SHUTDOWN_GRACE_SECONDS", /between 0 and 3600/],
    [{ CHAOS_CORE_SHUTDOWN_GRACE_SECONDS: "1.5" }, "CHAOS_CORE_SHUTDOWN_GRACE_SECONDS", /whole number/],
    [{ CHAOS_CORE_MIGRATE: "always" }, "CHAOS_CORE_MIGRATE", /"auto" .*"verify"/],
  ])("refuses %o naming the variable", (env, variable, message) => {
    let caught: unknown;
    try {
      loadLifecycleConfig(env);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const issue = (caught as ConfigError).issues[0]!;
    expect(issue.variable).toBe(variable);
    expect(issue.message).toMatch(message);
  });
});
