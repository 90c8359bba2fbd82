import { describe, expect, it } from "vitest";
import type { BearerRefusal } from "./bearer-refusal.js";
import { identityOfClaims, isJwtShaped, protectedResourceMetadataUrl } from "./oauth.js";
import { rolesOfScopes, scopesOfClaims } from "./scopes.js";

describe("scopes and claims", () => {
  it("reads scope (space-separated) before scp (a list or a string), and nothing else", () => {
    expect(scopesOfClaims({ scope: "chaoscore:agent  chaoscore:approver" })).toEqual(["chaoscore:agent", "chaoscore:approver"]);
    expect(scopesOfClaims({ scope: "a", scp: ["b"] })).toEqual(["a"]);
    expect(scopesOfClaims({ scp: ["b", 7, "c"] })).toEqual(["b", "c"]);
    expect(scopesOfClaims({ scp: "b c" })).toEqual(["b", "c"]);
    expect(scopesOfClaims({ scope: 3 })).toEqual([]);
  });

  it("grants the approver role only for chaoscore:approver", () => {
    expect(rolesOfScopes(["chaoscore:agent"])).toEqual([]);
    expect(rolesOfScopes(["chaoscore:agent", "chaoscore:approver"])).toEqual(["approver"]);
    expect(rolesOfScopes(["approver", "chaoscore:operator"])).toEqual([]);
  });

  it("maps tenant from the configured claim and principal from sub, refusing what cannot name them", () => {
    const claims = { sub: "alice", org_id: "globex", tenant: "other", scope: "chaoscore:agent chaoscore:approver" };
    expect(identityOfClaims(claims, "org_id").identity).toEqual({ tenant: "globex", principal: "alice", roles: ["approver"] });
    const refusal = (c: Record<string, unknown>) => {
      try {
        identityOfClaims(c, "tenant");
      } catch (err) {
        return err as BearerRefusal;
      }
      throw new Error("accepted");
    };
    expect(refusal({ ...claims, tenant: "Not A Tenant" }).message).toMatch(/tenant claim is not a tenant id/);
    expect(refusal({ scope: "chaoscore:agent", tenant: "t" }).message).toMatch(/no subject/);
    expect(refusal({ sub: "local", tenant: "t", scope: "chaoscore:agent" }).message).toMatch(/reserved/);
    const scope = refusal({ sub: "a", tenant: "t", scope: "chaoscore:approver" });
    expect([scope.error, scope.scope]).toEqual(["insufficient_scope", "chaoscore:agent"]);
  });

  it("tells a JWS from an opaque token, and puts the metadata path-inserted (RFC 9728 §3.1)", () => {
    expect(isJwtShaped("eyJh.eyJz.c2ln")).toBe(true);
    expect(isJwtShaped("opaque-token_123")).toBe(false);
    expect(protectedResourceMetadataUrl("https://h.example/mcp")).toBe("https://h.example/.well-known/oauth-protected-resource/mcp");
    expect(protectedResourceMetadataUrl("https://h.example/team/mcp/")).toBe("https://h.example/.well-known/oauth-protected-resource/team/mcp");
    expect(protectedResourceMetadataUrl("https://h.example")).toBe("https://h.example/.well-known/oauth-protected-resource");
  });
});
