import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, type CallContext, type Env } from "@chaos-core/kit";
import { defaultPolicyDocument, formatPolicyDocument, validatePolicyDocument } from "@chaos-core/policy";
import { Decision } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { POLICY_EXAMPLES as EXAMPLES } from "../../../test/support/policy-examples.js";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";
import { loadStandaloneConfig } from "./config.js";
import { runPolicyCommand } from "./policy-command.js";
import { createRuntime, type Runtime } from "./runtime.js";

let dir: string;
/** An environment whose per-user data directory is an empty temporary one. */
let bare: Env;

async function runIn(env: Env, ...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runPolicyCommand(argv, { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) }, env });
  return { code, out, err };
}

async function policyFile(name: string, document: unknown): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, typeof document === "string" ? document : JSON.stringify(document));
  return file;
}

const DENY_REMEMBER = { deniedCapabilities: ["memory.remember"], httpAllowedDomains: ["api.example.com"] };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "chaoscore-policy-cli-"));
  bare = { HOME: join(dir, "home"), XDG_DATA_HOME: join(dir, "home", "xdg") };
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("chaos-core policy on Postgres", () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase("chaoscore_policy_cli");
  });
  afterAll(async () => {
    await database?.drop();
  });

  it("shows a tenant's policy with its version, stores a file as the next version, and refuses an invalid one naming the field", async () => {
    const pg = (...argv: string[]) => runIn(bare, ...argv, "--database-url", database.url, "--tenant", "acme");

    const first = await pg("show", "--json");
    expect(first.code).toBe(0);
    expect(JSON.parse(first.out)).toMatchObject({ tenant: "acme", version: 0, source: "postgres", document: defaultPolicyDocument() });

    const good = await policyFile("deny-remember.json", DENY_REMEMBER);
    expect(await pg("set", good)).toMatchObject({ code: 0, out: 'policy of tenant "acme" stored as version 1 (postgres)\n' });
    const shown = await pg("show");
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.out)).toMatchObject(DENY_REMEMBER);
    expect(shown.out).toBe(formatPolicyDocument(validatePolicyDocument(DENY_REMEMBER, "test")));
    expect(shown.err).toMatch(/^policy of tenant "acme": version 1 \(postgres, stored /);

    // The validation policy.json gets: the field is named, nothing is stored.
    const bad = await policyFile("bad.json", { deniedCapabilities: ["ok.one", 7], denyAbove: "high" });
    const refused = await pg("set", bad);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain(`${bad}: deniedCapabilities[1]: expected string, got number`);
    expect(refused.err).toContain("denyAbove: unknown field; accepted fields: allowedCapabilities");
    // A rule's condition is compiled when the document is set: a type error is named with its rule and position.
    const badRule = await policyFile("bad-rule.json", { rules: [{ capability: "files.write", effect: "deny", when: "capability.risk + 1" }] });
    const refusedRule = await pg("set", badRule);
    expect(refusedRule.code).toBe(1);
    expect(refusedRule.err).toContain(`${badRule}: rules[0].when: no such overload: string + int at 1:1 in "capability.risk + 1"`);
    const conflict = await pg("set", good, "--expected-version", "5");
    expect(conflict.code).toBe(1);
    expect(conflict.err).toContain("the policy is at version 1, not 5");
    expect(JSON.parse((await pg("show", "--json")).out)).toMatchObject({ version: 1 });

    // DATABASE_URL finds the same store a server on this environment uses; tenants stay apart.
    const fromEnv = await runIn({ ...bare, DATABASE_URL: database.url }, "show", "--tenant", "acme", "--json");
    expect(JSON.parse(fromEnv.out)).toMatchObject({ version: 1, document: DENY_REMEMBER });
    expect(JSON.parse((await runIn({ ...bare, DATABASE_URL: database.url }, "show", "--json")).out)).toMatchObject({ tenant: "default", version: 0 });
  });

  it("exits 2 on usage errors", async () => {
    const good = await policyFile("usage.json", {});
    const cases: string[][] = [
      [],
      ["frobnicate"],
      ["show", "--bogus"],
      ["show", "extra"],
      ["set"],
      ["set", good, good],
      ["set", good, "--expected-version", "0"],
      ["show", "--expected-version", "1"],
      ["show", "--tenant", "Not A Tenant"],
      ["show", "--database-url", "mysql://nope"],
      ["show", "--database-url", database.url, "--data-dir", dir],
    ];
    for (const argv of cases) expect((await runIn(bare, ...argv)).code, argv.join(" ")).toBe(2);
    expect((await runIn(bare, "help")).code).toBe(0);
  });
});

describe("chaos-core policy test and explain on the issue's four examples", () => {
  const support = { id: "sam", roles: ["support"] };
  const CASES = {
    cases: [
      { name: "report written", capability: "filesystem.write_file", risk: "medium", args: { path: "/srv/reports/q4.txt" }, expect: { effect: "allow", rule: "default" } },
      { name: "escape refused", capability: "filesystem.write_file", risk: "medium", args: { path: "/srv/reports/../etc/x" }, expect: { effect: "deny", rule: "rules[0]" } },
      { name: "sandbox merge", capability: "github.merge_pull_request", risk: "high", args: { repository: "sandbox/demo" }, expect: { effect: "allow", rule: "rules[1]" } },
      { name: "production merge", capability: "github.merge_pull_request", risk: "high", args: { repository: "acme/api" }, expect: { effect: "require_approval", rule: "riskRules.requireApprovalAtOrAbove" } },
      { name: "support files", capability: "jira.create_issue", risk: "low", principal: support, expect: { effect: "allow" } },
      { name: "others may not", capability: "jira.create_issue", risk: "low", principal: { id: "dev", roles: ["developer"] }, expect: { effect: "deny", rule: "rules[2]" } },
      { name: "daytime delete", capability: "jira.delete_issue", risk: "medium", principal: support, now: "2026-12-07T09:00:00Z", expect: { effect: "allow" } },
      { name: "evening delete", capability: "jira.delete_issue", risk: "medium", principal: support, now: "2026-12-07T19:00:00Z", expect: { effect: "require_approval", rule: "rules[3]" } },
    ],
  };

  it("passes every case, and fails naming expected and got when the policy changes under them", async () => {
    const policy = await policyFile("examples.policy.json", EXAMPLES);
    const tests = await policyFile("examples.tests.json", CASES);
    const run = await runIn(bare, "test", tests, "--policy", policy);
    expect(run.code, run.out + run.err).toBe(0);
    expect(run.out).toContain(`8 passed, 0 failed (policy version 0, file ${policy}, not stored)`);

    // The allow narrowed to another prefix: the case that counted on it fails, with a diff a person reads.
    const narrowed = EXAMPLES.rules.map((r, i) => (i === 1 ? { ...r, when: 'args.repository.matches("^playground/")' } : r));
    const changed = await policyFile("changed.policy.json", { ...EXAMPLES, rules: narrowed });
    const failed = await runIn(bare, "test", tests, "--policy", changed, "--json");
    expect(failed.code).toBe(1);
    const report = JSON.parse(failed.out) as { passed: number; failed: number; results: Array<{ name: string; line: string }> };
    expect(report).toMatchObject({ passed: 7, failed: 1 });
    expect(report.results.find((r) => r.name === "sandbox merge")?.line).toBe(
      'FAIL case "sandbox merge": expected ALLOW by rules[1], got REQUIRE_APPROVAL by riskRules.requireApprovalAtOrAbove',
    );

    const explained = await runIn(bare, "explain", "--policy", policy, "--capability", "jira.delete_issue", "--risk", "medium", "--roles", "support", "--now", "2026-12-07T19:00:00Z");
    expect(explained.code).toBe(0);
    expect(explained.out).toMatch(/^REQUIRE_APPROVAL by rules\[3\] \(policy version 0, file .*; jira\.delete_issue at medium risk\)\n {2}condition: now\.getHours/);
    expect(explained.out).toContain("approval channels: operator, console (rules[3].channels)");
    expect(explained.out).toContain("rules[2]\tdeny\tfalse");
    const unknown = await runIn(bare, "explain", "--policy", policy, "--capability", "jira.delete_issue");
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('"jira.delete_issue" is not a capability this environment\'s registry knows');
  });
});

describe("chaos-core policy on a data directory (the embedded default)", () => {
  const ctx: CallContext = { tenant: "default", principal: "agent" };
  let dataDir: string;
  let runtime: Runtime | undefined;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "chaoscore-policy-cli-embedded-"));
    const config = loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: dataDir, LOG_LEVEL: "silent" });
    runtime = await createRuntime(config, createLogger("policy-cli-test", "silent"), { version: "0.0.0", sessionTtlSeconds: 600, admin: true });
  });

  afterAll(async () => {
    await runtime?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("sets policy.json through the running server (in force at once) and in place when it is stopped, versioned either way", async () => {
    const env = { CHAOS_CORE_DATA_DIR: dataDir };
    expect(JSON.parse((await runIn(env, "show", "--json")).out)).toMatchObject({ tenant: "default", version: 1, document: defaultPolicyDocument() });

    const good = await policyFile("embedded.json", DENY_REMEMBER);
    const live = await runIn(env, "set", good);
    expect(live).toMatchObject({ code: 0, out: `policy of tenant "default" stored as version 2 (in force now on the server running on ${dataDir})\n` });
    const decision = await runtime!.deps.policy.evaluate({ capability: "memory.remember" }, { ctx });
    expect(decision).toMatchObject({ decision: Decision.DENY, policyVersion: 2n });
    const bad = await policyFile("embedded-bad.json", "{ not json");
    expect((await runIn(env, "set", bad)).code).toBe(1);
    expect((await runIn(env, "show", "--tenant", "acme")).err).toContain('holds the policy of tenant "default" only');

    await runtime!.close();
    runtime = undefined;

    // Stopped: written in place under the data directory's lock; the next start applies it.
    const stopped = await runIn(env, "set", await policyFile("embedded-2.json", {}));
    expect(stopped.code).toBe(0);
    expect(stopped.out).toContain("stored as version 3");
    expect(await readFile(join(dataDir, "policy.json"), "utf8")).toBe(formatPolicyDocument(validatePolicyDocument({}, "test")));
    expect(JSON.parse((await runIn(env, "show", "--json")).out)).toMatchObject({ version: 3 });
  });
});
