import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { JsonObject } from "@bufbuild/protobuf";
import { credentials, makeClientConstructor, type Client, type ServiceDefinition } from "@grpc/grpc-js";
import { ChaosError, ContextSigner, createGrpcClient, createLogger, createPostgresDb, createRedisTenantGenerations, type Db, type RunningGrpcServer } from "@chaos-core/kit";
import { createPolicyServer, createSqlPolicyStore, createSqlTenantRegistry, migratePolicy, type PolicyStore, type TenantRegistry } from "@chaos-core/policy";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { service as healthService } from "grpc-health-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";
import { TEST_REDIS_URL, uniquePrefix } from "../../../test/support/redis.js";
import { startWebhookReceiver } from "../../../test/support/webhook-receiver.js";
import { Webhook } from "standardwebhooks";
import { generateKeyringFile } from "./keys/keyring.js";
import { as, requestAndIssue, type FixtureToolCall } from "./test-support/flows.js";

const MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const KEY = "ledger-main-test-key-0123456789abcdefghij";
const TOOL_POLICY = { version: "tp-1", tools: { "reports.delete": { risk: "high" as const, resources: ["bucket:reports"] } } };
const DELETE: FixtureToolCall = { tool: "reports.delete", resource: "bucket:reports", arguments: { report_id: "q3" } };
const TENANT = "acme";

interface Running {
  child: ChildProcess;
  address: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** Starts `node dist/main.js` with only the given environment, in an empty directory (no .env). */
async function startMain(env: Record<string, string>, cwd: string): Promise<Running> {
  const child = spawn(process.execPath, [MAIN], {
    cwd,
    env: { PATH: process.env.PATH ?? "", CHAOS_CORE_CONTEXT_KEY: KEY, HOST: "127.0.0.1", PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`main did not start in time:\n${err}`)), 60_000);
    child.stderr?.on("data", (d: Buffer) => {
      err += d.toString();
      const m = /"address":"([^"]+)"/.exec(err);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`main exited with ${code}:\n${err}`));
    });
  });
  return { child, address, stdout: () => out, stderr: () => err, exited };
}

/** Runs main to completion (for start-up failures). */
async function runMain(env: Record<string, string>, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [MAIN], { cwd, env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  return { code, stdout, stderr };
}

const HealthClient = makeClientConstructor(healthService as unknown as ServiceDefinition, "grpc.health.v1.Health");

async function healthOf(address: string, service: string): Promise<string> {
  const client = new HealthClient(address, credentials.createInsecure()) as unknown as Client & {
    check(req: { service: string }, cb: (err: Error | null, res?: { status: string }) => void): void;
  };
  try {
    return await new Promise<string>((resolve, reject) =>
      client.check({ service }, (err, res) => (err ? reject(err) : resolve(String(res?.status)))),
    );
  } finally {
    client.close();
  }
}

async function stop(running: Running): Promise<number | null> {
  running.child.kill("SIGTERM");
  return running.exited;
}

describe("ledger main, run alone", () => {
  let database: TestDatabase;
  let cwd: string;
  let keysFile: string;
  let policyFile: string;
  let redis: Redis;
  const prefix = uniquePrefix("ledger-main");
  // The policy service the ledger asks for approval channels, over gRPC as in Kubernetes.
  let policyDb: Db;
  let policyStore: PolicyStore;
  let policy: RunningGrpcServer;
  let registry: TenantRegistry;

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npx tsc -b services/ledger\` first`);
    database = await createTestDatabase("chaoscore_ledger_main");
    cwd = await mkdtemp(join(tmpdir(), "chaoscore-ledger-main-"));
    keysFile = join(cwd, "ledger-keys.json");
    await generateKeyringFile(keysFile);
    policyFile = join(cwd, "ledger-policy.json");
    await writeFile(policyFile, JSON.stringify({ defaults: { tool_approval: TOOL_POLICY } }));
    redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    policyDb = createPostgresDb({ connectionString: database.url });
    await migratePolicy(policyDb);
    policyStore = createSqlPolicyStore(policyDb);
    // The tenant registry publishes generations in the Redis the ledger reads them from.
    registry = createSqlTenantRegistry(policyDb, { generations: createRedisTenantGenerations(redis, { prefix }) });
    policy = await createPolicyServer({
      host: "127.0.0.1",
      port: 0,
      adminPort: 0,
      signer: new ContextSigner(KEY),
      store: policyStore,
      registry,
      logger: createLogger("policy-test", "silent"),
    }).start();
  });
  afterAll(async () => {
    await policy?.shutdown(0);
    await policyStore?.close();
    await policyDb?.close();
    if (redis) {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
    await database?.drop();
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  const env = (): Record<string, string> => ({
    DATABASE_URL: database.url,
    REDIS_URL: TEST_REDIS_URL,
    CHAOS_CORE_REDIS_PREFIX: prefix,
    CHAOS_CORE_LEDGER_KEYS_FILE: keysFile,
    CHAOS_CORE_LEDGER_POLICY_FILE: policyFile,
    POLICY_ADDR: `127.0.0.1:${policy.port}`,
  });

  it("serves over gRPC: health SERVING, one of 64 concurrent authorizations wins; after a restart with Redis flushed the receipt is still spent", async () => {
    const mrtrState = { jti: randomBytes(16).toString("base64url"), flow: randomBytes(16).toString("base64url"), tool: "chaoscore_execute", expiresAtMs: BigInt(Date.now() + 600_000) };
    const first = await startMain(env(), cwd);
    let receipt: JsonObject | undefined;
    let kid: string;
    try {
      expect(await healthOf(first.address, "")).toBe("SERVING");
      expect(await healthOf(first.address, "chaoscore.ledger.v1.LedgerService")).toBe("SERVING");
      const { client, close } = createGrpcClient(LedgerService, first.address, new ContextSigner(KEY));
      try {
        const info = await client.getInfo({}, as(TENANT, "agent@acme"));
        const keys = (info.info?.keys ?? []) as { kid: string; active: boolean; public_key: string }[];
        expect(keys).toHaveLength(1);
        kid = keys[0]!.kid;
        expect(JSON.stringify(info.info)).not.toMatch(/PRIVATE/);
        ({ receipt } = await requestAndIssue(client, { tenant: TENANT, requester: "agent@acme", approver: "approver@acme", call: DELETE }));
        expect(receipt.kid).toBe(kid);
        // The policy service, asked over gRPC, does not let the requesting client's own form answer at high risk.
        const byForm = await requestAndIssue(client, { tenant: TENANT, requester: "agent@acme", approver: "agent@acme", call: DELETE, approvedVia: "elicitation" }).catch(
          (e: unknown) => e,
        );
        expect(byForm).toBeInstanceOf(ChaosError);
        expect((byForm as ChaosError).message).toMatch(/^channel_not_allowed: policy allows approver, operator, console .*by rule approvalChannels\.byRisk\.high/);
        const results = await Promise.all(Array.from({ length: 64 }, () => client.authorize({ call: DELETE, receipt }, as(TENANT, "agent@acme"))));
        expect(results.filter((r) => r.code === "AUTHORIZED")).toHaveLength(1);
        expect(results.filter((r) => r.code === "replayed_receipt")).toHaveLength(63);
        // A sealed MCP requestState is used once the same way, under mrtr: in the nonce path.
        const consumed = await client.consumeRequestState(mrtrState, as(TENANT, "agent@acme"));
        expect(consumed).toMatchObject({ consumed: true, code: "consumed" });
      } finally {
        close();
      }
    } finally {
      expect(await stop(first)).toBe(0);
    }
    expect(first.stdout()).toBe("");
    expect(first.stderr()).toMatch(/"msg":"applied migrations"/);
    expect(first.stderr()).toMatch(/"msg":"ledger ready"/);
    expect(first.stderr()).toMatch(/"msg":"stopped"/);

    // Only Postgres remembers now.
    const keys = await redis.keys(`${prefix}*`);
    expect(keys).toContain(`${prefix}{${TENANT}}:nonce:${receipt!.nonce as string}`);
    expect(keys).toContain(`${prefix}{${TENANT}}:nonce:mrtr:${mrtrState.jti}`);
    await redis.del(...keys);

    const again = await startMain(env(), cwd);
    try {
      const { client, close } = createGrpcClient(LedgerService, again.address, new ContextSigner(KEY));
      try {
        const replay = await client.authorize({ call: DELETE, receipt: receipt! }, as(TENANT, "agent@acme"));
        expect(replay).toMatchObject({ authorized: false, code: "replayed_receipt" });
        expect(await client.consumeRequestState(mrtrState, as(TENANT, "agent@acme"))).toMatchObject({ consumed: false, code: "already_consumed" });
        const listed = await client.listEntries({ limit: 1000 }, as(TENANT, "agent@acme"));
        // request, receipt; the form's request and its refusal; 64 authorizations; the replay;
        // the requestState consumed, and refused after the restart.
        expect(listed.size).toBe(2n + 2n + 64n + 1n + 2n);
        expect(listed.entries.filter((e) => e.event?.authorized === true)).toHaveLength(1);
        const chain = await client.verifyChain({}, as(TENANT, "agent@acme"));
        expect(chain).toMatchObject({ ok: true, entries: 71n });
      } finally {
        close();
      }
    } finally {
      expect(await stop(again)).toBe(0);
    }
  });

  it("takes a tenant's tool-approval policy from the tenant registry over the file's, from its next call", async () => {
    const main = await startMain(env(), cwd);
    try {
      const { client, close } = createGrpcClient(LedgerService, main.address, new ContextSigner(KEY));
      const toolPolicyOf = async (tenant: string) => (await client.getInfo({}, as(tenant, `agent@${tenant}`))).info?.tool_approval_policy;
      try {
        const t = await registry.createTenant({ id: "bravo", settings: { ledgerPolicy: { tool_approval: { ...TOOL_POLICY, version: "bravo-tools-1" } } } });
        expect(await toolPolicyOf("bravo")).toBe("bravo-tools-1");
        expect(await toolPolicyOf(TENANT)).toBe("tp-1");
        // The change is published in Redis before it commits: the ledger re-reads on bravo's next call.
        await registry.updateSettings("bravo", { ...t.settings, ledgerPolicy: { tool_approval: { ...TOOL_POLICY, version: "bravo-tools-2" } } });
        expect(await toolPolicyOf("bravo")).toBe("bravo-tools-2");
        await registry.updateSettings("bravo", t.settings);
        expect(await toolPolicyOf("bravo")).toBe("bravo-tools-1");
      } finally {
        close();
      }
    } finally {
      expect(await stop(main)).toBe(0);
    }
  });

  it("sends signed approval notifications when CHAOS_CORE_WEBHOOK_URL is set, logging only the receiver's origin", async () => {
    const receiver = await startWebhookReceiver();
    const secret = `whsec_${randomBytes(32).toString("base64")}`;
    // Chat webhooks carry their credential in the path: it must never reach a log line.
    const url = receiver.url.replace("/hook", "/hooks/T0k3nInThePath");
    const running = await startMain(
      { ...env(), CHAOS_CORE_WEBHOOK_URL: url, CHAOS_CORE_WEBHOOK_SECRET: secret, CHAOS_CORE_PUBLIC_URL: "https://chaos.example.com" },
      cwd,
    );
    try {
      const { client, close } = createGrpcClient(LedgerService, running.address, new ContextSigner(KEY));
      try {
        const tenant = `wh-main-${randomBytes(3).toString("hex")}`;
        const held = await client.evaluateSpendGate({ policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } }, as(tenant, "agent@acme"));
        expect(held.state).toBe("HITL_REQUIRED");
        const id = `msg_${tenant}_${held.ledgerSeq}`;
        await receiver.waitFor("the pending spend", () => receiver.byId(id).length > 0);
        const [got] = receiver.byId(id);
        expect(new Webhook(secret).verify(got!.body, got!.headers)).toMatchObject({
          type: "approval.pending",
          data: { tenant, kind: "spend", request_seq: Number(held.ledgerSeq), console_url: `https://chaos.example.com/approvals/spend/${held.ledgerSeq}` },
        });
        expect(got!.headers["user-agent"]).toMatch(/^chaos-core\//);
      } finally {
        close();
      }
    } finally {
      expect(await stop(running)).toBe(0);
      await receiver.close();
    }
    expect(running.stderr()).toMatch(/"msg":"webhook notifications on"/);
    expect(running.stderr()).not.toContain("T0k3nInThePath");
    expect(running.stderr()).not.toContain(secret.slice(6));
  });

  it("refuses to start with a webhook URL and no secret, naming the variable", async () => {
    const failed = await runMain({ ...env(), CHAOS_CORE_CONTEXT_KEY: KEY, PORT: "0", CHAOS_CORE_WEBHOOK_URL: "https://hooks.example.com/x" }, cwd);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/CHAOS_CORE_WEBHOOK_SECRET: is required with CHAOS_CORE_WEBHOOK_URL/);
  });

  it("refuses to start without the policy service's address, naming the variable", async () => {
    const { POLICY_ADDR: _unset, ...noPolicy } = env();
    const missing = await runMain({ ...noPolicy, CHAOS_CORE_CONTEXT_KEY: KEY, PORT: "0" }, cwd);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe("");
    expect(missing.stderr).toMatch(/POLICY_ADDR: is required when the ledger runs alone: the address of the policy service \(host:port, dns:\/\/\/host:port/);
  });

  it("refuses to start without a keys file, naming the variable", async () => {
    const { CHAOS_CORE_LEDGER_KEYS_FILE: _unset, ...noKeys } = env();
    const missingVar = await runMain({ ...noKeys, CHAOS_CORE_CONTEXT_KEY: KEY, PORT: "0" }, cwd);
    expect(missingVar.code).toBe(1);
    expect(missingVar.stdout).toBe("");
    expect(missingVar.stderr).toMatch(/CHAOS_CORE_LEDGER_KEYS_FILE: is required/);

    const missingFile = await runMain({ ...env(), CHAOS_CORE_LEDGER_KEYS_FILE: join(cwd, "nope.json"), CHAOS_CORE_CONTEXT_KEY: KEY, PORT: "0" }, cwd);
    expect(missingFile.code).toBe(1);
    expect(missingFile.stderr).toMatch(/CHAOS_CORE_LEDGER_KEYS_FILE: ledger keyring \S+nope\.json: file not found/);
  });
});
