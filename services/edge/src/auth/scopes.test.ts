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

  it("grants the approver role for chaoscore:approver, and a role of the operator's for chaoscore:role:<name>", () => {
    expect(rolesOfScopes(["chaoscore:agent"])).toEqual([]);
    expect(rolesOfScopes(["chaoscore:agent", "chaoscore:approver"])).toEqual(["approver"]);
    expect(rolesOfScopes(["approver", "chaoscore:operator", "support", "role:support"])).toEqual([]);
    expect(rolesOfScopes(["chaoscore:role:support", "chaoscore:agent", "chaoscore:role:approver", "chaoscore:approver", "chaoscore:role:support"])).toEqual(["approver", "support"]);
    // A role scope whose name is not a role name grants nothing.
    expect(rolesOfScopes(["chaoscore:role:", "chaoscore:role:Support", "chaoscore:role:a b", "chaoscore:role:x:y"])).toEqual([]);
    // More roles than a call context carries: the token is refused, not cut short.
    const many = Array.from({ length: 33 }, (_, i) => `chaoscore:role:r${i}`);
    expect(() => rolesOfScopes(many)).toThrow(/grants 33 roles \(chaoscore:role:…\); at most 32/);
    expect(rolesOfScopes(many.slice(1))).toHaveLength(32);
  });

  it("maps tenant from the configured claim and principal from sub, refusing what cannot name them", () => {
    const claims = { sub: "alice", org_id: "globex", tenant: "other", scope: "chaoscore:agent chaoscore:approver" };
    expect(identityOfClaims(claims, "org_id").identity).toEqual({ tenant: "globex", principal: "alice", roles: ["approver"] });
    expect(identityOfClaims({ ...claims, scope: "chaoscore:agent chaoscore:role:support" }, "org_id").identity.roles).toEqual(["support"]);
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
