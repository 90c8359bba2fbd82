/**
 * TLS between the services over real gRPC, with certificates openssl makes for this test: a TLS
 * call works; a plaintext client, a client trusting another CA, and (under mutual TLS) a client
 * without a certificate or with one from another CA are refused; a half-configured or broken
 * setting stops at start naming the variable; renewed files are taken in, broken ones are not.
 */
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createCertAuthority, removeCerts, type CertAuthority, type IssuedCert } from "../../../../test/support/certs.js";
import { ConfigError, loadGrpcTransportConfig, type GrpcTlsConfig } from "../config.js";
import { ContextSigner } from "../context.js";
import { ChaosError } from "../errors.js";
import { createLogger } from "../logger.js";
import { createGrpcClient } from "./grpc.js";
import { checkGrpcHealth } from "./health-client.js";
import { register, startGrpcServer, type RunningGrpcServer } from "./server.js";
import { openGrpcTls, openGrpcTransport, type GrpcTls } from "./tls.js";
import type { ServiceImpl } from "./types.js";

const KEY = "tls-test-key-0123456789abcdefghijklmnop";
const signer = new ContextSigner(KEY);
const logger = createLogger("tls-test", "silent");
const ctx = { ctx: { tenant: "acme", principal: "agent" }, timeoutMs: 3_000 };

const impl: ServiceImpl<typeof PolicyService> = {
  async getPolicy() {
    return { version: 7n, source: "tls" };
  },
  async evaluate() {
    return {};
  },
  async putPolicy() {
    return {};
  },
  async evaluateApprovalChannels() {
    return {};
  },
  async *watchPolicy() {},
};

let ca: CertAuthority;
let other: CertAuthority;
let server: IssuedCert;
let client: IssuedCert;
let stranger: IssuedCert;
const open: { close(): void }[] = [];

const tlsConfig = (c: IssuedCert, extra: Partial<GrpcTlsConfig> = {}): GrpcTlsConfig => ({
  certFile: c.certFile,
  keyFile: c.keyFile,
  caFile: c.caFile,
  mutual: false,
  serverName: undefined,
  ...extra,
});
const tlsOf = (config: GrpcTlsConfig): GrpcTls => {
  const t = openGrpcTls(config, { logger });
  open.push(t);
  return t;
};

async function serve(tls: GrpcTls, healthPort?: number): Promise<RunningGrpcServer> {
  const s = await startGrpcServer({ host: "127.0.0.1", port: 0, signer, logger, registrations: [register(PolicyService, impl)], tls, healthPort });
  open.push({ close: () => void s.shutdown(0) });
  return s;
}

async function call(address: string, tls: GrpcTls | undefined): Promise<bigint> {
  const c = createGrpcClient(PolicyService, address, signer, { tls });
  try {
    return (await c.client.getPolicy({}, ctx)).version;
  } finally {
    c.close();
  }
}

async function refusal(address: string, tls: GrpcTls | undefined): Promise<ChaosError> {
  const err = await call(address, tls).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "the call should have been refused").toBeInstanceOf(ChaosError);
  return err as ChaosError;
}

beforeAll(() => {
  ca = createCertAuthority("chaos-ca");
  other = createCertAuthority("other-ca", `${ca.dir}/..`);
  server = ca.issue("policy");
  client = ca.issue("edge");
  stranger = other.issue("stranger");
});
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});
afterAll(() => {
  removeCerts(ca);
});

describe("gRPC TLS between services", () => {
  it("serves a TLS call, and refuses a plaintext client and a client trusting another CA", async () => {
    const s = await serve(tlsOf(tlsConfig(server)));
    const address = `localhost:${s.port}`;
    expect(await call(address, tlsOf(tlsConfig(client)))).toBe(7n);
    // A plaintext client cannot speak to a TLS port.
    const plain = await refusal(address, undefined);
    expect(plain.code).toBe("unavailable");
    expect(plain.message).toContain("the policy service is unreachable");
    // A client that trusts another CA refuses the server's certificate.
    const wrong = await refusal(address, tlsOf({ ...tlsConfig(stranger) }));
    expect(wrong.code).toBe("unavailable");
    expect(wrong.message).toMatch(/certificate/i);
  });

  it("verifies the server name: an address the certificate does not name is refused unless CHAOS_CORE_GRPC_TLS_SERVER_NAME says which name to expect", async () => {
    const named = ca.issue("policy-named", ["DNS:policy.chaos.svc.cluster.local"]);
    const s = await serve(tlsOf(tlsConfig(named)));
    const wrongName = await refusal(`127.0.0.1:${s.port}`, tlsOf(tlsConfig(client)));
    expect(wrongName.message).toMatch(/altnames|Hostname\/IP does not match/i);
    expect(await call(`ipv4:127.0.0.1:${s.port}`, tlsOf(tlsConfig(client, { serverName: "policy.chaos.svc.cluster.local" })))).toBe(7n);
  });

  it("under mutual TLS refuses a client without a certificate and one signed by another CA", async () => {
    const s = await serve(tlsOf(tlsConfig(server, { mutual: true })));
    const address = `localhost:${s.port}`;
    expect(await call(address, tlsOf(tlsConfig(client, { mutual: true })))).toBe(7n);
    // Trusts the right CA, presents no certificate.
    expect((await refusal(address, tlsOf(tlsConfig(client)))).code).toBe("unavailable");
    // Presents a certificate of another CA (and trusts ours, so only the server can object).
    // Its CA file lists both CAs: its own certificate passes the start-up check, and it trusts our server.
    const mixed = `${stranger.dir}/both-ca.crt`;
    writeFileSync(mixed, readFileSync(other.caFile, "utf8") + readFileSync(ca.caFile, "utf8"));
    const foreign = await refusal(address, tlsOf({ ...tlsConfig(stranger), caFile: mixed, mutual: true }));
    expect(foreign.code).toBe("unavailable");
  });

  it("serves plaintext health on CHAOS_CORE_GRPC_HEALTH_PORT beside the TLS port, for the kubelet's probe", async () => {
    const s = await serve(tlsOf(tlsConfig(server)), 0);
    expect(s.healthPort).toBeGreaterThan(0);
    expect(await checkGrpcHealth(`127.0.0.1:${s.healthPort}`)).toBe("SERVING");
    s.setServing(false);
    expect(await checkGrpcHealth(`127.0.0.1:${s.healthPort}`)).toBe("NOT_SERVING");
    expect(await checkGrpcHealth(`localhost:${s.port}`, "liveness", 3_000, tlsOf(tlsConfig(client)))).toBe("SERVING");
    // The health port serves nothing else.
    await expect(call(`127.0.0.1:${s.healthPort}`, undefined)).rejects.toMatchObject({ code: "unimplemented" });
  });

  it("takes renewed files in for new connections, and keeps the previous ones when the new files are broken", async () => {
    const renewedDir = ca.issue("policy-renewed");
    const live = ca.issue("policy-live");
    const tls = tlsOf(tlsConfig(live));
    const s = await serve(tls);
    expect(tls.reload()).toBe(false); // unchanged
    copyFileSync(renewedDir.certFile, live.certFile);
    copyFileSync(renewedDir.keyFile, live.keyFile);
    expect(tls.reload()).toBe(true);
    expect(await call(`localhost:${s.port}`, tlsOf(tlsConfig(client)))).toBe(7n);
    // A half-written renewal (a key of another certificate) is refused; the server still serves.
    copyFileSync(client.keyFile, live.keyFile);
    expect(tls.reload()).toBe(false);
    expect(await call(`localhost:${s.port}`, tlsOf(tlsConfig(client)))).toBe(7n);
  });
});

describe("gRPC TLS settings", () => {
  const full = () => ({
    CHAOS_CORE_GRPC_TLS_CERT_FILE: server.certFile,
    CHAOS_CORE_GRPC_TLS_KEY_FILE: server.keyFile,
    CHAOS_CORE_GRPC_TLS_CA_FILE: server.caFile,
  });
  const issues = (env: Record<string, string>) => {
    try {
      openGrpcTransport(logger, env).tls?.close();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).message;
    }
    throw new Error("the settings were accepted");
  };

  it("is off without any of the files, on with all three", () => {
    expect(loadGrpcTransportConfig({})).toEqual({ tls: undefined, healthPort: undefined });
    expect(loadGrpcTransportConfig({ ...full(), CHAOS_CORE_GRPC_TLS_MUTUAL: "true", CHAOS_CORE_GRPC_HEALTH_PORT: "8081" })).toEqual({
      tls: { certFile: server.certFile, keyFile: server.keyFile, caFile: server.caFile, mutual: true, serverName: undefined },
      healthPort: 8081,
    });
  });

  it("refuses a half-configured TLS, naming each missing variable", () => {
    const msg = issues({ CHAOS_CORE_GRPC_TLS_CERT_FILE: server.certFile });
    expect(msg).toContain("CHAOS_CORE_GRPC_TLS_KEY_FILE: is required with CHAOS_CORE_GRPC_TLS_CERT_FILE");
    expect(msg).toContain("CHAOS_CORE_GRPC_TLS_CA_FILE: is required with CHAOS_CORE_GRPC_TLS_CERT_FILE");
    expect(issues({ CHAOS_CORE_GRPC_TLS_MUTUAL: "true" })).toContain("CHAOS_CORE_GRPC_TLS_MUTUAL: is true, but TLS is off");
    expect(issues({ CHAOS_CORE_GRPC_TLS_SERVER_NAME: "policy" })).toContain("CHAOS_CORE_GRPC_TLS_SERVER_NAME: is set, but TLS is off");
    expect(issues({ ...full(), CHAOS_CORE_GRPC_TLS_MUTUAL: "yes" })).toContain('CHAOS_CORE_GRPC_TLS_MUTUAL: must be "true" or "false"');
  });

  it("refuses files that a handshake would fail on, naming the variable and the file", () => {
    expect(issues({ ...full(), CHAOS_CORE_GRPC_TLS_CA_FILE: "/nonexistent/ca.crt" })).toContain("CHAOS_CORE_GRPC_TLS_CA_FILE: cannot read /nonexistent/ca.crt: no such file");
    expect(issues({ ...full(), CHAOS_CORE_GRPC_TLS_KEY_FILE: client.keyFile })).toContain(`CHAOS_CORE_GRPC_TLS_KEY_FILE: ${client.keyFile} is not the key of the certificate`);
    expect(issues({ ...full(), CHAOS_CORE_GRPC_TLS_CA_FILE: other.caFile })).toContain("is not signed by a certificate in CHAOS_CORE_GRPC_TLS_CA_FILE");
    const notPem = `${server.dir}/not-pem.crt`;
    writeFileSync(notPem, "hello");
    expect(issues({ ...full(), CHAOS_CORE_GRPC_TLS_CERT_FILE: notPem })).toContain(`CHAOS_CORE_GRPC_TLS_CERT_FILE: ${notPem} holds no PEM certificate`);
    expect(issues({ ...full(), CHAOS_CORE_GRPC_TLS_KEY_FILE: server.certFile })).toContain("is not a PEM private key");
  });
});

