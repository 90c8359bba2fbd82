import { describe, expect, it } from "vitest";
import { ConfigError } from "@chaos-core/kit";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { generateKeyPairSync } from "node:crypto";
import { verifierKey } from "@chaos-core/kit";
import { loadEdgeAloneConfig, loadEdgeConfig, MAX_BODY_BYTES } from "./config.js";

describe("loadEdgeConfig", () => {
  it("defaults to loopback, port 3000, a 4 MiB body limit and 100 sessions per API key", () => {
    const config = loadEdgeConfig({});
    expect(config.http).toEqual({ host: "127.0.0.1", port: 3000, maxBodyBytes: 4 * 1024 * 1024, maxSessionsPerKey: 100, console: {} });
    expect(config.logLevel).toBe("info");
    expect(config.redisUrl).toBeUndefined();
    // The approval console is on by default; stdio's listener takes a free port.
    expect(config.console).toEqual({ listenerPort: 0 });
    expect(config.publicUrl).toBeUndefined();
  });

  it("turns the console off, and takes stdio's console port", () => {
    expect(loadEdgeConfig({ CHAOS_CORE_CONSOLE: "off" }).console).toBeUndefined();
    expect(loadEdgeConfig({ CHAOS_CORE_CONSOLE: "off" }).http.console).toBeUndefined();
    expect(loadEdgeConfig({ CHAOS_CORE_CONSOLE: "on", CHAOS_CORE_CONSOLE_PORT: "4100" }).console).toEqual({ listenerPort: 4100 });
  });

  it("adds CHAOS_CORE_PUBLIC_URL's host and origin to the Host and Origin lists", () => {
    // A loopback bind checks the loopback names: the public host joins them.
    const loopback = loadEdgeConfig({ CHAOS_CORE_PUBLIC_URL: "https://chaos.example.com/team-a/" });
    expect(loopback.publicUrl).toBe("https://chaos.example.com/team-a");
    expect(loopback.console).toEqual({ publicUrl: "https://chaos.example.com/team-a", listenerPort: 0 });
    expect(loopback.http.console).toEqual({ publicUrl: "https://chaos.example.com/team-a" });
    expect(loopback.http.allowedHosts).toEqual(["localhost", "127.0.0.1", "[::1]", "chaos.example.com"]);
    expect(loopback.http.allowedOrigins).toEqual(["https://chaos.example.com"]);
    const listed = loadEdgeConfig({
      HOST: "0.0.0.0",
      CHAOS_CORE_API_KEYS_FILE: "/k.json",
      MCP_ALLOWED_HOSTS: "edge.internal",
      MCP_ALLOWED_ORIGINS: "https://app.example.com",
      CHAOS_CORE_PUBLIC_URL: "http://chaos.example.com:8080",
    });
    expect(listed.http.allowedHosts).toEqual(["edge.internal", "chaos.example.com"]);
    expect(listed.http.allowedOrigins).toEqual(["https://app.example.com", "http://chaos.example.com:8080"]);
    // Without a Host list on a non-loopback bind (API keys guard it) there is no list to add to.
    const unlisted = loadEdgeConfig({ HOST: "0.0.0.0", CHAOS_CORE_API_KEYS_FILE: "/k.json", CHAOS_CORE_PUBLIC_URL: "https://chaos.example.com" });
    expect(unlisted.http.allowedHosts).toBeUndefined();
    expect(unlisted.http.allowedOrigins).toEqual(["https://chaos.example.com"]);
  });

  it("reads every variable it knows", () => {
    const config = loadEdgeAloneConfig({
      HOST: "0.0.0.0",
      PORT: "8080",
      REDIS_URL: "redis://redis:6379/0",
      POLICY_ADDR: "policy:50051",
      MEMORY_ADDR: "memory:50052",
      COGNITION_ADDR: "cognition:50053",
      COUNCIL_ADDR: "council:50055",
      CHAOS_CORE_CONTEXT_KEY: "k".repeat(32),
      MCP_ALLOWED_HOSTS: "mcp.example.com, edge.internal",
      MCP_ALLOWED_ORIGINS: "https://app.example.com,http://localhost:5173",
      CHAOS_CORE_MAX_BODY_BYTES: "1048576",
      CHAOS_CORE_API_KEYS_FILE: "/etc/chaos-core/keys.json",
      CHAOS_CORE_SESSION_TTL_SECONDS: "600",
      CHAOS_CORE_MAX_SESSIONS_PER_KEY: "20",
      CHAOS_CORE_APPROVAL_WAIT_SECONDS: "90",
      CHAOS_CORE_MRTR_KEYS_FILE: "/etc/chaos-core/mrtr-keyring.json",
      CHAOS_CORE_MRTR_TTL_SECONDS: "300",
      CHAOS_CORE_CONTRACT_LOCK_FILE: "/app/chaoscore.lock",
      LOG_LEVEL: "debug",
    });
    expect(config).toEqual({
      http: {
        host: "0.0.0.0",
        port: 8080,
        maxBodyBytes: 1048576,
        maxSessionsPerKey: 20,
        allowedHosts: ["mcp.example.com", "edge.internal"],
        allowedOrigins: ["https://app.example.com", "http://localhost:5173"],
        apiKeysFile: "/etc/chaos-core/keys.json",
        console: {},
      },
      redisUrl: "redis://redis:6379/0",
      policyAddr: "policy:50051",
      memoryAddr: "memory:50052",
      cognitionAddr: "cognition:50053",
      councilAddr: "council:50055",
      contextKey: "k".repeat(32),
      sessionTtlSeconds: 600,
      logLevel: "debug",
      console: { listenerPort: 0 },
      approvalWaitSeconds: 90,
      mrtrKeysFile: "/etc/chaos-core/mrtr-keyring.json",
      mrtrTtlSeconds: 300,
      contracts: { lockFile: "/app/chaoscore.lock", verifierKeys: [] },
      redisPrefix: "chaoscore:",
    });
  });

  it("names the variable that is wrong", () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ PORT: "not-a-port" }, /PORT/],
      [{ CHAOS_CORE_MAX_BODY_BYTES: String(MAX_BODY_BYTES + 1) }, /CHAOS_CORE_MAX_BODY_BYTES/],
      [{ REDIS_URL: "localhost:6379" }, /REDIS_URL: must be a redis:\/\//],
      [{ MCP_ALLOWED_ORIGINS: "https://app.example.com/path" }, /MCP_ALLOWED_ORIGINS/],
      [{ LOG_LEVEL: "loud" }, /LOG_LEVEL/],
      [{ CHAOS_CORE_MAX_SESSIONS_PER_KEY: "0" }, /CHAOS_CORE_MAX_SESSIONS_PER_KEY/],
      [{ CHAOS_CORE_CONSOLE: "yes" }, /CHAOS_CORE_CONSOLE: must be "on" or "off"/],
      [{ CHAOS_CORE_CONSOLE_PORT: "70000" }, /CHAOS_CORE_CONSOLE_PORT: must be between 0 and 65535/],
      [{ CHAOS_CORE_PUBLIC_URL: "chaos.example.com" }, /CHAOS_CORE_PUBLIC_URL: must be an absolute URL/],
      [{ CHAOS_CORE_PUBLIC_URL: "ftp://chaos.example.com" }, /CHAOS_CORE_PUBLIC_URL: must be an http or https URL, got ftp:/],
      [{ CHAOS_CORE_PUBLIC_URL: "https://chaos.example.com/?a=1" }, /CHAOS_CORE_PUBLIC_URL: must not carry a query or a fragment/],
      [{ CHAOS_CORE_PUBLIC_URL: "https://u:p@chaos.example.com" }, /CHAOS_CORE_PUBLIC_URL: must not carry a user name or password/],
    ];
    for (const [env, message] of cases) {
      expect(() => loadEdgeConfig(env), JSON.stringify(env)).toThrow(ConfigError);
      expect(() => loadEdgeConfig(env)).toThrow(message);
    }
  });

  it("waits 300 s for a person on the console by default, and at most an hour", () => {
    expect(loadEdgeConfig({}).approvalWaitSeconds).toBe(300);
    expect(loadEdgeConfig({ CHAOS_CORE_APPROVAL_WAIT_SECONDS: "3600" }).approvalWaitSeconds).toBe(3600);
    for (const [value, message] of [
      ["3601", /CHAOS_CORE_APPROVAL_WAIT_SECONDS: must be at most 3600 seconds \(an hour\)/],
      ["0", /CHAOS_CORE_APPROVAL_WAIT_SECONDS: must be at least 1 second/],
      ["1.5", /CHAOS_CORE_APPROVAL_WAIT_SECONDS: must be a whole number of seconds/],
      ["soon", /CHAOS_CORE_APPROVAL_WAIT_SECONDS: must be a whole number of seconds/],
    ] as const) {
      expect(() => loadEdgeConfig({ CHAOS_CORE_APPROVAL_WAIT_SECONDS: value }), value).toThrow(message);
    }
  });

  it("takes a non-loopback HOST without a keys file or an issuer (the registry's keys are then required)", () => {
    const config = loadEdgeConfig({ HOST: "0.0.0.0" });
    expect(config.http.host).toBe("0.0.0.0");
    expect(config.http.apiKeysFile).toBeUndefined();
    expect(loadEdgeConfig({ HOST: "localhost" }).http.host).toBe("localhost");
  });

  it("requires the service addresses and the context key when the edge runs alone", () => {
    expect(() => loadEdgeAloneConfig({})).toThrow(
      /POLICY_ADDR: required[\s\S]*MEMORY_ADDR: required[\s\S]*COGNITION_ADDR: required[\s\S]*COUNCIL_ADDR: required[\s\S]*CHAOS_CORE_CONTEXT_KEY: required/,
    );
  });

  it("takes a headless Service's dns:/// name or an address list for a service, and names the variable of a bad one", () => {
    const alone = {
      POLICY_ADDR: "policy:50051",
      MEMORY_ADDR: "memory:50052",
      COGNITION_ADDR: "dns:///cognition-headless.chaos.svc.cluster.local:50053",
      COUNCIL_ADDR: "ipv4:10.0.0.7:50055,10.0.0.8:50055",
      CHAOS_CORE_CONTEXT_KEY: "k".repeat(32),
      CHAOS_CORE_MRTR_KEYS_FILE: "/k/mrtr.json",
    };
    const config = loadEdgeAloneConfig(alone);
    expect(config.cognitionAddr).toBe("dns:///cognition-headless.chaos.svc.cluster.local:50053");
    expect(config.councilAddr).toBe("ipv4:10.0.0.7:50055,10.0.0.8:50055");
    expect(() => loadEdgeAloneConfig({ ...alone, COGNITION_ADDR: "dns://cognition:50053" })).toThrow(
      /COGNITION_ADDR: "dns:\/\/cognition:50053": write dns:\/\/\/host:port \(three slashes\); must be host:port, dns:\/\/\/host:port/,
    );
    expect(() => loadEdgeConfig({ LEDGER_ADDR: "http://ledger:50054" })).toThrow(/LEDGER_ADDR: "http:\/\/ledger:50054" has the scheme http:/);
  });

  it("seals requestState for 600 s by default, at most an hour; the edge alone needs a keyring, standalone does not", () => {
    const standalone = loadEdgeConfig({});
    expect(standalone.mrtrTtlSeconds).toBe(600);
    expect(standalone.mrtrKeysFile).toBeUndefined();
    expect(loadEdgeConfig({ CHAOS_CORE_MRTR_TTL_SECONDS: "3600" }).mrtrTtlSeconds).toBe(3600);
    for (const [value, message] of [
      ["3601", /CHAOS_CORE_MRTR_TTL_SECONDS: must be at most 3600 seconds \(an hour\)/],
      ["0", /CHAOS_CORE_MRTR_TTL_SECONDS: must be at least 1 second/],
      ["2.5", /CHAOS_CORE_MRTR_TTL_SECONDS: must be a whole number of seconds/],
      ["soon", /CHAOS_CORE_MRTR_TTL_SECONDS: must be a whole number of seconds/],
    ] as const) {
      expect(() => loadEdgeConfig({ CHAOS_CORE_MRTR_TTL_SECONDS: value }), value).toThrow(message);
    }
    const alone = {
      POLICY_ADDR: "policy:50051",
      MEMORY_ADDR: "memory:50052",
      COGNITION_ADDR: "cognition:50053",
      COUNCIL_ADDR: "council:50055",
      CHAOS_CORE_CONTEXT_KEY: "k".repeat(32),
    };
    expect(() => loadEdgeAloneConfig(alone)).toThrow(ConfigError);
    expect(() => loadEdgeAloneConfig(alone)).toThrow(
      /^invalid configuration:\n {2}CHAOS_CORE_MRTR_KEYS_FILE: required when the edge runs alone: the keyring that seals multi-round-trip requestState \(there is no default key; every edge replica mounts the same file\)$/,
    );
    expect(loadEdgeAloneConfig({ ...alone, CHAOS_CORE_MRTR_KEYS_FILE: "/k/mrtr.json" }).mrtrKeysFile).toBe("/k/mrtr.json");
  });

  it("refuses CHAOS_CORE_GRPC_HEALTH_PORT: the edge runs no gRPC server, so the port would open nothing (the chart never sets it there)", () => {
    const alone = {
      POLICY_ADDR: "policy:50051",
      MEMORY_ADDR: "memory:50052",
      COGNITION_ADDR: "cognition:50053",
      COUNCIL_ADDR: "council:50055",
      CHAOS_CORE_CONTEXT_KEY: "k".repeat(32),
      CHAOS_CORE_MRTR_KEYS_FILE: "/k/mrtr.json",
    };
    expect(loadEdgeAloneConfig(alone).policyAddr).toBe("policy:50051");
    expect(() => loadEdgeAloneConfig({ ...alone, CHAOS_CORE_GRPC_HEALTH_PORT: "8090" })).toThrow(
      /^invalid configuration:\n {2}CHAOS_CORE_GRPC_HEALTH_PORT: is for the gRPC services only: the edge runs no gRPC server \(its probes are HTTP \/readyz and \/healthz\); unset it for the edge$/,
    );
  });

  it("keys Redis under CHAOS_CORE_REDIS_PREFIX when alone (chaoscore: by default), as the policy service publishes tenant generations", () => {
    const alone = {
      POLICY_ADDR: "policy:50051",
      MEMORY_ADDR: "memory:50052",
      COGNITION_ADDR: "cognition:50053",
      COUNCIL_ADDR: "council:50055",
      CHAOS_CORE_CONTEXT_KEY: "k".repeat(32),
      CHAOS_CORE_MRTR_KEYS_FILE: "/k/mrtr.json",
    };
    expect(loadEdgeAloneConfig(alone).redisPrefix).toBe("chaoscore:");
    expect(loadEdgeAloneConfig({ ...alone, CHAOS_CORE_REDIS_PREFIX: "" }).redisPrefix).toBe("chaoscore:");
    expect(loadEdgeAloneConfig({ ...alone, CHAOS_CORE_REDIS_PREFIX: "prod-a:" }).redisPrefix).toBe("prod-a:");
    expect(() => loadEdgeAloneConfig({ ...alone, CHAOS_CORE_REDIS_PREFIX: "has space" })).toThrow(
      /^invalid configuration:\n {2}CHAOS_CORE_REDIS_PREFIX: must be 1 to 64 visible ASCII characters$/,
    );
  });

  it("reads the contract keys and lockfile; by default the lock beside the installed app, and no keys", () => {
    // The installed app's root is the checkout here, from src (tests) and dist alike.
    const checkoutLock = fileURLToPath(new URL("../../../chaoscore.lock", import.meta.url));
    expect(loadEdgeConfig({}).contracts).toEqual({ lockFile: checkoutLock, verifierKeys: [] });
    expect(existsSync(checkoutLock)).toBe(true);
    const a = verifierKey("release", generateKeyPairSync("ed25519").publicKey);
    const b = verifierKey("operator", generateKeyPairSync("ed25519").publicKey);
    expect(loadEdgeConfig({ CHAOS_CORE_CONTRACT_KEYS: ` ${a} , ${b}`, CHAOS_CORE_CONTRACT_LOCK_FILE: "/etc/x.lock" }).contracts).toEqual({
      lockFile: "/etc/x.lock",
      verifierKeys: [a, b],
    });
    expect(() => loadEdgeConfig({ CHAOS_CORE_CONTRACT_KEYS: `${a},${a.slice(0, -4)}` })).toThrow(/CHAOS_CORE_CONTRACT_KEYS: key 2 of the list: /);
  });

  it("never echoes the context key", () => {
    const secret = "short-secret-value";
    try {
      loadEdgeConfig({ CHAOS_CORE_CONTEXT_KEY: secret });
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toMatch(/CHAOS_CORE_CONTEXT_KEY: must be at least 32 characters/);
      expect((err as Error).message).not.toContain(secret);
    }
  });

  describe("OAuth", () => {
    const base = { CHAOS_CORE_OAUTH_ISSUER: "https://auth.example.com", CHAOS_CORE_OAUTH_RESOURCE: "https://mcp.example.com/mcp" };

    it("is off without an issuer, and on with issuer and resource, with the documented defaults", () => {
      expect(loadEdgeConfig({}).http.oauth).toBeUndefined();
      const config = loadEdgeConfig(base);
      const expected = {
        issuer: "https://auth.example.com",
        resource: "https://mcp.example.com/mcp",
        algorithms: ["RS256", "ES256", "EdDSA"],
        tenantClaim: "tenant",
        acceptJwtTyp: false,
        clockSkewSeconds: 30,
      };
      expect(config.http.oauth).toEqual(expected);
      expect(config.oauth).toEqual(expected);
    });

    it("lets a non-loopback bind rely on OAuth alone", () => {
      expect(loadEdgeConfig({ ...base, HOST: "0.0.0.0" }).http.host).toBe("0.0.0.0");
    });

    it("reads every OAuth variable", () => {
      const config = loadEdgeConfig({
        ...base,
        CHAOS_CORE_OAUTH_JWKS_URL: "https://auth.example.com/keys",
        CHAOS_CORE_OAUTH_ALGORITHMS: "ES256, PS256",
        CHAOS_CORE_OAUTH_TENANT_CLAIM: "org_id",
        CHAOS_CORE_OAUTH_ACCEPT_JWT_TYP: "true",
        CHAOS_CORE_OAUTH_CLOCK_SKEW_SECONDS: "5",
        CHAOS_CORE_OAUTH_INTROSPECTION_URL: "https://auth.example.com/introspect",
        CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID: "chaos-core",
        CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE: "/run/secrets/introspection",
        CHAOS_CORE_OAUTH_INTROSPECTION_CACHE_SECONDS: "10",
      });
      expect(config.http.oauth).toEqual({
        issuer: "https://auth.example.com",
        resource: "https://mcp.example.com/mcp",
        jwksUrl: "https://auth.example.com/keys",
        algorithms: ["ES256", "PS256"],
        tenantClaim: "org_id",
        acceptJwtTyp: true,
        clockSkewSeconds: 5,
        introspection: {
          url: "https://auth.example.com/introspect",
          clientId: "chaos-core",
          clientSecretFile: "/run/secrets/introspection",
          cacheSeconds: 10,
        },
      });
    });

    it("names the variable that is wrong", () => {
      const fails = (env: Record<string, string>, message: RegExp) => expect(() => loadEdgeConfig(env)).toThrow(message);
      fails({ CHAOS_CORE_OAUTH_ISSUER: "https://auth.example.com" }, /CHAOS_CORE_OAUTH_RESOURCE: is required with CHAOS_CORE_OAUTH_ISSUER/);
      fails({ CHAOS_CORE_OAUTH_RESOURCE: "https://mcp.example.com/mcp" }, /CHAOS_CORE_OAUTH_RESOURCE: has no effect without CHAOS_CORE_OAUTH_ISSUER/);
      fails({ ...base, CHAOS_CORE_OAUTH_ISSUER: "http://auth.example.com" }, /CHAOS_CORE_OAUTH_ISSUER: must be an https URL \(http only to a loopback host\)/);
      fails({ ...base, CHAOS_CORE_OAUTH_RESOURCE: "https://mcp.example.com/mcp#x" }, /CHAOS_CORE_OAUTH_RESOURCE: must not carry a user name, password or fragment/);
      fails({ ...base, CHAOS_CORE_OAUTH_ALGORITHMS: "RS256,none" }, /CHAOS_CORE_OAUTH_ALGORITHMS: none is not accepted \(an unsigned token proves nothing\)/);
      fails({ ...base, CHAOS_CORE_OAUTH_ALGORITHMS: "HS256" }, /CHAOS_CORE_OAUTH_ALGORITHMS: HS256 is not accepted \(HMAC keys are shared secrets/);
      fails({ ...base, CHAOS_CORE_OAUTH_ACCEPT_JWT_TYP: "yes" }, /CHAOS_CORE_OAUTH_ACCEPT_JWT_TYP: must be "true" or "false"/);
      fails({ ...base, CHAOS_CORE_OAUTH_CLOCK_SKEW_SECONDS: "600" }, /CHAOS_CORE_OAUTH_CLOCK_SKEW_SECONDS: must be at most 300 seconds/);
      fails(
        { ...base, CHAOS_CORE_OAUTH_INTROSPECTION_URL: "https://auth.example.com/introspect" },
        /CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID: is required with CHAOS_CORE_OAUTH_INTROSPECTION_URL[\s\S]*CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE: is required/,
      );
      // A loopback issuer may be plain http: a local test or development authorization server.
      expect(loadEdgeConfig({ ...base, CHAOS_CORE_OAUTH_ISSUER: "http://127.0.0.1:9000" }).oauth?.issuer).toBe("http://127.0.0.1:9000");
    });

    describe("the console's client at the issuer", () => {
      const client = { CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID: "chaos-core-console", CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: "/run/secrets/console" };

      it("is off by default; with both variables the console signs people in through the issuer", () => {
        expect(loadEdgeConfig(base).http.console).toEqual({});
        const config = loadEdgeConfig({ ...base, ...client, CHAOS_CORE_PUBLIC_URL: "https://mcp.example.com" });
        expect(config.http.console).toEqual({
          publicUrl: "https://mcp.example.com",
          oauthClient: { clientId: "chaos-core-console", clientSecretFile: "/run/secrets/console" },
        });
        // stdio's own console listener has no OAuth.
        expect(config.console).toEqual({ publicUrl: "https://mcp.example.com", listenerPort: 0 });
      });

      it("names the variable that is wrong: no issuer, half a client, the console off", () => {
        const fails = (env: Record<string, string>, message: RegExp) => expect(() => loadEdgeConfig(env)).toThrow(message);
        fails(client, /CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID: has no effect without CHAOS_CORE_OAUTH_ISSUER[\s\S]*CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: has no effect without/);
        fails(
          { ...base, CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID: "chaos-core-console" },
          /CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: is required with CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID: the console signs in at the issuer as a confidential client/,
        );
        fails(
          { ...base, CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: "/run/secrets/console" },
          /CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID: is required with CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE/,
        );
        fails({ ...base, ...client, CHAOS_CORE_CONSOLE: "off" }, /CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID: has no effect with CHAOS_CORE_CONSOLE=off/);
        // An empty value counts as unset, as for every variable: half a client again.
        fails({ ...base, ...client, CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: "" }, /CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: is required with CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID/);
      });
    });
  });
});
