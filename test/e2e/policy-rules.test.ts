import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * Issue 33: policy rules with CEL conditions on a real upstream tool (server-filesystem from npm):
 * `chaos-core policy test` and `policy explain` against the standalone's policy.json (the
 * capability's risk and annotations from upstreams.lock) and against a tenant on Postgres; then
 * the rules enforced through a real MCP client — a write allowed under the reports directory
 * without a person (the allow waives the high-risk approval), one elsewhere denied before the tool
 * runs, a condition erroring at call time failing closed — and the ledger's decision entries
 * naming the rule, its condition and the time it saw.
 */

interface Step {
  capability: string;
  status: string;
  ran: boolean;
  error?: { code: string; message: string };
}
const results = (res: unknown) => ((res as CallToolResult).structuredContent as { results: Step[] }).results;
const step = (capability: string, input: Record<string, unknown>) => ({ steps: [{ id: "p1", capability, input }] });
const server = join(ROOT, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");

describe("policy rules with conditions, on a real upstream", () => {
  const dir = tempDir("chaos-core-policy-rules-");
  const share = join(dir, "share");
  const reports = join(share, "reports");
  const env = { CHAOS_CORE_DATA_DIR: dir };
  const rules = [
    {
      capability: "files.write_file",
      effect: "deny",
      when: `!(args.path.startsWith("${reports}/") && !args.path.contains("/../"))`,
      description: "reports only",
    },
    { capability: "files.write_file", effect: "allow", when: `args.path.startsWith("${reports}/")`, description: "report writes need no person" },
    { capability: "files.read_text_file", effect: "deny", when: "args.head > 100.0", description: "short reads only" },
  ];
  let serve: ServeProcess | undefined;
  let client: Client | undefined;
  let database: TestDatabase | undefined;

  beforeAll(async () => {
    await seedDataDir(dir);
    mkdirSync(reports, { recursive: true });
    writeFileSync(join(share, "notes.txt"), "friday\n");
    writeFileSync(join(dir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "files", command: process.execPath, args: [server, share] }] }));
    writeFileSync(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["http.request"], rules }));
    const locked = await runToExit(["upstreams", "lock"], env, 90_000);
    expect(locked.code, locked.stderr).toBe(0);
    expect(locked.stderr).not.toContain("warning");
    database = await createTestDatabase("chaoscore_policy_rules_e2e");
  }, 120_000);

  afterAll(async () => {
    await client?.close().catch(() => {});
    await serve?.stop();
    await database?.drop();
    removeDir(dir);
  });

  const cases = {
    cases: [
      { name: "report written", capability: "files.write_file", args: { path: `${reports}/q4.txt`, content: "x" }, expect: { effect: "allow", rule: "rules[1]" } },
      { name: "escape refused", capability: "files.write_file", args: { path: `${reports}/../x.txt`, content: "x" }, expect: { effect: "deny", rule: "rules[0]" } },
      { name: "elsewhere refused", capability: "files.write_file", args: { path: "/etc/x", content: "x" }, expect: { effect: "deny", rule: "rules[0]" } },
      { name: "long read refused", capability: "files.read_text_file", args: { path: `${share}/notes.txt`, head: 500 }, expect: { effect: "deny", rule: "rules[2]" } },
      { name: "read without head fails closed", capability: "files.read_text_file", args: { path: `${share}/notes.txt` }, expect: { effect: "deny", rule: "rules[2]" } },
      { name: "other tools untouched", capability: "files.list_directory", args: { path: share }, expect: { effect: "allow", rule: "default" } },
    ],
  };

  it("policy test passes its cases against policy.json, with each tool's risk from upstreams.lock, and fails with a readable diff", async () => {
    const file = join(dir, "policy.tests.json");
    writeFileSync(file, JSON.stringify(cases));
    const run = await runToExit(["policy", "test", file], env);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain('ok   case "report written": ALLOW by rules[1]');
    expect(run.stdout).toMatch(/6 passed, 0 failed \(policy version 1, file:/);

    const wrong = join(dir, "wrong.tests.json");
    writeFileSync(wrong, JSON.stringify({ cases: [{ ...cases.cases[0], expect: { effect: "require_approval" } }] }));
    const failed = await runToExit(["policy", "test", wrong], env);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toContain('FAIL case "report written": expected REQUIRE_APPROVAL, got ALLOW by rules[1]');
    expect(failed.stdout).toContain("0 passed, 1 failed");

    const bad = join(dir, "bad.tests.json");
    writeFileSync(bad, JSON.stringify({ cases: [{ name: "x", capability: "files.write_file", expect: { effect: "permit" } }] }));
    const refused = await runToExit(["policy", "test", bad], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`${bad}: cases[0].expect.effect:`);
  });

  it("refuses at policy set, and fails policy test on, a rule reading an argument the pinned tools it names do not declare", async () => {
    const typo = join(dir, "typo.policy.json");
    writeFileSync(typo, JSON.stringify({ rules: [rules[0], { capability: "files.write_file", effect: "deny", when: 'args.pth.startsWith("/etc")' }] }));
    const set = await runToExit(["policy", "set", typo], env);
    expect(set.code).toBe(1);
    expect(set.stderr).toContain(
      `${typo}: rules[1].when: unknown field "pth" at 1:6 in "args.pth.startsWith(\\"/etc\\")", against the pinned input schemas of files.write_file; nothing was stored`,
    );
    expect(JSON.parse((await runToExit(["policy", "show", "--json"], env)).stdout)).toMatchObject({ version: 1 });

    const file = join(dir, "policy.tests.json");
    const tested = await runToExit(["policy", "test", file, "--policy", typo], env);
    expect(tested.code).toBe(1);
    expect(tested.stdout).toContain('FAIL rules[1].when: unknown field "pth"');

    // Re-pinning says so too, before it writes the lock, for the policy.json in force.
    const policyJson = join(dir, "policy.json");
    const inForce = readFileSync(policyJson, "utf8");
    try {
      writeFileSync(policyJson, readFileSync(typo, "utf8"));
      const relocked = await runToExit(["upstreams", "lock"], env, 90_000);
      expect(relocked.code, relocked.stderr).toBe(0);
      expect(relocked.stderr).toContain(`warning: under the new pins, ${policyJson}: rules[1].when: unknown field "pth" at 1:6`);
    } finally {
      writeFileSync(policyJson, inForce);
    }
  });

  it("policy explain says what a call would be decided and what every rule naming it said, without running it", async () => {
    const target = `${share}/elsewhere.txt`;
    const run = await runToExit(["policy", "explain", "--capability", "files.write_file", "--args", JSON.stringify({ path: target, content: "x" }), "--json"], env);
    expect(run.code, run.stderr).toBe(0);
    const answer = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(answer).toMatchObject({
      capability: "files.write_file",
      risk: "high",
      decision: "DENY",
      matched_rule: "rules[0]",
      condition: rules[0]!.when,
      policy_version: 1,
      rules: [
        { rule: "rules[0]", effect: "deny", result: "true" },
        { rule: "rules[1]", effect: "allow", result: "false" },
      ],
    });
    expect(existsSync(target)).toBe(false);
  });

  it("policy test and explain against a tenant's policy on Postgres", async () => {
    const pg = ["--database-url", database!.url, "--tenant", "acme"];
    const policyFile = join(dir, "acme.policy.json");
    writeFileSync(policyFile, JSON.stringify({ rules }));
    expect((await runToExit(["policy", "set", policyFile, ...pg], env)).code).toBe(0);
    const file = join(dir, "policy.tests.json");
    const run = await runToExit(["policy", "test", file, ...pg], env);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain("6 passed, 0 failed (policy version 1, postgres)");
    const explained = await runToExit(["policy", "explain", "--capability", "files.read_text_file", "--args", JSON.stringify({ path: "/x" }), ...pg], env);
    expect(explained.code).toBe(0);
    expect(explained.stdout).toMatch(/^DENY by rules\[2\] \(policy version 1, postgres; files\.read_text_file at low risk\)/);
    expect(explained.stdout).toContain('condition error: rules[2].when: the value has no field "head"');
  });

  it("enforces the rules on the served tool: allowed under reports without a person, denied elsewhere before it runs, closed on a condition error; the ledger names rule, condition and time", async () => {
    serve = await startServe(env);
    client = await httpClient(serve.url);
    const inside = join(reports, "q4.txt");
    const [written] = results(await client.callTool({ name: "chaoscore_execute", arguments: step("files.write_file", { path: inside, content: "quarterly" }) }));
    expect(written).toMatchObject({ status: "executed", ran: true });
    expect(readFileSync(inside, "utf8")).toBe("quarterly");

    const outside = join(share, "cron.txt");
    const [denied] = results(await client.callTool({ name: "chaoscore_execute", arguments: step("files.write_file", { path: outside, content: "evil" }) }));
    expect(denied).toMatchObject({ status: "denied", ran: false });
    expect(existsSync(outside)).toBe(false);

    const [closed] = results(await client.callTool({ name: "chaoscore_execute", arguments: step("files.read_text_file", { path: join(share, "notes.txt") }) }));
    expect(closed).toMatchObject({ status: "denied", ran: false });

    const ledger = (await client.callTool({ name: "inspect_audit_ledger", arguments: { limit: 20 } })).structuredContent as {
      entries: Array<{ event: Record<string, unknown> }>;
    };
    const decisions = ledger.entries.map((e) => e.event).filter((e) => e["type"] === "step.decision");
    const verdicts = decisions.map((e) => e["verdict"] as Record<string, unknown>);
    expect(verdicts).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ decision: "ALLOW", matchedRule: "rules[1]", condition: rules[1]!.when, evaluatedAt: expect.stringMatching(/^\d{4}-/) }),
        expect.objectContaining({ decision: "DENY", matchedRule: "rules[0]", condition: rules[0]!.when }),
        expect.objectContaining({
          decision: "DENY",
          matchedRule: "rules[2]",
          conditionError: expect.stringContaining('rules[2].when: the value has no field "head"'),
        }),
      ]),
    );

    const inspected = (await client.callTool({
      name: "chaoscore_inspect",
      arguments: { what: "policy", capability: "files.write_file", arguments: { path: outside, content: "x" } },
    })) as CallToolResult;
    const policy = (inspected.structuredContent as { policy: { document: { rules: unknown[] }; decision: Record<string, unknown> } }).policy;
    expect(policy.document.rules).toHaveLength(3);
    expect(policy.decision).toMatchObject({ decision: "DENY", matched_rule: "rules[0]", condition: rules[0]!.when, risk: "HIGH" });
    expect(existsSync(outside)).toBe(false);
  });

  it("denies the tools a hand-edited policy.json's rule cannot govern under the served pins, naming the rule, until the file is fixed", async () => {
    // The file's reload checks `args` as a dynamic map; cognition checks it against the pins it serves.
    const version = async () =>
      ((await client!.callTool({ name: "chaoscore_inspect", arguments: { what: "policy" } })).structuredContent as { policy: { version: number } }).policy.version;
    const reloaded = async (after: number) => {
      for (let i = 0; i < 100 && (await version()) === after; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await version()).toBeGreaterThan(after);
    };
    const before = await version();
    const typo = { capability: "files.write_file", effect: "deny", when: 'has(args.pth) && args.pth.endsWith(".sh")', description: "no scripts" };
    writeFileSync(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["http.request"], rules: [...rules, typo] }));
    await reloaded(before);

    const target = join(reports, "typo.txt");
    const [denied] = results(await client!.callTool({ name: "chaoscore_execute", arguments: step("files.write_file", { path: target, content: "x" }) }));
    expect(denied).toMatchObject({ status: "denied", ran: false });
    expect(existsSync(target)).toBe(false);
    const ledger = (await client!.callTool({ name: "inspect_audit_ledger", arguments: { limit: 5 } })).structuredContent as { entries: Array<{ event: Record<string, unknown> }> };
    const verdicts = ledger.entries.map((e) => e.event).filter((e) => e["type"] === "step.decision").map((e) => e["verdict"] as Record<string, unknown>);
    const verdict = verdicts.find((v) => v["matchedRule"] === "rules[3]");
    expect(verdict).toMatchObject({
      decision: "DENY",
      matchedRule: "rules[3]",
      condition: typo.when,
      conditionError: expect.stringMatching(/^rules\[3\]\.when: unknown field "pth" at 1:\d+ .* against the pinned input schemas of files\.write_file$/),
    });
    // Another tool of the upstream, which the rule does not name, is served as before.
    const [listed] = results(await client!.callTool({ name: "chaoscore_execute", arguments: step("files.list_directory", { path: share }) }));
    expect(listed).toMatchObject({ status: "executed", ran: true });

    const fixed = await version();
    writeFileSync(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["http.request"], rules: [...rules, { ...typo, when: 'args.path.endsWith(".sh")' }] }));
    await reloaded(fixed);
    const [written] = results(await client!.callTool({ name: "chaoscore_execute", arguments: step("files.write_file", { path: target, content: "x" }) }));
    expect(written).toMatchObject({ status: "executed", ran: true });
    expect(readFileSync(target, "utf8")).toBe("x");
  });
});
