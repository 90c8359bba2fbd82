import { describe, expect, it } from "vitest";
import { defaultApprovalChannels } from "./approval-channels.js";
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
      approvalChannels: defaultApprovalChannels(),
      rules: [],
    });
  });

  it("fills omitted fields with empty lists and the default risk rules", () => {
    expect(parsePolicyDocument("{}", "p")).toEqual({
      allowedCapabilities: [],
      deniedCapabilities: [],
      requireConfirmationFor: [],
      httpAllowedDomains: [],
      riskRules: { requireApprovalAtOrAbove: "high", denyAtOrAbove: "never" },
      approvalChannels: defaultApprovalChannels(),
      rules: [],
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
    ["http*", "is a wildcard"],
    ["*", "is a wildcard"],
    ["*.request", "is a wildcard"],
    ["http.*.get", "is a wildcard"],
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

/** The `approvalChannels` of a document holding only `section`. */
function channels(section: unknown) {
  return validatePolicyDocument({ approvalChannels: section }, "p").approvalChannels;
}

describe("approvalChannels", () => {
  it("defaults to: any channel below high risk, only a person's own credential at high, critical and for spends", () => {
    const expected = {
      byRisk: {
        low: ["client_elicitation", "approver", "operator", "console"],
        medium: ["client_elicitation", "approver", "operator", "console"],
        high: ["approver", "operator", "console"],
        critical: ["approver", "operator", "console"],
      },
      capabilities: {},
      spend: { default: ["approver", "operator", "console"], policies: {}, tools: {} },
    };
    expect(parsePolicyDocument("{}", "p").approvalChannels).toEqual(expected);
    expect(channels({})).toEqual(expected);
    expect(defaultPolicyDocument().approvalChannels).toEqual(expected);
  });

  it("shows the section in full in a first-run policy.json", () => {
    const written = JSON.parse(formatPolicyDocument(defaultPolicyDocument())) as Record<string, unknown>;
    expect(written["approvalChannels"]).toEqual(defaultApprovalChannels());
    // Last but the rules, which a first run shows as an empty list to fill.
    expect(Object.keys(written).slice(-2)).toEqual(["approvalChannels", "rules"]);
    expect(written["rules"]).toEqual([]);
  });

  it("takes the default for every key a partial section leaves out", () => {
    const section = channels({ byRisk: { high: ["console"] }, spend: { policies: { wire: ["operator"] } } });
    expect(section.byRisk).toEqual({ ...defaultApprovalChannels().byRisk, high: ["console"] });
    expect(section.spend).toEqual({ default: ["approver", "operator", "console"], policies: { wire: ["operator"] }, tools: {} });
    expect(section.capabilities).toEqual({});
  });

  it("stores lists in the channel order and maps in key order, so a reordering is the same document", () => {
    const a = {
      byRisk: { high: ["console", "approver"] },
      capabilities: { "z.last": ["operator", "approver"], "a.first": ["console"] },
      spend: { tools: { wire_treasury_transfer: ["console", "operator"] }, policies: { wire: ["console", "approver"], equity: ["operator"] } },
    };
    const b = {
      spend: { policies: { equity: ["operator"], wire: ["approver", "console"] }, tools: { wire_treasury_transfer: ["operator", "console"] } },
      capabilities: { "a.first": ["console"], "z.last": ["approver", "operator"] },
      byRisk: { high: ["approver", "console"] },
    };
    const docA = validatePolicyDocument({ approvalChannels: a }, "p");
    const docB = validatePolicyDocument({ approvalChannels: b }, "p");
    expect(docA.approvalChannels.byRisk.high).toEqual(["approver", "console"]);
    expect(Object.keys(docA.approvalChannels.capabilities)).toEqual(["a.first", "z.last"]);
    expect(formatPolicyDocument(docA)).toBe(formatPolicyDocument(docB));
  });

  it("rejects an unknown key at every level and suggests the likely one", () => {
    expect(problem(JSON.stringify({ approvalChannels: { byRisk: { hihg: ["approver"] } } }))).toMatch(
      /^policy\.json: approvalChannels\.byRisk\.hihg: unknown field \(did you mean "high"\?\); accepted fields: low, medium, high, critical$/,
    );
    expect(problem(JSON.stringify({ approvalChannels: { spnd: {} } }))).toMatch(
      /^policy\.json: approvalChannels\.spnd: unknown field \(did you mean "spend"\?\)/,
    );
    expect(problem(JSON.stringify({ approvalChannels: { spend: { polices: {} } } }))).toMatch(
      /^policy\.json: approvalChannels\.spend\.polices: unknown field \(did you mean "policies"\?\)/,
    );
    expect(problem(JSON.stringify({ approvalChanels: {} }))).toMatch(/approvalChanels: unknown field \(did you mean "approvalChannels"\?\)/);
  });

  it("rejects a name that is not a channel and suggests the likely one", () => {
    expect(problem(JSON.stringify({ approvalChannels: { byRisk: { high: ["approver", "consol"] } } }))).toBe(
      'policy.json: approvalChannels.byRisk.high[1]: "consol" is not an approval channel (did you mean "console"?); ' +
        "the channels are client_elicitation, approver, operator, console",
    );
    expect(problem(JSON.stringify({ approvalChannels: { spend: { default: ["elicitation"] } } }))).toContain(
      'approvalChannels.spend.default[0]: "elicitation" is not an approval channel',
    );
    expect(problem(JSON.stringify({ approvalChannels: { byRisk: { low: [1] } } }))).toContain(
      "approvalChannels.byRisk.low[0]: expected one of the channels client_elicitation, approver, operator, console",
    );
  });

  it("rejects a channel listed twice", () => {
    expect(problem(JSON.stringify({ approvalChannels: { capabilities: { "http.request": ["console", "approver", "console"] } } }))).toBe(
      'policy.json: approvalChannels.capabilities.http.request[2]: "console" is listed twice; name each channel once',
    );
  });

  it("refuses an empty list: it would leave an approval nobody can give", () => {
    expect(problem(JSON.stringify({ approvalChannels: { byRisk: { critical: [] } } }))).toBe(
      "policy.json: approvalChannels.byRisk.critical: an empty list leaves no way to approve; deny the capability instead",
    );
    expect(problem(JSON.stringify({ approvalChannels: { capabilities: { "shell.exec": [] } } }))).toContain(
      "approvalChannels.capabilities.shell.exec: an empty list leaves no way to approve; deny the capability instead",
    );
    expect(problem(JSON.stringify({ approvalChannels: { spend: { default: [], tools: { wire_treasury_transfer: [] } } } }))).toBe(
      "policy.json: approvalChannels.spend.default: an empty list leaves no way to approve; to forbid these spends, " +
        "tighten the ledger's spend policy instead; approvalChannels.spend.tools.wire_treasury_transfer: an empty list " +
        "leaves no way to approve; to forbid these spends, tighten the ledger's spend policy instead",
    );
  });

  it("checks the keys: capability names, spend policy names and tool names", () => {
    const msg = problem(
      JSON.stringify({
        approvalChannels: {
          capabilities: { "http*": ["approver"], "files.*": ["console"] },
          spend: { policies: { Wire: ["approver"] }, tools: { "wire-transfer": ["approver"] } },
        },
      }),
    );
    expect(msg).toContain('approvalChannels.capabilities: field name "http*": "http*" is a wildcard; the one pattern taken is a prefix followed by .* ("files.*")');
    expect(msg).not.toContain("files.*\": ");
    expect(msg).toContain('approvalChannels.spend.policies: field name "Wire": "Wire" is not a spend policy name');
    expect(msg).toContain('approvalChannels.spend.tools: field name "wire-transfer": "wire-transfer" is not a tool name');
  });

  it("names a section or a list of the wrong type", () => {
    expect(problem(JSON.stringify({ approvalChannels: ["approver"] }))).toBe("policy.json: approvalChannels: expected object, got array");
    expect(problem(JSON.stringify({ approvalChannels: { byRisk: { high: "approver" } } }))).toBe(
      "policy.json: approvalChannels.byRisk.high: expected array, got string",
    );
  });
});
