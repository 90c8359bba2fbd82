import { z } from "zod";
import { describe, expect, it } from "vitest";
import { ConfigError, envVars, isLoopbackHost, parseEnv } from "./config.js";

const schema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  DATABASE_URL: z.string().url().optional(),
});

describe("parseEnv", () => {
  it("applies defaults and treats empty strings as unset", () => {
    expect(parseEnv(schema, { PORT: "" })).toEqual({ PORT: 3000 });
  });

  it("names every bad variable", () => {
    expect(() => parseEnv(schema, { PORT: "http", DATABASE_URL: "nope" })).toThrow(ConfigError);
    try {
      parseEnv(schema, { PORT: "70000", DATABASE_URL: "nope" });
    } catch (e) {
      expect((e as Error).message).toMatch(/PORT:/);
      expect((e as Error).message).toMatch(/DATABASE_URL:/);
    }
  });
});

describe("isLoopbackHost", () => {
  it("knows loopback from everything else", () => {
    for (const h of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"]) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ["0.0.0.0", "::", "10.0.0.1", "example.com", "127.0.0.1.example.com"]) expect(isLoopbackHost(h), h).toBe(false);
  });
});

describe("envVars.publicUrl", () => {
  const publicUrl = z.object({ CHAOS_CORE_PUBLIC_URL: envVars.publicUrl() });

  it("reads an http(s) URL without its trailing slash, and is optional", () => {
    expect(parseEnv(publicUrl, { CHAOS_CORE_PUBLIC_URL: "https://chaos.example.com/" })).toEqual({ CHAOS_CORE_PUBLIC_URL: "https://chaos.example.com" });
    expect(parseEnv(publicUrl, { CHAOS_CORE_PUBLIC_URL: "http://127.0.0.1:8080/cc" })).toEqual({ CHAOS_CORE_PUBLIC_URL: "http://127.0.0.1:8080/cc" });
    expect(parseEnv(publicUrl, {})).toEqual({});
  });

  it("refuses other schemes, credentials, a query or a fragment, naming the variable", () => {
    const cases: Array<[string, RegExp]> = [
      ["ftp://x", /must be an http or https URL, got ftp:/],
      ["chaos.example.com", /must be an absolute URL/],
      ["https://u:p@x.example", /must not carry a user name or password/],
      ["https://x.example/?a=1", /must not carry a query or a fragment/],
      ["https://x.example/#a", /must not carry a query or a fragment/],
    ];
    for (const [bad, problem] of cases) {
      expect(() => parseEnv(publicUrl, { CHAOS_CORE_PUBLIC_URL: bad }), bad).toThrow(new RegExp(`CHAOS_CORE_PUBLIC_URL: ${problem.source}`));
    }
  });
});
