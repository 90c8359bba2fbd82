import { describe, expect, it } from "vitest";
import {
  defaultPolicyDocument,
  formatPolicyDocument,
  parsePolicyDocument,
  PolicyDocumentError,
  validatePolicyDocument,
} from "./policy-document.js";

const GOOD = `{
  "allowedCapabilities": ["http.request", "memory.read"],
  "deniedCapabilities": ["shell.exec"],
  "requireConfirmationFor": ["http.request"],
  "httpAllowedDomains": ["api.example.com", "10.0.0.1"],
  "riskRules": { "requireApprovalAtOrAbove": "medium", "denyAtOrAbove": "critical" }
}`;

/** The message of the error thrown when parsing `text`; fails the test when nothing is thrown. */
function problem(text: string, source = "policy.json"): string {
  try {
    parsePolicyDocument(text, source);
  } catch (err) {
    expect(err).toBeInstanceOf(PolicyDocumentError);
    return (err as Error).message;
  }
  throw new Error(`expected ${text} to be rejected`);
}

function withField(field: string, value: unknown): string {
  return JSON.stringify({ ...defaultPolicyDocument(), [field]: value });
}

describe("parsePolicyDocument", () => {
  it("reads a complete, valid document", () => {
    expect(parsePolicyDocument(GOOD, "policy.json")).toEqual({
      allowedCapabilities: ["http.request", "memory.read"],
      deniedCapabilities: ["shell.exec"],
      requireConfirmationFor: ["http.request"],
      httpAllowedDomains: ["api.example.com", "10.0.0.1"],
      riskRules: { requireApprovalAtOrAbove: "medium", denyAtOrAbove: "critical" },
    });
  });

  it("fills omitted fields with empty lists and the default risk rules", () => {
    expect(parsePolicyDocument("{}", "p")).toEqual({
      allowedCapabilities: [],
      deniedCapabilities: [],
      requireConfirmationFor: [],
      httpAllowedDomains: [],
      riskRules: { requireApprovalAtOrAbove: "high", denyAtOrAbove: "never" },
    });
    expect(parsePolicyDocument('{"riskRules": {"denyAtOrAbove": "critical"}}', "p").riskRules).toEqual({
      requireApprovalAtOrAbove: "high",
      denyAtOrAbove: "critical",
    });
  });

  it("round-trips the default document through its file format", () => {
    const text = formatPolicyDocument(defaultPolicyDocument());
    expect(text.endsWith("}\n")).toBe(true);
    expect(text).toContain('\n  "requireConfirmationFor": [\n    "http.request"\n  ]');
    expect(parsePolicyDocument(text, "p")).toEqual(defaultPolicyDocument());
    expect(defaultPolicyDocument().requireConfirmationFor).toEqual(["http.request"]);
  });

  it("names the file and the element path of a wrong type", () => {
    const text = JSON.stringify({ deniedCapabilities: ["a.b", "c", 7] });
    expect(problem(text)).toBe("policy.json: deniedCapabilities[2]: expected string, got number");
  });

  it("names a list field that is not a list", () => {
    expect(problem(withField("allowedCapabilities", "http.request"))).toBe(
      "policy.json: allowedCapabilities: expected array, got string",
    );
  });

  it("rejects unknown keys, at the top and inside riskRules, and suggests the likely field", () => {
    expect(problem(withField("deniedCapabilites", ["shell.exec"]))).toMatch(
      /^policy\.json: deniedCapabilites: unknown field \(did you mean "deniedCapabilities"\?\); accepted fields: allowedCapabilities, /,
    );
    const nested = JSON.stringify({ riskRules: { requireApprovalAtOrAbove: "high", denyAbove: "high" } });
    expect(problem(nested)).toMatch(/^policy\.json: riskRules\.denyAbove: unknown field \(did you mean "denyAtOrAbove"\?\)/);
    expect(problem(JSON.stringify({ comment: "x" }))).not.toContain("did you mean");
  });

  it("rejects a risk threshold outside the known levels and lists them", () => {
    const text = JSON.stringify({ riskRules: { requireApprovalAtOrAbove: "severe" } });
    expect(problem(text)).toBe(
      'policy.json: riskRules.requireApprovalAtOrAbove: expected one of "low", "medium", "high", "critical", "never", got "severe"',
    );
  });

  it.each([
    ["", "must not be empty"],
    ["HTTP.request", "is not a capability name"],
    ["http.*", "is a wildcard"],
    ["*", "is a wildcard"],
    ["http..request", "is not a capability name"],
    ["1http", "is not a capability name"],
    ["http.request ", "is not a capability name"],
  ])("rejects the capability name %j", (name, message) => {
    const text = JSON.stringify({ requireConfirmationFor: ["ok.name", name] });
    const msg = problem(text);
    expect(msg).toMatch(/^policy\.json: requireConfirmationFor\[1\]: /);
    expect(msg).toContain(message);
  });

  it.each([
    ["https://api.example.com/v1", 'is a URL; write the bare host without scheme or path, e.g. "api.example.com"'],
    ["api.example.com/v1", 'is a URL; write the bare host without scheme or path, e.g. "api.example.com"'],
    ["api.example.com:443", "has a port"],
    ["*.example.com", "is a wildcard"],
    ["API.example.com", 'must be lower-case ("api.example.com")'],
    ["", "must not be empty"],
    ["bad_host.com", "is not a host name"],
    ["-bad.com", "is not a host name"],
  ])("rejects the HTTP host %j", (host, message) => {
    const msg = problem(withField("httpAllowedDomains", [host]));
    expect(msg).toMatch(/^policy\.json: httpAllowedDomains\[0\]: /);
    expect(msg).toContain(message);
  });

  it("reports every problem, not only the first", () => {
    const msg = problem(JSON.stringify({ deniedCapabilities: [1], httpAllowedDomains: ["x:1"] }));
    expect(msg).toContain("deniedCapabilities[0]");
    expect(msg).toContain("httpAllowedDomains[0]");
    const err = (() => {
      try {
        validatePolicyDocument({ deniedCapabilities: [1], httpAllowedDomains: ["x:1"] }, "request");
      } catch (e) {
        return e as PolicyDocumentError;
      }
      return undefined;
    })();
    expect(err?.issues.map((i) => i.path)).toEqual(["deniedCapabilities[0]", "httpAllowedDomains[0]"]);
    expect(err?.source).toBe("request");
  });

  it("names the file of a JSON syntax error and locates it", () => {
    const msg = problem('{\n  "deniedCapabilities": ["a",]\n}');
    expect(msg).toMatch(/^policy\.json: not valid JSON/);
    // Where V8 gives a position it becomes a line; where it does not, it quotes the text.
    expect(msg).toMatch(/line 2, column \d+|\["a",\]/);
  });

  it("rejects an empty file and a document that is not an object", () => {
    expect(problem("  \n")).toBe("policy.json: the document is empty");
    expect(problem("[]")).toBe("policy.json: expected a JSON object with the policy fields");
    expect(problem("null")).toBe("policy.json: expected a JSON object with the policy fields");
  });
});
