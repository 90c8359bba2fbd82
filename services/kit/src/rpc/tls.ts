import { createHash, createPrivateKey, X509Certificate, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  experimental,
  type ChannelCredentials,
  type ChannelOptions,
  type ServerCredentials,
} from "@grpc/grpc-js";
import { ConfigError, GRPC_TLS_VARS, loadGrpcTransportConfig, type Env, type GrpcTlsConfig } from "../config.js";
import type { Logger } from "../logger.js";

type CaListener = experimental.CaCertificateUpdateListener;
type IdentityListener = experimental.IdentityCertificateUpdateListener;

/** How often the certificate files are read again (cert-manager renews them in place in the Secret). */
export const GRPC_TLS_REFRESH_MS = 60_000;

/** The certificate files, read and checked. */
interface Material {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer;
  /** The leaf certificate's expiry, for the logs. */
  readonly notAfter: string;
  readonly digest: string;
}

function pemBlocks(pem: string, label: string): string[] {
  return [...pem.matchAll(new RegExp(`-----BEGIN ${label}-----[\\s\\S]+?-----END ${label}-----`, "g"))].map((m) => m[0]);
}

function fail(variable: string, message: string): never {
  throw new ConfigError(`invalid configuration:\n  ${variable}: ${message}`, [{ variable, message }]);
}

function read(variable: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return fail(variable, `cannot read ${file}${code === "ENOENT" ? ": no such file" : code === "EACCES" ? ": permission denied" : `: ${(err as Error).message}`}`);
  }
}

function certificates(variable: string, file: string, pem: Buffer): X509Certificate[] {
  const blocks = pemBlocks(pem.toString("utf8"), "CERTIFICATE");
  if (blocks.length === 0) fail(variable, `${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  return blocks.map((b, i) => {
    try {
      return new X509Certificate(b);
    } catch (err) {
      return fail(variable, `${file}: certificate ${i + 1} cannot be parsed: ${(err as Error).message}`);
    }
  });
}

/**
 * Reads the three files and checks what a TLS handshake would otherwise reveal only to the peer:
 * PEM that parses, a key that belongs to the certificate, a certificate within its validity and
 * signed by the CA (so peers trusting the same CA accept it).
 */
function loadMaterial(config: GrpcTlsConfig, now = new Date()): Material {
  const cert = read(GRPC_TLS_VARS.cert, config.certFile);
  const key = read(GRPC_TLS_VARS.key, config.keyFile);
  const ca = read(GRPC_TLS_VARS.ca, config.caFile);
  const chain = certificates(GRPC_TLS_VARS.cert, config.certFile, cert);
  const roots = certificates(GRPC_TLS_VARS.ca, config.caFile, ca);
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    return fail(GRPC_TLS_VARS.key, `${config.keyFile} is not a PEM private key: ${(err as Error).message}`);
  }
  const leaf = chain[0]!;
  if (!leaf.checkPrivateKey(privateKey)) {
    fail(GRPC_TLS_VARS.key, `${config.keyFile} is not the key of the certificate in ${GRPC_TLS_VARS.cert} (${config.certFile}, ${leaf.subject.replace(/\n/g, ", ")})`);
  }
  if (new Date(leaf.validTo) <= now) fail(GRPC_TLS_VARS.cert, `the certificate in ${config.certFile} expired on ${leaf.validTo}`);
  if (new Date(leaf.validFrom) > now) fail(GRPC_TLS_VARS.cert, `the certificate in ${config.certFile} is valid only from ${leaf.validFrom}`);
  const signed = chain.some((c) => roots.some((r) => c.checkIssued(r) && c.verify(r.publicKey)));
  if (!signed) {
    fail(
      GRPC_TLS_VARS.cert,
      `the certificate in ${config.certFile} (issuer ${leaf.issuer.replace(/\n/g, ", ")}) is not signed by a certificate in ${GRPC_TLS_VARS.ca} (${config.caFile}); peers trusting that CA would refuse it`,
    );
  }
  const digest = createHash("sha256").update(cert).update(key).update(ca).digest("hex");
  return { cert, key, ca, notAfter: leaf.validTo, digest };
}

/**
 * A grpc-js certificate provider that hands out only checked material: the files are read and
 * checked at start (a problem stops the service, naming the variable), then read again every
 * `refreshMs`; a changed set that passes the checks replaces the old one for new connections, one
 * that fails is logged and ignored (the previous certificates stay in use).
 */
class CheckedFileCertificateProvider implements experimental.CertificateProvider {
  private material: Material;
  private readonly caListeners = new Set<CaListener>();
  private readonly identityListeners = new Set<IdentityListener>();
  private readonly timer: NodeJS.Timeout;
  private lastProblem = "";

  constructor(
    private readonly config: GrpcTlsConfig,
    private readonly logger: Logger,
    refreshMs: number,
  ) {
    this.material = loadMaterial(config);
    this.timer = setInterval(() => this.refresh(), refreshMs);
    this.timer.unref();
  }

  get notAfter(): string {
    return this.material.notAfter;
  }

  /** Reads the files again; exported for tests through {@link GrpcTls.reload}. */
  refresh(): boolean {
    let next: Material;
    try {
      next = loadMaterial(this.config);
    } catch (err) {
      const problem = err instanceof ConfigError ? err.issues.map((i) => `${i.variable}: ${i.message}`).join("; ") : String(err);
      if (problem !== this.lastProblem) this.logger.error({ problem }, "gRPC TLS files rejected; the previous certificates stay in use");
      this.lastProblem = problem;
      return false;
    }
    this.lastProblem = "";
    if (next.digest === this.material.digest) return false;
    this.material = next;
    this.logger.info({ certFile: this.config.certFile, notAfter: next.notAfter }, "gRPC TLS certificates reloaded");
    for (const l of this.caListeners) l({ caCertificate: next.ca });
    for (const l of this.identityListeners) l({ certificate: next.cert, privateKey: next.key });
    return true;
  }

  // grpc-js adds its listeners before the watcher that needs the update: answer on the next tick, as its own provider does.
  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    const { ca } = this.material;
    process.nextTick(() => this.caListeners.has(listener) && listener({ caCertificate: ca }));
  }
  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
  }
  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    const { cert, key } = this.material;
    process.nextTick(() => this.identityListeners.has(listener) && listener({ certificate: cert, privateKey: key }));
  }
  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
  }
  close(): void {
    clearInterval(this.timer);
  }
}

/** TLS between the services, loaded from {@link GrpcTlsConfig}'s files. */
export interface GrpcTls {
  readonly config: GrpcTlsConfig;
  /** What a gRPC server binds with (requiring client certificates under mutual TLS). */
  serverCredentials(): ServerCredentials;
  /** What a gRPC client connects with (presenting its certificate under mutual TLS). */
  channelCredentials(): ChannelCredentials;
  /** `grpc.ssl_target_name_override` when a server name is configured. */
  channelOptions(): ChannelOptions;
  /** Reads the files again now (otherwise every {@link GRPC_TLS_REFRESH_MS}); true when they changed and passed the checks. */
  reload(): boolean;
  /** Stops reading the files again. */
  close(): void;
}

/**
 * Loads and checks the certificate files at once (throws a ConfigError naming the variable and
 * the file), logs what is in force, and keeps them fresh (see {@link CheckedFileCertificateProvider}).
 */
export function openGrpcTls(config: GrpcTlsConfig, options: { logger: Logger; refreshMs?: number }): GrpcTls {
  const provider = new CheckedFileCertificateProvider(config, options.logger, options.refreshMs ?? GRPC_TLS_REFRESH_MS);
  options.logger.info(
    { certFile: config.certFile, caFile: config.caFile, mutual: config.mutual, serverName: config.serverName, notAfter: provider.notAfter },
    "gRPC TLS on",
  );
  return {
    config,
    // grpc-js's exported function names its parameters (ca, identity) but passes them on as (identity, ca).
    serverCredentials: () => experimental.createCertificateProviderServerCredentials(provider, config.mutual ? provider : null, config.mutual),
    channelCredentials: () => experimental.createCertificateProviderChannelCredentials(provider, config.mutual ? provider : null),
    channelOptions: () => (config.serverName ? { "grpc.ssl_target_name_override": config.serverName } : {}),
    reload: () => provider.refresh(),
    close: () => provider.close(),
  };
}

/** The transport a service's main passes to its server and clients. */
export interface GrpcTransport {
  readonly tls: GrpcTls | undefined;
  readonly healthPort: number | undefined;
}

/**
 * Reads `CHAOS_CORE_GRPC_TLS_*` and `CHAOS_CORE_GRPC_HEALTH_PORT` and opens the certificate files
 * (every check done now, so a bad setting stops the service at start, naming the variable).
 */
export function openGrpcTransport(logger: Logger, env?: Env): GrpcTransport {
  const config = loadGrpcTransportConfig(env);
  return { tls: config.tls ? openGrpcTls(config.tls, { logger }) : undefined, healthPort: config.healthPort };
}
