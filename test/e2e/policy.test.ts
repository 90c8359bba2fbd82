import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { bothTransports } from "../support/both-transports.js";

const DENY_REMEMBER = { deniedCapabilities: ["memory.remember"], requireConfirmationFor: ["http.request"] };

interface PolicyView {
  version: number | string;
  document: Record<string, unknown>;
  decision?: { decision: string; matched_rule?: string; matchedRule?: string };
}

async function inspectPolicy(client: Client, capability?: string): Promise<PolicyView> {
  const res = await client.callTool({
    name: "chaoscore_inspect",
    arguments: capability ? { what: "policy", capability } : { what: "policy" },
  });
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return (res.structuredContent as { policy: PolicyView }).policy;
}

async function expectDenied(client: Client) {
  const res = await client.callTool({ name: "chaoscore_remember", arguments: { key: "k", value: 1 } });
  expect(res.isError).toBe(true);
  expect((res.structuredContent as { error: { code: string } }).error.code).toBe("policy_denied");
  expect(JSON.stringify(res.content)).toMatch(/deniedCapabilities/);
}

describe("policy through both transports", () => {
  const both = bothTransports();
  beforeAll(() => both.start((d) => writeFileSync(join(d, "policy.json"), JSON.stringify(DENY_REMEMBER, null, 2))));
  afterAll(() => both.close());

  it("reports a denied capability as denied over stdio and over HTTP", async () => {
    await expectDenied(both.overStdio);
    await expectDenied(both.overHttp);
    for (const c of [both.overStdio, both.overHttp]) {
      const view = await inspectPolicy(c, "memory.remember");
      expect(view.decision?.decision).toMatch(/DENY/);
      // Shown in policy.json's own vocabulary, defaults filled in, so it can be pasted back.
      expect(view.document).toEqual({
        allowedCapabilities: [],
        deniedCapabilities: ["memory.remember"],
        requireConfirmationFor: ["http.request"],
        httpAllowedDomains: [],
        riskRules: { requireApprovalAtOrAbove: "high", denyAtOrAbove: "never" },
        approvalChannels: {
          byRisk: {
            low: ["client_elicitation", "approver", "operator", "console"],
            medium: ["client_elicitation", "approver", "operator", "console"],
            high: ["approver", "operator", "console"],
            critical: ["approver", "operator", "console"],
          },
          capabilities: {},
          spend: { default: ["approver", "operator", "console"], policies: {}, tools: {} },
        },
        rules: [],
      });
    }
  });

  it("picks up an edit of the policy file with a new version", async () => {
    const before = await inspectPolicy(both.overHttp);
    writeFileSync(join(both.dirs[0], "policy.json"), JSON.stringify({ requireConfirmationFor: ["http.request"] }, null, 2));
    let after = before;
    for (let i = 0; i < 100 && Number(after.version) === Number(before.version); i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await inspectPolicy(both.overHttp);
    }
    expect(Number(after.version)).toBe(Number(before.version) + 1);
    const res = await both.overHttp.callTool({ name: "chaoscore_remember", arguments: { key: "k", value: 1 } });
    expect(res.isError).toBeFalsy();
  });
});
