import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ChaosError } from "./errors.js";
import { parseUpstreamsFile, resolveSecretRef } from "./upstreams.js";

const file = (upstreams: unknown[]) => JSON.stringify({ upstreams });
const refusal = (text: string): string => {
  try {
    parseUpstreamsFile(text, "upstreams.json");
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    expect((err as ChaosError).code).toBe("invalid_argument");
    return (err as Error).message;
  }
  throw new Error("the file was accepted");
};

describe("an operator's upstreams file", () => {
  it("takes a stdio and a Streamable HTTP upstream, filling in the defaults", () => {
    const [files, github] = parseUpstreamsFile(
      file([
        { name: "files", command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv"], env: { MEMORY_FILE_PATH: "graph.json" } },
        { name: "github", url: "https://mcp.example.com/mcp", headers: { Authorization: { env: "CHAOS_CORE_UPSTREAM_SECRET_GITHUB", prefix: "Bearer " } }, timeoutMs: 5000 },
      ]),
      "upstreams.json",
    );
    expect(files).toEqual({
      transport: "stdio",
      name: "files",
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
      env: { MEMORY_FILE_PATH: "graph.json" },
      isolation: "shared",
      timeoutMs: 30_000,
      trustAnnotations: true,
      disabled: false,
    });
    expect(github).toMatchObject({ transport: "http", url: "https://mcp.example.com/mcp", timeoutMs: 5000, headers: { Authorization: { env: "CHAOS_CORE_UPSTREAM_SECRET_GITHUB", prefix: "Bearer " } } });
  });

  it("refuses a header whose value is a literal, or a reference outside the upstreams' namespace, naming the field", () => {
    const literal = refusal(file([{ name: "gh", url: "https://x.example/mcp", headers: { Authorization: "Bearer hunter2" } }]));
    expect(literal).toContain("upstreams[0].headers.Authorization: a literal value would be readable back");
    expect(literal).not.toContain("hunter2");
    const database = refusal(file([{ name: "gh", url: "https://x.example/mcp", headers: { Authorization: { env: "DATABASE_URL" } } }]));
    expect(database).toContain("upstreams[0].headers.Authorization");
    expect(database).toContain("CHAOS_CORE_UPSTREAM_SECRET_");
    const keyring = refusal(file([{ name: "gh", url: "https://x.example/mcp", headers: { Authorization: { file: "../ledger-keyring.json" } } }]));
    expect(keyring).toContain("upstreams[0].headers.Authorization.file: must be a bare file name");
    // A stdio upstream's environment takes values, or references held to the same namespace.
    const env = refusal(file([{ name: "files", command: "x", env: { TOKEN: { env: "PGPASSWORD" } } }]));
    expect(env).toContain("upstreams[0].env.TOKEN.env: must name a variable whose name starts with CHAOS_CORE_UPSTREAM_SECRET_");
  });

  it("refuses a reserved or malformed name, both transports or neither, a field of the other transport, and a name given twice", () => {
    expect(refusal(file([{ name: "memory", command: "x" }]))).toContain("upstreams[0].name: is reserved for Chaos Core's own capabilities");
    expect(refusal(file([{ name: "Git-Hub", command: "x" }]))).toContain("upstreams[0].name: must be 1-32 characters");
    expect(refusal(file([{ name: "a", command: "x", url: "https://x.example/mcp" }]))).toContain("upstreams[0]: give url (Streamable HTTP) or command (stdio), not both");
    expect(refusal(file([{ name: "a" }]))).toContain("upstreams[0]: give url (Streamable HTTP) or command (stdio)");
    expect(refusal(file([{ name: "a", url: "https://x.example/mcp", args: ["--x"] }]))).toContain("upstreams[0].args: applies to a stdio upstream (command) only");
    expect(refusal(file([{ name: "a", command: "x", cwd: "../elsewhere" }]))).toContain("upstreams[0].cwd: must be a relative path inside the upstream's folder");
    expect(refusal(file([{ name: "a", command: "x", comand: "y" }]))).toMatch(/upstreams\[0\]\.comand: unknown field/);
    expect(refusal(file([{ name: "a", command: "x" }, { name: "a", url: "https://x.example/mcp" }]))).toContain('upstreams[1].name: "a" is declared twice (also upstreams[0])');
    expect(refusal("{not json")).toMatch(/^upstreams\.json: not JSON/);
  });

  it("takes OAuth client credentials for a Streamable HTTP upstream, its secret a reference, and refuses them elsewhere or malformed, naming the field", () => {
    const auth = { type: "client_credentials", issuer: "https://auth.example.com", clientId: "chaos-core", clientSecret: { file: "client-secret" } };
    const [decl] = parseUpstreamsFile(file([{ name: "a", url: "https://x.example/mcp", auth }]), "upstreams.json");
    expect(decl).toMatchObject({ transport: "http", auth });
    expect(refusal(file([{ name: "a", command: "x", auth }]))).toContain("upstreams[0].auth: applies to a Streamable HTTP upstream (url) only");
    expect(refusal(file([{ name: "a", url: "https://x.example/mcp", auth: { ...auth, clientSecret: "literal" } }]))).toContain("upstreams[0].auth.clientSecret: must be a secret reference");
    expect(refusal(file([{ name: "a", url: "https://x.example/mcp", auth: { ...auth, type: "password" } }]))).toMatch(/upstreams\[0\]\.auth\.type: .*"client_credentials".*"token_exchange"/);
    // Token exchange takes a fallback for a caller with no token to exchange; client credentials none.
    const exchange = { ...auth, type: "token_exchange", fallback: "client_credentials" };
    expect(parseUpstreamsFile(file([{ name: "a", url: "https://x.example/mcp", auth: exchange }]), "upstreams.json")[0]).toMatchObject({ auth: exchange });
    expect(refusal(file([{ name: "a", url: "https://x.example/mcp", auth: { ...exchange, fallback: "anonymous" } }]))).toContain("upstreams[0].auth.fallback:");
    expect(refusal(file([{ name: "a", url: "https://x.example/mcp", auth: { ...auth, fallback: "refuse" } }]))).toContain('upstreams[0].auth.fallback: applies to type "token_exchange" only');
    expect(refusal(file([{ name: "a", url: "https://x.example/mcp", auth: { ...auth, issuer: "ftp://auth" } }]))).toContain("upstreams[0].auth.issuer: must be an http or https URL");
  });
});

describe("a secret reference", () => {
  const dir = mkdtempSync(join(tmpdir(), "chaos-core-secrets-"));
  writeFileSync(join(dir, "github-token"), "ghp_secret\n");
  writeFileSync(join(dir, "empty"), "");
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("resolves from its variable or its file, with its prefix", async () => {
    expect(await resolveSecretRef({ env: "CHAOS_CORE_UPSTREAM_SECRET_X", prefix: "Bearer " }, { env: { CHAOS_CORE_UPSTREAM_SECRET_X: "abc" } })).toBe("Bearer abc");
    expect(await resolveSecretRef({ file: "github-token" }, { env: {}, secretsDir: dir })).toBe("ghp_secret");
  });

  it("fails closed naming the reference, never a value", async () => {
    const unset = resolveSecretRef({ env: "CHAOS_CORE_UPSTREAM_SECRET_MISSING" }, { env: {} });
    await expect(unset).rejects.toThrow("secret reference $CHAOS_CORE_UPSTREAM_SECRET_MISSING has no value");
    await expect(resolveSecretRef({ file: "empty" }, { env: {}, secretsDir: dir })).rejects.toThrow("secret reference file empty has no value");
    await expect(resolveSecretRef({ file: "github-token" }, { env: {} })).rejects.toThrow("needs CHAOS_CORE_UPSTREAM_SECRETS_DIR");
    // A reference built by code rather than parsed is held to the same namespace.
    await expect(resolveSecretRef({ env: "DATABASE_URL" }, { env: { DATABASE_URL: "postgres://secret" } })).rejects.toThrow(/outside CHAOS_CORE_UPSTREAM_SECRET_/);
  });
});
