import { describe, expect, it } from "vitest";
import { evaluatePolicy, type EvaluationInput } from "./engine.js";
import { defaultPolicyDocument, validatePolicyDocument, type PolicyDocumentJson } from "./policy-document.js";
import type { Risk } from "./risk.js";

/** A document with defaults, overridden field by field (validated like a real file). */
function doc(fields: Record<string, unknown> = {}): PolicyDocumentJson {
  return validatePolicyDocument(fields, "test");
}

/** A permissive baseline: no lists, risk rules off, so each test turns on only what it tests. */
function open(fields: Record<string, unknown> = {}): PolicyDocumentJson {
  return doc({ riskRules: { requireApprovalAtOrAbove: "never", denyAtOrAbove: "never" }, ...fields });
}

function input(capability: string, risk: Risk = "low", httpHost?: string): EvaluationInput {
  return { capability, risk, facts: httpHost === undefined ? {} : { httpHost } };
}

describe("evaluatePolicy rules", () => {
  it("allows by default and says which policy version allowed it", () => {
    const d = evaluatePolicy(input("memory.read"), open(), 7);
    expect(d).toEqual({
      decision: "ALLOW",
      matchedRule: "default",
      reason: '"memory.read" is allowed by policy version 7.',
      policyVersion: 7,
    });
  });

  it("denies a listed capability", () => {
    const d = evaluatePolicy(input("shell.exec"), open({ deniedCapabilities: ["shell.exec"] }), 3);
    expect(d.decision).toBe("DENY");
    expect(d.matchedRule).toBe("deniedCapabilities");
    expect(d.reason).toContain("policy version 3 denies \"shell.exec\"");
    expect(d.policyVersion).toBe(3);
  });

  it("denies a capability missing from a non-empty allowlist and allows a listed one", () => {
    const policy = open({ allowedCapabilities: ["memory.read"] });
    const denied = evaluatePolicy(input("memory.write"), policy, 1);
    expect(denied.decision).toBe("DENY");
    expect(denied.matchedRule).toBe("allowedCapabilities");
    expect(denied.reason).toContain("allowedCapabilities");
    expect(evaluatePolicy(input("memory.read"), policy, 1).decision).toBe("ALLOW");
  });

  it("treats an empty allowlist as every capability", () => {
    const policy = open({ allowedCapabilities: [] });
    for (const name of ["memory.read", "a", "plan.step.execute", "council_init"]) {
      expect(evaluatePolicy(input(name), policy, 1).decision).toBe("ALLOW");
    }
  });

  it("requires approval for a capability in requireConfirmationFor", () => {
    const d = evaluatePolicy(input("ledger.append"), open({ requireConfirmationFor: ["ledger.append"] }), 2);
    expect(d.decision).toBe("REQUIRE_APPROVAL");
    expect(d.matchedRule).toBe("requireConfirmationFor");
    expect(d.reason).toMatch(/Request approval/);
  });

  it("denies at or above riskRules.denyAtOrAbove", () => {
    const policy = open({ riskRules: { denyAtOrAbove: "high", requireApprovalAtOrAbove: "never" } });
    expect(evaluatePolicy(input("x.y", "medium"), policy, 1).decision).toBe("ALLOW");
    for (const risk of ["high", "critical"] as const) {
      const d = evaluatePolicy(input("x.y", risk), policy, 1);
      expect(d.decision).toBe("DENY");
      expect(d.matchedRule).toBe("riskRules.denyAtOrAbove");
      expect(d.reason).toContain(`${risk} risk`);
    }
  });

  it("requires approval at or above riskRules.requireApprovalAtOrAbove (default: high)", () => {
    const policy = doc({});
    expect(policy.riskRules.requireApprovalAtOrAbove).toBe("high");
    expect(evaluatePolicy(input("x.y", "low"), policy, 1).decision).toBe("ALLOW");
    expect(evaluatePolicy(input("x.y", "medium"), policy, 1).decision).toBe("ALLOW");
    for (const risk of ["high", "critical"] as const) {
      const d = evaluatePolicy(input("x.y", risk), policy, 1);
      expect(d.decision).toBe("REQUIRE_APPROVAL");
      expect(d.matchedRule).toBe("riskRules.requireApprovalAtOrAbove");
    }
  });

  it("applies each threshold level exactly at its boundary", () => {
    const levels = ["low", "medium", "high", "critical"] as const;
    levels.forEach((threshold, t) => {
      const policy = open({ riskRules: { requireApprovalAtOrAbove: threshold, denyAtOrAbove: "never" } });
      levels.forEach((risk, r) => {
        const expected = r >= t ? "REQUIRE_APPROVAL" : "ALLOW";
        expect(evaluatePolicy(input("x.y", risk), policy, 1).decision, `${risk} vs ${threshold}`).toBe(expected);
      });
    });
  });

  it("counts an unspecified risk as critical in both threshold rules (fail closed)", () => {
    const approval = evaluatePolicy(input("x.y", "unspecified"), doc({}), 1);
    expect(approval.decision).toBe("REQUIRE_APPROVAL");
    expect(approval.reason).toContain("unspecified risk (counted as critical)");
    const criticalOnly = open({ riskRules: { denyAtOrAbove: "critical", requireApprovalAtOrAbove: "never" } });
    expect(evaluatePolicy(input("x.y", "unspecified"), criticalOnly, 1).decision).toBe("DENY");
    expect(evaluatePolicy(input("x.y", "high"), criticalOnly, 1).decision).toBe("ALLOW");
  });

  it("switches a risk rule off with never, even for unspecified risk", () => {
    expect(evaluatePolicy(input("x.y", "unspecified"), open(), 1).decision).toBe("ALLOW");
  });

  it("denies a malformed capability name before any rule, so case or wildcards cannot dodge a deny", () => {
    const policy = open({ deniedCapabilities: ["http.request"] });
    for (const name of ["HTTP.request", "http.*", "", "http..request", " http.request"]) {
      const d = evaluatePolicy(input(name), policy, 1);
      expect(d.decision, name).toBe("DENY");
      expect(d.matchedRule, name).toBe("capabilityName");
    }
  });
});

describe("evaluatePolicy HTTP hosts", () => {
  it("allows an exactly listed host, case-insensitively", () => {
    const policy = open({ httpAllowedDomains: ["api.example.com"] });
    expect(evaluatePolicy(input("http.request", "low", "api.example.com"), policy, 1).decision).toBe("ALLOW");
    expect(evaluatePolicy(input("http.request", "low", "API.Example.COM"), policy, 1).decision).toBe("ALLOW");
  });

  it("does not treat a subdomain or a parent domain as a match", () => {
    const policy = open({ httpAllowedDomains: ["example.com"] });
    for (const host of ["api.example.com", "example.com.evil.net", "evilexample.com", "com"]) {
      const d = evaluatePolicy(input("http.request", "low", host), policy, 4);
      expect(d.decision, host).toBe("DENY");
      expect(d.matchedRule, host).toBe("httpAllowedDomains");
      expect(d.reason, host).toContain("Allowed hosts: example.com");
    }
  });

  it("denies every host when the allowlist is empty", () => {
    const d = evaluatePolicy(input("http.request", "low", "example.com"), open(), 1);
    expect(d.decision).toBe("DENY");
    expect(d.matchedRule).toBe("httpAllowedDomains");
    expect(d.reason).toContain("allows no HTTP hosts");
  });

  it("checks the host of any capability that names one, not only http.*", () => {
    const d = evaluatePolicy(input("web.fetch", "low", "example.org"), open({ httpAllowedDomains: ["example.com"] }), 1);
    expect(d.decision).toBe("DENY");
    expect(d.matchedRule).toBe("httpAllowedDomains");
  });

  it("denies an http capability that names no host, since the allowlist cannot be checked", () => {
    const policy = open({ httpAllowedDomains: ["example.com"] });
    for (const facts of [{}, { httpHost: "" }]) {
      const d = evaluatePolicy({ capability: "http.request", risk: "low", facts }, policy, 1);
      expect(d.decision).toBe("DENY");
      expect(d.matchedRule).toBe("httpAllowedDomains");
    }
    expect(evaluatePolicy(input("memory.read"), policy, 1).decision).toBe("ALLOW");
  });

  it("lists the allowed hosts in sorted order and caps a long list", () => {
    const many = Array.from({ length: 12 }, (_, i) => `h${String(i).padStart(2, "0")}.example.com`).reverse();
    const d = evaluatePolicy(input("http.request", "low", "other.com"), open({ httpAllowedDomains: many }), 1);
    expect(d.reason).toContain("h00.example.com, h01.example.com");
    expect(d.reason).toContain("and 2 more");
  });
});

describe("evaluatePolicy precedence", () => {
  it("lets deniedCapabilities win over every other rule", () => {
    const everything = doc({
      allowedCapabilities: ["http.request"],
      deniedCapabilities: ["http.request"],
      requireConfirmationFor: ["http.request"],
      httpAllowedDomains: ["example.com"],
      riskRules: { denyAtOrAbove: "low", requireApprovalAtOrAbove: "low" },
    });
    const d = evaluatePolicy(input("http.request", "low", "example.com"), everything, 1);
    expect(d.matchedRule).toBe("deniedCapabilities");
    expect(d.decision).toBe("DENY");
  });

  it("applies the allowlist before risk, host and approval rules", () => {
    const policy = doc({
      allowedCapabilities: ["memory.read"],
      requireConfirmationFor: ["http.request"],
      riskRules: { denyAtOrAbove: "critical" },
    });
    expect(evaluatePolicy(input("http.request", "critical", "x.com"), policy, 1).matchedRule).toBe("allowedCapabilities");
  });

  it("denies by risk before checking the host or asking for approval", () => {
    const policy = doc({
      requireConfirmationFor: ["http.request"],
      httpAllowedDomains: ["example.com"],
      riskRules: { denyAtOrAbove: "high" },
    });
    expect(evaluatePolicy(input("http.request", "high", "other.com"), policy, 1).matchedRule).toBe("riskRules.denyAtOrAbove");
  });

  it("denies a bad host even when approval would otherwise be required: approval never unlocks a deny", () => {
    const policy = doc({ requireConfirmationFor: ["http.request"], httpAllowedDomains: ["example.com"] });
    const bad = evaluatePolicy(input("http.request", "critical", "other.com"), policy, 1);
    expect(bad.matchedRule).toBe("httpAllowedDomains");
    const good = evaluatePolicy(input("http.request", "critical", "example.com"), policy, 1);
    expect(good.matchedRule).toBe("requireConfirmationFor");
  });

  it("reports requireConfirmationFor before the risk approval rule", () => {
    const policy = doc({ requireConfirmationFor: ["x.y"] });
    expect(evaluatePolicy(input("x.y", "critical"), policy, 1).matchedRule).toBe("requireConfirmationFor");
  });

  it("with the safe defaults: http.request is denied until a host is listed, then needs approval", () => {
    const defaults = defaultPolicyDocument();
    expect(evaluatePolicy(input("http.request", "medium", "example.com"), defaults, 0).matchedRule).toBe(
      "httpAllowedDomains",
    );
    const withHost = { ...defaults, httpAllowedDomains: ["example.com"] };
    expect(evaluatePolicy(input("http.request", "medium", "example.com"), withHost, 1)).toMatchObject({
      decision: "REQUIRE_APPROVAL",
      matchedRule: "requireConfirmationFor",
    });
    expect(evaluatePolicy(input("memory.read", "low"), defaults, 0).decision).toBe("ALLOW");
  });
});

describe("evaluatePolicy approval channels", () => {
  it("says with every REQUIRE_APPROVAL which channels may give it, and the entry that chose them", () => {
    const high = evaluatePolicy(input("memory.write", "high"), doc(), 1);
    expect(high).toMatchObject({
      decision: "REQUIRE_APPROVAL",
      approvalChannels: ["approver", "operator", "console"],
      channelsRule: "approvalChannels.byRisk.high",
    });
    const confirmed = evaluatePolicy(input("memory.read", "low"), doc({ requireConfirmationFor: ["memory.read"] }), 1);
    expect(confirmed).toMatchObject({
      matchedRule: "requireConfirmationFor",
      approvalChannels: ["client_elicitation", "approver", "operator", "console"],
      channelsRule: "approvalChannels.byRisk.low",
    });
    const named = doc({ approvalChannels: { capabilities: { "memory.write": ["console"] } } });
    expect(evaluatePolicy(input("memory.write", "high"), named, 1)).toMatchObject({
      approvalChannels: ["console"],
      channelsRule: "approvalChannels.capabilities.memory.write",
    });
  });

  it("gives no channels with ALLOW or DENY", () => {
    const allowed = evaluatePolicy(input("memory.read", "low"), doc(), 1);
    const denied = evaluatePolicy(input("shell.exec", "high"), doc({ deniedCapabilities: ["shell.exec"] }), 1);
    for (const d of [allowed, denied]) {
      expect(d).not.toHaveProperty("approvalChannels");
      expect(d).not.toHaveProperty("channelsRule");
    }
  });
});

describe("evaluatePolicy with upstream patterns (files.*)", () => {
  it("denies every capability a denied pattern names, whatever else lists it: a denial always wins", () => {
    const d = evaluatePolicy(input("files.write_file"), open({ deniedCapabilities: ["files.*"], allowedCapabilities: ["files.write_file"], requireConfirmationFor: ["files.write_file"] }), 3);
    expect(d).toMatchObject({ decision: "DENY", matchedRule: "deniedCapabilities" });
    expect(d.reason).toContain('(deniedCapabilities lists "files.*")');
    // A whole segment only: files_backup is another upstream.
    expect(evaluatePolicy(input("files_backup.write_file"), open({ deniedCapabilities: ["files.*"] }), 3).decision).toBe("ALLOW");
  });

  it("allows by pattern and holds by pattern", () => {
    const d = open({ allowedCapabilities: ["files.*", "memory.recall"], requireConfirmationFor: ["files.*"] });
    expect(evaluatePolicy(input("files.read_text_file"), d, 1)).toMatchObject({ decision: "REQUIRE_APPROVAL", matchedRule: "requireConfirmationFor" });
    expect(evaluatePolicy(input("github.create_issue"), d, 1)).toMatchObject({ decision: "DENY", matchedRule: "allowedCapabilities" });
  });

  it("chooses approval channels by the exact name over a pattern, and the longer prefix among patterns", () => {
    const d = open({
      requireConfirmationFor: ["github.*"],
      approvalChannels: { capabilities: { "github.*": ["approver"], "github.issues.*": ["console"], "github.issues.delete": ["operator"] } },
    });
    expect(evaluatePolicy(input("github.issues.delete"), d, 1)).toMatchObject({ approvalChannels: ["operator"], channelsRule: "approvalChannels.capabilities.github.issues.delete" });
    expect(evaluatePolicy(input("github.issues.close"), d, 1)).toMatchObject({ approvalChannels: ["console"], channelsRule: "approvalChannels.capabilities.github.issues.*" });
    expect(evaluatePolicy(input("github.pulls.merge"), d, 1)).toMatchObject({ approvalChannels: ["approver"], channelsRule: "approvalChannels.capabilities.github.*" });
  });
});

describe("evaluatePolicy determinism", () => {
  /** A small seeded generator, so the "random" cases are the same on every run. */
  function rng(seed: number): () => number {
    let s = seed >>> 0;
    return () => {
      s = (s * 1664525 + 1013904223) >>> 0;
      return s / 2 ** 32;
    };
  }

  function shuffled<T>(items: readonly T[], next: () => number): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  const policy = doc({
    allowedCapabilities: ["http.request", "memory.read", "memory.write", "ledger.append", "shell.exec"],
    deniedCapabilities: ["shell.exec"],
    requireConfirmationFor: ["ledger.append"],
    httpAllowedDomains: ["a.example.com", "b.example.com", "c.example.com"],
    riskRules: { requireApprovalAtOrAbove: "high", denyAtOrAbove: "critical" },
  });
  const cases: EvaluationInput[] = [];
  for (const capability of ["http.request", "memory.read", "memory.write", "ledger.append", "shell.exec", "other.x"]) {
    for (const risk of ["unspecified", "low", "medium", "high", "critical"] as const) {
      for (const httpHost of [undefined, "a.example.com", "z.example.com"]) {
        cases.push({ capability, risk, facts: { httpHost, attributes: { tool: "t", session: "s", region: "eu" } } });
      }
    }
  }

  it("returns the same decision for the same inputs over many runs", () => {
    const first = cases.map((c) => evaluatePolicy(c, policy, 9));
    for (let run = 0; run < 200; run++) {
      expect(cases.map((c) => evaluatePolicy(c, policy, 9))).toEqual(first);
    }
  });

  it("does not depend on list order or on unrelated facts", () => {
    const baseline = cases.map((c) => evaluatePolicy(c, policy, 9));
    const next = rng(42);
    for (let run = 0; run < 100; run++) {
      const reordered: PolicyDocumentJson = {
        allowedCapabilities: shuffled(policy.allowedCapabilities, next),
        deniedCapabilities: shuffled(policy.deniedCapabilities, next),
        requireConfirmationFor: shuffled(policy.requireConfirmationFor, next),
        httpAllowedDomains: shuffled(policy.httpAllowedDomains, next),
        riskRules: { ...policy.riskRules },
        approvalChannels: policy.approvalChannels,
        rules: policy.rules,
      };
      const results = cases.map((c) => {
        const entries = shuffled(Object.entries({ ...c.facts.attributes, [`noise${run}`]: String(next()) }), next);
        return evaluatePolicy({ ...c, facts: { ...c.facts, attributes: Object.fromEntries(entries) } }, reordered, 9);
      });
      expect(results).toEqual(baseline);
    }
  });

  it("does not mutate its inputs", () => {
    const frozen = structuredClone(policy);
    const c = structuredClone(cases[0]!);
    evaluatePolicy(c, policy, 1);
    expect(policy).toEqual(frozen);
    expect(c).toEqual(cases[0]);
  });
});
