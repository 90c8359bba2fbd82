import { serializeLock, upstreamContracts } from "@chaos-core/contracts";
import { ChaosError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { checkPin, checkTenantUpstreamDeclaration } from "./tenant-upstreams.js";

function refusal(fn: () => unknown): ChaosError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    expect((err as ChaosError).code).toBe("invalid_argument");
    return err as ChaosError;
  }
  throw new Error("expected a refusal");
}

const ok = { name: "github", url: "https://mcp.example.com/mcp" };
const check = (value: unknown, operator: string[] = []) => () => checkTenantUpstreamDeclaration(value, operator);

describe("a tenant's upstream declaration", () => {
  it("takes the file's HTTP declaration, defaults filled in", () => {
    expect(checkTenantUpstreamDeclaration({ ...ok, headers: { "X-Api-Key": { file: "gh-token" } } }, [])).toEqual({
      name: "github",
      transport: "http",
      url: "https://mcp.example.com/mcp",
      headers: { "X-Api-Key": { file: "gh-token" } },
      timeoutMs: 30_000,
      trustAnnotations: true,
    });
  });

  it("refuses a stdio upstream naming the field: only the operator's file starts a process", () => {
    expect(refusal(check({ name: "files", command: "npx", args: ["-y", "x"] })).message).toMatch(/^declaration\.command: the tenant registry takes Streamable HTTP upstreams only/);
    expect(refusal(check({ ...ok, env: { A: "b" } })).message).toMatch(/^declaration\.env: /);
    expect(refusal(check({ ...ok, disabled: true })).message).toMatch(/^declaration\.disabled: /);
    expect(refusal(check({ name: "github" })).message).toMatch(/^declaration: give url/);
  });

  it("refuses a literal header, never echoing it, and a reference outside the operator's namespace", () => {
    const literal = refusal(check({ ...ok, headers: { Authorization: "Bearer sekrit-value-123" } }));
    expect(literal.message).toMatch(/^declaration\.headers\.Authorization: a literal value would be readable back/);
    expect(literal.message).not.toContain("sekrit-value-123");
    expect(refusal(check({ ...ok, headers: { Authorization: { env: "DATABASE_URL" } } })).message).toMatch(
      /^declaration\.headers\.Authorization\.env: must name a variable whose name starts with CHAOS_CORE_UPSTREAM_SECRET_/,
    );
    expect(refusal(check({ ...ok, headers: { Authorization: { file: "../keyring" } } })).message).toMatch(/^declaration\.headers\.Authorization\.file: /);
  });

  it("refuses a bad name, a reserved one, and one the operator's file declares", () => {
    expect(refusal(check({ ...ok, name: "GitHub" })).message).toMatch(/^declaration\.name: must be 1-32 characters/);
    expect(refusal(check({ ...ok, name: "memory" })).message).toMatch(/^declaration\.name: is reserved/);
    expect(refusal(check({ ...ok, name: "files" }, ["files"])).message).toMatch(/^declaration\.name: "files" is an upstream of the operator's upstreams file; a tenant's upstream may not shadow it/);
    expect(refusal(check({ ...ok, url: "ftp://x.example" })).message).toMatch(/^declaration\.url: /);
    expect(refusal(check({ ...ok, timeoutMs: 5 })).message).toMatch(/^declaration\.timeoutMs: /);
    expect(refusal(check({ ...ok, risk: { default: "severe" } })).message).toMatch(/^declaration\.risk\.default: /);
  });
});

describe("a pin", () => {
  const contracts = upstreamContracts("github", [{ name: "echo", inputSchema: { type: "object" } }]);
  it("is an upstreams.lock entry named after the upstream, its digests recomputed", () => {
    const text = serializeLock(contracts, "github");
    expect(checkPin("github", text)).toEqual({ text, tools: 1, integrityDigest: (JSON.parse(text) as { integrityDigest: string }).integrityDigest });
    expect(refusal(() => checkPin("jira", text)).message).toMatch(/^pin\.serverName: must be "jira"/);
    const tampered = JSON.parse(text) as { tools: { echo: { surface: { description: string } } } };
    tampered.tools.echo.surface.description = "now does something else";
    expect(refusal(() => checkPin("github", JSON.stringify(tampered))).message).toMatch(/^pin: its digests do not match its contracts/);
    expect(refusal(() => checkPin("github", "")).message).toMatch(/^pin: required/);
    expect(refusal(() => checkPin("github", "{")).message).toMatch(/^pin: /);
  });
});
