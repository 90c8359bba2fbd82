import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { allStarted, httpClient, removeDir, startServe, stdioClient, tempDir, type ServeProcess } from "../support/processes.js";

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
  const dirs = [tempDir(), tempDir()];
  let serve: ServeProcess;
  let overHttp: Client;
  let overStdio: Client;

  beforeAll(async () => {
    await Promise.all(dirs.map(seedDataDir));
    for (const d of dirs) writeFileSync(join(d, "policy.json"), JSON.stringify(DENY_REMEMBER, null, 2));
    await allStarted([
      startServe({ CHAOS_CORE_DATA_DIR: dirs[0] }).then(async (s) => {
        serve = s;
        overHttp = await httpClient(serve.url);
      }),
      stdioClient({ CHAOS_CORE_DATA_DIR: dirs[1] }).then((s) => (overStdio = s.client)),
    ]);
  });

  afterAll(async () => {
    await overHttp?.close();
    await overStdio?.close();
    await serve?.stop();
    dirs.forEach(removeDir);
  });

  it("reports a denied capability as denied over stdio and over HTTP", async () => {
    await expectDenied(overStdio);
    await expectDenied(overHttp);
    for (const c of [overStdio, overHttp]) {
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
      });
    }
  });

  it("picks up an edit of the policy file with a new version", async () => {
    const before = await inspectPolicy(overHttp);
    writeFileSync(join(dirs[0]!, "policy.json"), JSON.stringify({ requireConfirmationFor: ["http.request"] }, null, 2));
    let after = before;
    for (let i = 0; i < 100 && Number(after.version) === Number(before.version); i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await inspectPolicy(overHttp);
    }
    expect(Number(after.version)).toBe(Number(before.version) + 1);
    const res = await overHttp.callTool({ name: "chaoscore_remember", arguments: { key: "k", value: 1 } });
    expect(res.isError).toBeFalsy();
  });
});
