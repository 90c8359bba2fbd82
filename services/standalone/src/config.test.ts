import { describe, expect, it } from "vitest";
import { ConfigError } from "@chaos-core/kit";
import { loadStandaloneConfig, resolveDataDir, userDataDir } from "./config.js";

const noHome = () => "";

describe("the data directory every chaos-core command defaults to", () => {
  it("is the per-user data directory of each platform, never the working directory", () => {
    expect(userDataDir({ HOME: "/home/ada" }, "linux", noHome)).toBe("/home/ada/.local/share/chaos-core");
    expect(userDataDir({ HOME: "/home/ada", XDG_DATA_HOME: "/srv/xdg" }, "linux", noHome)).toBe("/srv/xdg/chaos-core");
    // The XDG spec: a relative XDG_DATA_HOME is ignored.
    expect(userDataDir({ HOME: "/home/ada", XDG_DATA_HOME: "xdg" }, "linux", noHome)).toBe("/home/ada/.local/share/chaos-core");
    expect(userDataDir({}, "freebsd", () => "/usr/home/ada")).toBe("/usr/home/ada/.local/share/chaos-core");
    expect(userDataDir({ HOME: "/Users/ada" }, "darwin", noHome)).toBe("/Users/ada/Library/Application Support/chaos-core");
    expect(userDataDir({ LOCALAPPDATA: "C:\\Users\\ada\\AppData\\Local" }, "win32", noHome)).toBe("C:\\Users\\ada\\AppData\\Local\\chaos-core");
    expect(userDataDir({}, "win32", () => "C:\\Users\\ada")).toBe("C:\\Users\\ada\\AppData\\Local\\chaos-core");
  });

  it("is CHAOS_CORE_DATA_DIR when set, resolved against the working directory", () => {
    expect(resolveDataDir({ CHAOS_CORE_DATA_DIR: "state", HOME: "/home/ada" }, "/work")).toBe("/work/state");
    expect(resolveDataDir({ CHAOS_CORE_DATA_DIR: "", HOME: "/home/ada", XDG_DATA_HOME: "/srv/xdg" }, "/work")).toBe("/srv/xdg/chaos-core");
  });

  it("without a home directory, says to set CHAOS_CORE_DATA_DIR", () => {
    expect(() => userDataDir({}, "linux", noHome)).toThrow(ConfigError);
    expect(() => userDataDir({}, "linux", noHome)).toThrow(/CHAOS_CORE_DATA_DIR/);
  });
});

describe("standalone's webhook configuration", () => {
  const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;

  it("is the ledger's: off by default, on with a URL and a secret", () => {
    expect(loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: "/tmp/cc" }).webhooks).toBeUndefined();
    const on = loadStandaloneConfig({
      CHAOS_CORE_DATA_DIR: "/tmp/cc",
      CHAOS_CORE_WEBHOOK_URL: "http://127.0.0.1:9000/hook",
      CHAOS_CORE_WEBHOOK_SECRET: secret,
      CHAOS_CORE_WEBHOOK_RETRY_SECONDS: "1,2",
      CHAOS_CORE_PUBLIC_URL: "http://127.0.0.1:8080",
    });
    expect(on.webhooks).toEqual({ url: "http://127.0.0.1:9000/hook", keys: [Buffer.alloc(32, 7)], timeoutMs: 5000, retrySeconds: [1, 2], publicUrl: "http://127.0.0.1:8080" });
  });

  it("refuses a URL without a secret, and plain http off this machine, naming the variable", () => {
    expect(() => loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: "/tmp/cc", CHAOS_CORE_WEBHOOK_URL: "https://hooks.example.com" })).toThrow(
      /CHAOS_CORE_WEBHOOK_SECRET: is required with CHAOS_CORE_WEBHOOK_URL/,
    );
    expect(() => loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: "/tmp/cc", CHAOS_CORE_WEBHOOK_URL: "http://hooks.example.com", CHAOS_CORE_WEBHOOK_SECRET: secret })).toThrow(
      /CHAOS_CORE_WEBHOOK_URL: must be https:\/\//,
    );
  });
});

describe("the Redis prefix", () => {
  it("is CHAOS_CORE_REDIS_PREFIX, as the services and the registry commands read it; chaoscore: by default; a bad one named", () => {
    expect(loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: "/tmp/cc" }).redisPrefix).toBe("chaoscore:");
    expect(loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: "/tmp/cc", CHAOS_CORE_REDIS_PREFIX: "team-a:" }).redisPrefix).toBe("team-a:");
    expect(() => loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: "/tmp/cc", CHAOS_CORE_REDIS_PREFIX: "has space" })).toThrow(/CHAOS_CORE_REDIS_PREFIX: must be 1 to 64 visible ASCII characters/);
  });
});
