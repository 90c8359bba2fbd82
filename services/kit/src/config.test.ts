import { z } from "zod";
import { describe, expect, it } from "vitest";
import { ConfigError, parseEnv } from "./config.js";

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
