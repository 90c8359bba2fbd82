/**
 * Mutual TLS between the services, as the chart configures it (CHAOS_CORE_GRPC_TLS_* from a
 * cert-manager style Secret, a plaintext health-only port for the kubelet's probe): the six
 * services as their own processes with certificates openssl made for this test, driven by a real
 * MCP client; a plaintext caller and a caller trusting another CA are refused; a half-configured
 * service refuses to start, naming the variable.
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { checkGrpcHealth, ContextSigner, createGrpcClient, createLogger, openGrpcTls, type ChaosError } from "@chaos-core/kit";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { createCertAuthority, removeCerts, type CertAuthority, type IssuedCert } from "../support/certs.js";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createMrtrKeys, type MrtrKeys } from "../support/mrtr-keys.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { childEnv, httpClient, ROOT, startServiceMain, startServiceMains, stopProcess } from "../support/processes.js";

const tlsEnv = (c: IssuedCert) => ({
  CHAOS_CORE_GRPC_TLS_CERT_FILE: c.certFile,
  CHAOS_CORE_GRPC_TLS_KEY_FILE: c.keyFile,
  CHAOS_CORE_GRPC_TLS_CA_FILE: c.caFile,
  CHAOS_CORE_GRPC_TLS_MUTUAL: "true",
});

describe("mutual TLS between the services run as their own processes", () => {
  let db: TestDatabase;
  let ca: CertAuthority;
  let other: CertAuthority;
  let keys: LedgerKeys;
  let mrtrKeys: MrtrKeys;
  let key: string;
  let policy: string;
  let policyLog: () => string;
  let client: Client;
  let edgeUrl: string;
  const procs: ChildProcess[] = [];
  const logger = createLogger("tls-e2e", "silent");

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_grpc_tls");
    ca = createCertAuthority("cluster-ca");
    other = createCertAuthority("other-ca", join(ca.dir, ".."));
    key = randomBytes(32).toString("hex");
    keys = await createLedgerKeys();
    mrtrKeys = await createMrtrKeys();
    // One certificate per service, as a cert-manager Certificate per component would issue.
    const envOf = (name: string, env: Record<string, string>, healthPort = true) => ({
      ...tlsEnv(ca.issue(name)),
      CHAOS_CORE_CONTEXT_KEY: key,
      ...(healthPort ? { CHAOS_CORE_GRPC_HEALTH_PORT: "0" } : {}),
      ...env,
    });
    const start = async (name: string, env: Record<string, string>, healthPort = true) => {
      const s = await startServiceMain(name, envOf(name, env, healthPort));
      procs.push(s.proc);
      return s;
    };
    const common = { DATABASE_URL: db.url };
    const [p, m, k] = await startServiceMains(procs, [
      ["policy", envOf("policy", common)],
      ["memory", envOf("memory", common)],
      ["council", envOf("council", common)],
    ]);
    policy = p.address;
    policyLog = p.log;
    const memory = m.address;
    const council = k.address;
    const ledger = (await start("ledger", { ...common, ...keys.env, POLICY_ADDR: policy })).address;
    const cognition = (await start("cognition", { POLICY_ADDR: policy, MEMORY_ADDR: memory, LEDGER_ADDR: ledger, CHAOS_CORE_PROVIDER: "heuristic" })).address;
    const edge = await start("edge", { ...mrtrKeys.env, POLICY_ADDR: policy, MEMORY_ADDR: memory, COGNITION_ADDR: cognition, COUNCIL_ADDR: council, LEDGER_ADDR: ledger }, false);
    edgeUrl = edge.address;
    client = await httpClient(edgeUrl);
  }, 120_000);

  afterAll(async () => {
    await client?.close();
    for (const p of procs.reverse()) await stopProcess(p);
    await db?.drop();
    await keys?.remove();
    await mrtrKeys?.remove();
    if (ca) removeCerts(ca);
  });

  it("serves MCP tools through edge → cognition → policy, memory, ledger over mutual TLS", async () => {
    const ready = await fetch(edgeUrl.replace(/\/mcp$/, "/readyz"));
    expect(await ready.json()).toMatchObject({ status: "ready" });
    const wrote = await client.callTool({ name: "chaoscore_remember", arguments: { key: "tls", value: { mutual: true } } });
    expect(wrote.isError, JSON.stringify(wrote.content)).toBeFalsy();
    const read = await client.callTool({ name: "chaoscore_recall", arguments: { key: "tls" } });
    expect((read.structuredContent as { items: { value: unknown }[] }).items[0]?.value).toEqual({ mutual: true });
    const achieved = await client.callTool({ name: "chaoscore_achieve", arguments: { objective: "remember that certificates rotate monthly" } });
    expect(achieved.structuredContent, JSON.stringify(achieved.content)).toMatchObject({ status: "succeeded" });
    const council = await client.callTool({ name: "council_init", arguments: { task: "Rotate the cluster CA" } });
    expect(council.isError, JSON.stringify(council.content)).toBeFalsy();
  });

  it("refuses a plaintext caller, one without a client certificate and one trusting another CA", async () => {
    const signer = new ContextSigner(key);
    const ask = async (tls: ReturnType<typeof openGrpcTls> | undefined) => {
      const c = createGrpcClient(PolicyService, policy, signer, { tls });
      try {
        await c.client.getPolicy({}, { ctx: { tenant: "acme", principal: "intruder" }, timeoutMs: 3_000 });
        return undefined;
      } catch (err) {
        return err as ChaosError;
      } finally {
        c.close();
        tls?.close();
      }
    };
    const plain = await ask(undefined);
    expect(plain?.code).toBe("unavailable");
    const noCert = await ask(openGrpcTls({ ...tlsEnvConfig(ca.issue("anonymous")), mutual: false }, { logger }));
    expect(noCert?.code).toBe("unavailable");
    const wrongCa = await ask(openGrpcTls({ ...tlsEnvConfig(other.issue("stranger")), mutual: true }, { logger }));
    expect(wrongCa?.code).toBe("unavailable");
    expect(wrongCa?.message).toMatch(/certificate/i);
    // The same client with a certificate of the cluster CA is served.
    expect(await ask(openGrpcTls({ ...tlsEnvConfig(ca.issue("operator")), mutual: true }, { logger }))).toBeUndefined();
    // Plaintext health on the main port fails; over TLS it answers.
    await expect(checkGrpcHealth(policy)).rejects.toThrow();
    const tls = openGrpcTls({ ...tlsEnvConfig(ca.issue("prober")), mutual: true }, { logger });
    await expect(checkGrpcHealth(policy, "", 3_000, tls)).resolves.toBe("SERVING");
    tls.close();
    // The kubelet's probe asks the plaintext health-only port.
    const healthPort = /"healthPort":(\d+)/.exec(policyLog())?.[1];
    expect(healthPort, policyLog()).toBeDefined();
    await expect(checkGrpcHealth(`127.0.0.1:${healthPort}`)).resolves.toBe("SERVING");
  });

  it("refuses to start a service whose TLS is half configured, naming the missing variables", () => {
    const cert = ca.issue("half");
    const r = spawnSync(process.execPath, [join(ROOT, "services/policy/dist/main.js")], {
      cwd: ROOT,
      env: childEnv({ PORT: "0", DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key, CHAOS_CORE_GRPC_TLS_CERT_FILE: cert.certFile, CHAOS_CORE_GRPC_TLS_KEY_FILE: cert.keyFile }),
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("CHAOS_CORE_GRPC_TLS_CA_FILE: is required with CHAOS_CORE_GRPC_TLS_CERT_FILE and CHAOS_CORE_GRPC_TLS_KEY_FILE");
  });
});

function tlsEnvConfig(c: IssuedCert) {
  return { certFile: c.certFile, keyFile: c.keyFile, caFile: c.caFile, serverName: undefined };
}
