import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestIssuer, type TestIssuer } from "../support/oauth-issuer.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { httpClient, removeDir, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { TEST_REDIS_URL } from "../support/redis.js";

// Two tenants on one control plane (issue 13, "What must be shown"): chaos-core serve on Postgres
// with a pool of two connections and sessions in Redis; each tenant writes what it can, the other
// tries to read, search, recall, verify and inspect it through every tool and resource that takes
// an id or a query — and the same under churn, many interleaved transactions on the two
// connections, with both tenants using the very same keys.
// Tenant A signs in through OAuth (a real local issuer), tenant B with an API key.

const tag = `${process.pid}-${randomBytes(3).toString("hex")}`;
const A = { tenant: `iso-a-${tag}`, principal: "alice", secret: `alpha-secret-${tag}` };
const B = { tenant: `iso-b-${tag}`, principal: "bob", key: `bk_${randomBytes(24).toString("hex")}`, secret: `beta-secret-${tag}` };

type Structured = Record<string, unknown>;
const structured = (r: unknown) => ((r as CallToolResult).structuredContent ?? {}) as Structured;
const errorCode = (r: unknown) => (structured(r).error as { code?: string } | undefined)?.code;

const RESOURCE = "https://chaos.isolation.test/mcp";

let db: TestDatabase;
let issuer: TestIssuer;
let serve: ServeProcess;
let dir: string;
let a: Client;
let b: Client;

beforeAll(async () => {
  db = await createTestDatabase("chaoscore_isolation");
  dir = tempDir("chaos-core-isolation-");
  const keysFile = join(dir, "keys.json");
  writeFileSync(
    keysFile,
    JSON.stringify(
      // B holds the approver role in its own tenant: what keeps it from A's approvals is the tenant, not the role.
      [{ tenant: B.tenant, principal: B.principal, sha256: createHash("sha256").update(B.key).digest("hex"), roles: ["approver"] }],
    ),
  );
  // Tenant A's own capability policy: outbound HTTP needs a person's approval, so A can hold a pending one.
  const policyFile = join(dir, "policy-a.json");
  writeFileSync(policyFile, JSON.stringify({ requireConfirmationFor: ["http.request"], httpAllowedDomains: ["example.com"] }));
  const set = await runToExit(["policy", "set", policyFile, "--tenant", A.tenant, "--database-url", db.url], {});
  expect(set.code, set.stderr).toBe(0);
  issuer = await startTestIssuer(RESOURCE);
  serve = await startServe({
    CHAOS_CORE_OAUTH_ISSUER: issuer.issuer,
    CHAOS_CORE_OAUTH_RESOURCE: RESOURCE,
    CHAOS_CORE_OAUTH_TENANT_CLAIM: "org_id",
    CHAOS_CORE_DATA_DIR: dir,
    DATABASE_URL: db.url,
    REDIS_URL: TEST_REDIS_URL,
    CHAOS_CORE_API_KEYS_FILE: keysFile,
    CHAOS_CORE_PG_POOL_MAX: "2",
  });
  const token = await issuer.sign({ sub: A.principal, org_id: A.tenant, scope: "chaoscore:agent" });
  a = await httpClient(serve.url, { Authorization: `Bearer ${token}` });
  b = await httpClient(serve.url, { Authorization: `Bearer ${B.key}` });
}, 120_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await serve?.stop();
  await issuer?.close();
  await db?.drop();
  if (dir) removeDir(dir);
});

const call = (c: Client, name: string, args: Record<string, unknown>) => c.callTool({ name, arguments: args });

describe("two tenants on one control plane", () => {
  let plan: string;
  let council: string;
  let approval: string;

  beforeAll(async () => {
    // What tenant A holds: a memory, a plan, a council session, and the ledger entries they make.
    expect(errorCode(await call(a, "chaoscore_remember", { key: "shared-name", value: A.secret, tags: ["iso"] }))).toBeUndefined();
    const planned = structured(await call(a, "chaoscore_plan", { objective: `remember ${A.secret} as a note` }));
    plan = planned.plan_id as string;
    expect(plan).toEqual(expect.any(String));
    const init = structured(await call(a, "council_init", { task: `decide about ${A.secret}` }));
    council = (init.sessionId ?? init.session_id) as string;
    expect(council).toEqual(expect.any(String));
    const pending = structured(
      await call(a, "chaoscore_execute", { steps: [{ id: "s1", capability: "http.request", input: { url: `https://example.com/${A.secret}` } }] }),
    );
    approval = ((pending.results as Structured[] | undefined)?.[0]?.approval as { approval_id: string } | undefined)?.approval_id as string;
    expect(approval, JSON.stringify(pending)).toEqual(expect.any(String));
    expect(approval).toEqual(expect.any(String));
  }, 60_000);

  it("memory: B recalls nothing of A's by key, by query or by tag, and its own key of the same name is its own", async () => {
    for (const args of [{ key: "shared-name" }, { query: "alpha-secret" }, { tags: ["iso"] }, { query: A.secret }]) {
      const r = await call(b, "chaoscore_recall", args);
      expect(JSON.stringify(r), JSON.stringify(args)).not.toContain(A.secret);
    }
    await call(b, "chaoscore_remember", { key: "shared-name", value: B.secret });
    expect(JSON.stringify(await call(b, "chaoscore_recall", { key: "shared-name" }))).toContain(B.secret);
    expect(JSON.stringify(await call(a, "chaoscore_recall", { key: "shared-name" }))).toContain(A.secret);
    expect(JSON.stringify(await call(a, "chaoscore_recall", { key: "shared-name" }))).not.toContain(B.secret);
  });

  it("plans: B cannot execute A's plan", async () => {
    const r = await call(b, "chaoscore_execute", { plan_id: plan });
    expect((r as CallToolResult).isError).toBe(true);
    expect(errorCode(r)).toBe("not_found");
    expect(JSON.stringify(r)).not.toContain(A.secret);
  });

  it("approvals: B can neither approve, reject nor run A's pending approval", async () => {
    for (const [name, args] of [
      ["chaoscore_approve", { approval_id: approval, approve: true }],
      ["chaoscore_approve", { approval_id: approval, approve: false }],
      ["chaoscore_execute", { approval_id: approval }],
    ] as const) {
      const r = await call(b, name, args);
      expect((r as CallToolResult).isError, name).toBe(true);
      expect(errorCode(r), name).toBe("not_found");
      expect(JSON.stringify(r), name).not.toContain(A.secret);
    }
  });

  it("council: B cannot recall, continue, score, save to or verify A's session, nor read or list it as a resource", async () => {
    for (const [name, args] of [
      ["council_recall", { sessionId: council }],
      ["council_continue", { sessionId: council }],
      ["council_score", { sessionId: council }],
      ["council_verify", { sessionId: council, claims: ["x"] }],
      [
        "council_save",
        {
          sessionId: council,
          phase: "decompile",
          output: { summary: "planted by another tenant", decisions: ["x"], constraints: [], confidence: 0.5, criticalQuestions: [], claims: [] },
        },
      ],
    ] as const) {
      const r = await call(b, name, args);
      expect((r as CallToolResult).isError, name).toBe(true);
      expect(errorCode(r), name).toBe("not_found");
      expect(JSON.stringify(r), name).not.toContain(A.secret);
    }
    await expect(b.readResource({ uri: `council://sessions/${council}` })).rejects.toThrow(/not found/i);
    await expect(b.readResource({ uri: `council://sessions/${council}/brief` })).rejects.toThrow(/not found/i);
    const listed = await b.listResources();
    expect(JSON.stringify(listed)).not.toContain(council);
    // A still reads its own, untouched by B's attempt to save into it.
    const own = await a.readResource({ uri: `council://sessions/${council}` });
    expect(JSON.stringify(own)).toContain(A.secret);
    expect(JSON.stringify(own)).not.toContain("planted by another tenant");
  });

  it("ledger: B's audit ledger and checkpoint are its own; nothing of A's is in them", async () => {
    const ledgerB = await call(b, "inspect_audit_ledger", { limit: 100 });
    expect(errorCode(ledgerB)).toBeUndefined();
    expect(JSON.stringify(ledgerB)).not.toContain(A.secret);
    expect(JSON.stringify(ledgerB)).not.toContain(A.tenant);
    const ledgerA = await call(a, "inspect_audit_ledger", { limit: 100 });
    expect(JSON.stringify(ledgerA)).toContain(A.tenant);
    const checkpointB = await b.readResource({ uri: "chaoscore://ledger/checkpoint" });
    expect(JSON.stringify(checkpointB)).toContain(B.tenant);
    expect(JSON.stringify(checkpointB)).not.toContain(A.tenant);
  });

  it("sessions: B's inspection lists only its own", async () => {
    const sessions = await call(b, "chaoscore_inspect", { what: "sessions" });
    expect(errorCode(sessions)).toBeUndefined();
    expect(JSON.stringify(sessions)).not.toContain(A.principal);
    expect(JSON.stringify(sessions)).toContain(B.principal);
  });

  it("under churn on two connections: interleaved writes and reads of the same keys by both tenants never cross", async () => {
    const rounds = 30;
    const work = (c: Client, t: typeof A, i: number) => async () => {
      await call(c, "chaoscore_remember", { key: `churn-${i % 5}`, value: `${t.tenant}:${i}` });
      const got = JSON.stringify(await call(c, "chaoscore_recall", { key: `churn-${i % 5}` }));
      const other = t === A ? B : A;
      return { own: got.includes(`${t.tenant}:`), leaked: got.includes(`${other.tenant}:`) };
    };
    const jobs = Array.from({ length: rounds }, (_, i) => [work(a, A, i), work(b, B, i)]).flat();
    const results = await Promise.all(jobs.map((j) => j()));
    expect(results.filter((r) => r.leaked)).toEqual([]);
    expect(results.every((r) => r.own)).toBe(true);
  }, 120_000);
});
