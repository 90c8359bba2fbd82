// The Helm chart's topology on one machine (issue 12 item 5): every component as its own process,
// started the way the image's entrypoint starts it, with exactly the environment the chart gives
// its pod (the same variable names and values; the chart's ports, shifted by `portOffset` so two
// topologies run side by side), on this machine's Postgres (and Redis, when given). What the
// chart takes from Secrets are files here, under `dir/secrets/`, made once: the call-context key,
// the edge's API keys, the requestState and ledger keyrings. `test/helm/local-parity.test.ts`
// compares these environments with what `helm template` renders.
import { spawn } from "node:child_process";
import { randomBytes, createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { once } from "node:events";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

const ROOT = resolve(import.meta.dirname, "../..");

/** The chart's default port of each component (values.yaml `components.<name>.port`). */
export const CHART_PORTS = Object.freeze({ edge: 3000, policy: 50051, memory: 50052, cognition: 50053, ledger: 50054, council: 50055 });

/** The chart's `admin.port`: policy's tenant admin API (CHAOS_CORE_ADMIN_PORT), the highest of the chart's ports. */
export const CHART_ADMIN_PORT = 50056;

/** The chart's readiness probe of the edge (`_workloads.tpl`): how often, and after how many failures in a row the pod leaves its Service. */
export const CHART_EDGE_READINESS = Object.freeze({ periodSeconds: 5, failureThreshold: 3 });

/** The port a bridged stdio upstream listens on in its pod (the chart's `chaos-core.bridgePort`); here plus the offset and its index. */
export const CHART_BRIDGE_PORT = 8080;

/** The variables naming a port a process listens on. */
export const LISTEN_VARS = Object.freeze(["PORT", "CHAOS_CORE_ADMIN_PORT", "CHAOS_CORE_GRPC_HEALTH_PORT", "CHAOS_CORE_METRICS_PROMETHEUS_PORT"]);

/** The chart's component order (`chaos-core.componentNames`): the metrics port of each is the chart's plus its index here. */
export const COMPONENT_ORDER = Object.freeze(["edge", "cognition", "policy", "ledger", "memory", "council"]);

/** Start order: callees before their callers. */
export const START_ORDER = Object.freeze(["policy", "memory", "council", "ledger", "cognition", "edge"]);

/** Who calls whom: the `*_ADDR` each component reads (the chart's `chaos-core.callees`). */
const CALLEES = { edge: ["policy", "memory", "cognition", "council", "ledger"], cognition: ["policy", "memory", "ledger"], ledger: ["policy"], policy: [], memory: [], council: [] };
const USES_POSTGRES = new Set(["policy", "memory", "ledger", "council"]);
// Policy publishes tenant generations there; every edge replica reads them per request (docs/tenants.md).
const USES_REDIS = new Set(["edge", "cognition", "policy", "ledger"]);

/** The chart's defaults (values.yaml) for the plain settings. */
const CHART_DEFAULTS = Object.freeze({
  logLevel: "info",
  redisPrefix: "chaoscore:",
  // lifecycle.terminationGracePeriodSeconds and lifecycle.preStopSeconds.
  terminationGracePeriodSeconds: 30,
  preStopSeconds: 5,
  // metrics.prometheus.port.
  metricsPort: 9464,
  edge: { mrtrTtlSeconds: 600, sessionTtlSeconds: 3600, maxSessionsPerKey: 100, approvalWaitSeconds: 300, console: "on" },
  // config.edge.oauth's defaults, once an issuer is set.
  oauth: { tenantClaim: "tenant", acceptJwtTyp: false, clockSkewSeconds: 30, introspectionCacheSeconds: 30 },
  ledgerOrigin: "chaos-core/ledger",
  // upstreams.maxResultBytes.
  maxResultBytes: 1048576,
});

/** Where the chart mounts the upstreams' ConfigMap, their Secret and the stdio emptyDir, here under the topology's folder. */
function upstreamsDirs(dir) {
  return { config: join(dir, "upstreams"), secrets: join(dir, "upstream-secrets"), work: join(dir, "upstreams-work"), bridges: join(dir, "bridges") };
}

/**
 * upstreams.json as the chart renders it from upstreams.declarations (templates/_upstreams.tpl):
 * the chart's keys dropped, a bridged stdio declaration as an HTTP upstream at its bridge (here
 * 127.0.0.1 at CHART_BRIDGE_PORT + portOffset + its index among the bridged) with the bridge's token.
 * @param {{ upstreams: { declarations: Array<Record<string, any>> }, portOffset?: number }} o
 */
export function localUpstreamsJson(o) {
  const kept = ["timeoutMs", "risk", "trustAnnotations", "disabled", "exposure"];
  const upstreams = bridgedPorts(o).map(({ decl, port }) => {
    const { egress: _egress, bridge, ...rest } = decl;
    if (!bridge) return rest;
    const http = { name: decl.name, url: `http://127.0.0.1:${port}/mcp`, headers: { Authorization: { file: bridge.tokenKey, prefix: "Bearer " } } };
    for (const k of kept) if (k in decl) http[k] = decl[k];
    return http;
  });
  return `${JSON.stringify({ upstreams }, null, 2)}\n`;
}

/** Each declaration with the local port of its bridge (undefined when it is not bridged). */
function bridgedPorts(o) {
  let i = 0;
  return o.upstreams.declarations.map((decl) => ({ decl, port: decl.bridge ? CHART_BRIDGE_PORT + (o.portOffset ?? 0) + i++ : undefined }));
}

/** The chart's config.edge.oauth as the edge's variables (docs/auth.md), with the chart's defaults. */
function oauthEnv(oauth) {
  const d = CHART_DEFAULTS.oauth;
  const env = {
    CHAOS_CORE_OAUTH_ISSUER: oauth.issuer,
    CHAOS_CORE_OAUTH_RESOURCE: oauth.resource,
    CHAOS_CORE_OAUTH_TENANT_CLAIM: oauth.tenantClaim ?? d.tenantClaim,
    CHAOS_CORE_OAUTH_ACCEPT_JWT_TYP: String(oauth.acceptJwtTyp ?? d.acceptJwtTyp),
    CHAOS_CORE_OAUTH_CLOCK_SKEW_SECONDS: String(oauth.clockSkewSeconds ?? d.clockSkewSeconds),
  };
  if (oauth.jwksUrl) env.CHAOS_CORE_OAUTH_JWKS_URL = oauth.jwksUrl;
  if (oauth.algorithms?.length) env.CHAOS_CORE_OAUTH_ALGORITHMS = oauth.algorithms.join(",");
  if (oauth.introspection) {
    env.CHAOS_CORE_OAUTH_INTROSPECTION_URL = oauth.introspection.url;
    env.CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID = oauth.introspection.clientId;
    env.CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE = oauth.introspection.clientSecretFile;
    env.CHAOS_CORE_OAUTH_INTROSPECTION_CACHE_SECONDS = String(oauth.introspection.cacheSeconds ?? d.introspectionCacheSeconds);
  }
  return env;
}

/** The files standing in for the chart's Secrets, under `<dir>/secrets/`. */
export function secretFiles(dir) {
  const s = join(dir, "secrets");
  return {
    contextKey: join(s, "context-key"),
    apiKeys: join(s, "api-keys.json"),
    apiKey: join(s, "api-key"),
    mrtrKeyring: join(s, "mrtr-keyring.json"),
    ledgerKeyring: join(s, "ledger-keyring.json"),
  };
}

/**
 * Makes the secret files once (0600): a random call-context key, one API key (its SHA-256 in
 * api-keys.json, the key itself in `api-key` for you to use), the requestState and ledger keyrings.
 */
export async function prepareSecrets(dir) {
  const f = secretFiles(dir);
  mkdirSync(join(dir, "secrets"), { recursive: true, mode: 0o700 });
  const write = (file, text) => writeFileSync(file, text, { mode: 0o600 });
  if (!existsSync(f.contextKey)) write(f.contextKey, randomBytes(32).toString("hex"));
  if (!existsSync(f.apiKeys)) {
    const key = `cc_${randomBytes(24).toString("base64url")}`;
    write(f.apiKey, key);
    write(f.apiKeys, JSON.stringify([{ tenant: "default", principal: "local-agent", sha256: createHash("sha256").update(key, "utf8").digest("hex") }], null, 2));
  }
  if (!existsSync(f.mrtrKeyring)) {
    const { generateMrtrKeyringFile } = await import("@chaos-core/edge");
    await generateMrtrKeyringFile(f.mrtrKeyring);
  }
  if (!existsSync(f.ledgerKeyring)) {
    const { generateKeyringFile } = await import("@chaos-core/ledger");
    await generateKeyringFile(f.ledgerKeyring);
  }
  return f;
}

/**
 * CHAOS_CORE_SHUTDOWN_GRACE_SECONDS as the chart derives it (`chaos-core.shutdownGrace`): what is
 * left of terminationGracePeriodSeconds after the preStop delay and 5 s for the process to exit;
 * below 1 is refused, as the chart's install refuses it.
 * @param {{ terminationGracePeriodSeconds?: number, preStopSeconds?: number }} [lifecycle]
 */
export function shutdownGraceSeconds(lifecycle = {}) {
  const t = lifecycle.terminationGracePeriodSeconds ?? CHART_DEFAULTS.terminationGracePeriodSeconds;
  const p = lifecycle.preStopSeconds ?? CHART_DEFAULTS.preStopSeconds;
  for (const [name, v] of [["terminationGracePeriodSeconds", t], ["preStopSeconds", p]]) {
    if (!Number.isInteger(v) || v < 0) throw new Error(`deploy/local: lifecycle.${name} (${v}) must be a whole number of seconds, 0 or more`);
  }
  const grace = t - p - 5;
  if (grace < 1) {
    throw new Error(`deploy/local: lifecycle.preStopSeconds (${p}) leaves no time to drain within lifecycle.terminationGracePeriodSeconds (${t}): the drain gets terminationGracePeriodSeconds - preStopSeconds - 5 s, at least 1`);
  }
  return grace;
}

/**
 * The environment of each component, as the chart renders it for its pod: the same names in the
 * same cases (`test/helm/local-parity.test.ts`), with local values — 127.0.0.1 addresses and
 * binds, the chart's ports plus `portOffset`, the secret files of {@link secretFiles}.
 * With `grpcTls` (a folder holding `tls.crt`, `tls.key`, `ca.crt`, as the chart's Secret does) the
 * chart's `grpcTls` values apply; each process's plaintext health port is its gRPC port + 10000
 * (the chart's single `healthPort` would collide between processes on one machine).
 * With `metrics` (the chart's `metrics.prometheus.enabled`) each process serves Prometheus on
 * 127.0.0.1 at the chart's `metrics.prometheus.port` (default 9464) + its index in
 * {@link COMPONENT_ORDER} + `portOffset` — the chart's one port per pod would collide here too.
 * Policy's tenant admin API listens at the chart's `admin.port` (50056) + `portOffset`.
 * A `portOffset` that puts any of these ports above 65535 is refused, naming the port.
 * `lifecycle` is the chart's `lifecycle` values (CHAOS_CORE_SHUTDOWN_GRACE_SECONDS, see
 * {@link shutdownGraceSeconds}). `ledgerPolicyFile` is the chart's `config.ledger.policy` ConfigMap file.
 * @param {{ dir: string, databaseUrl: string, redisUrl?: string, portOffset?: number, otlpEndpoint?: string, logLevel?: string, contextKey?: string, grpcTls?: { dir: string, mutual?: boolean, serverName?: string }, ledgerPolicyFile?: string, metrics?: { port?: number }, lifecycle?: { terminationGracePeriodSeconds?: number, preStopSeconds?: number } }} o
 */
export function localEnvironments(o) {
  const offset = o.portOffset ?? 0;
  const port = (c) => CHART_PORTS[c] + offset;
  const f = secretFiles(o.dir);
  const contextKey = o.contextKey ?? readFileSync(f.contextKey, "utf8").trim();
  const grace = shutdownGraceSeconds(o.lifecycle);
  const metricsPort = (c) => (o.metrics?.port ?? CHART_DEFAULTS.metricsPort) + COMPONENT_ORDER.indexOf(c) + offset;
  const envs = {};
  for (const c of Object.keys(CHART_PORTS)) {
    const env = {
      HOST: "127.0.0.1",
      PORT: String(port(c)),
      LOG_LEVEL: o.logLevel ?? CHART_DEFAULTS.logLevel,
      CHAOS_CORE_SHUTDOWN_GRACE_SECONDS: String(grace),
      CHAOS_CORE_CONTEXT_KEY: contextKey,
    };
    if (o.grpcTls) {
      env.CHAOS_CORE_GRPC_TLS_CERT_FILE = join(o.grpcTls.dir, "tls.crt");
      env.CHAOS_CORE_GRPC_TLS_KEY_FILE = join(o.grpcTls.dir, "tls.key");
      env.CHAOS_CORE_GRPC_TLS_CA_FILE = join(o.grpcTls.dir, "ca.crt");
      env.CHAOS_CORE_GRPC_TLS_MUTUAL = String(o.grpcTls.mutual ?? false);
      if (o.grpcTls.serverName) env.CHAOS_CORE_GRPC_TLS_SERVER_NAME = o.grpcTls.serverName;
      if (c !== "edge") env.CHAOS_CORE_GRPC_HEALTH_PORT = String(port(c) + 10_000);
    }
    for (const callee of CALLEES[c]) env[`${callee.toUpperCase()}_ADDR`] = `127.0.0.1:${port(callee)}`;
    if (USES_POSTGRES.has(c)) {
      env.DATABASE_URL = o.databaseUrl;
      // The chart's migrate Job runs first; the services only verify (startTopology migrates once).
      env.CHAOS_CORE_MIGRATE = "verify";
    }
    if (c === "policy") env.CHAOS_CORE_ADMIN_PORT = String(CHART_ADMIN_PORT + offset);
    if (USES_REDIS.has(c) && o.redisUrl) {
      env.REDIS_URL = o.redisUrl;
      if (c !== "edge") env.CHAOS_CORE_REDIS_PREFIX = CHART_DEFAULTS.redisPrefix;
    }
    if (c === "edge") {
      env.CHAOS_CORE_API_KEYS_FILE = f.apiKeys;
      env.CHAOS_CORE_MRTR_KEYS_FILE = f.mrtrKeyring;
      const e = CHART_DEFAULTS.edge;
      env.CHAOS_CORE_MRTR_TTL_SECONDS = String(e.mrtrTtlSeconds);
      env.CHAOS_CORE_SESSION_TTL_SECONDS = String(e.sessionTtlSeconds);
      env.CHAOS_CORE_MAX_SESSIONS_PER_KEY = String(e.maxSessionsPerKey);
      env.CHAOS_CORE_APPROVAL_WAIT_SECONDS = String(e.approvalWaitSeconds);
      env.CHAOS_CORE_CONSOLE = e.console;
      if (o.oauth) Object.assign(env, oauthEnv(o.oauth));
    }
    // The chart's default (config.cognition.policySnapshots): decide from a watched policy snapshot.
    if (c === "cognition") env.CHAOS_CORE_POLICY_SNAPSHOTS = "on";
    // The chart's upstreams.declarations: the rendered ConfigMap's files, the Secret's keys as files, the stdio work emptyDir.
    if (c === "cognition" && o.upstreams) {
      const u = upstreamsDirs(o.dir);
      env.CHAOS_CORE_UPSTREAMS_FILE = join(u.config, "upstreams.json");
      env.CHAOS_CORE_UPSTREAMS_LOCK = join(u.config, "upstreams.lock");
      env.CHAOS_CORE_UPSTREAMS_WORK_DIR = u.work;
      env.CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES = String(CHART_DEFAULTS.maxResultBytes);
      if (o.upstreams.secrets) env.CHAOS_CORE_UPSTREAM_SECRETS_DIR = u.secrets;
    }
    if (c === "ledger") {
      env.CHAOS_CORE_LEDGER_KEYS_FILE = f.ledgerKeyring;
      env.CHAOS_CORE_LEDGER_ORIGIN = CHART_DEFAULTS.ledgerOrigin;
      if (o.ledgerPolicyFile) env.CHAOS_CORE_LEDGER_POLICY_FILE = o.ledgerPolicyFile;
    }
    if (o.otlpEndpoint) env.OTEL_EXPORTER_OTLP_ENDPOINT = o.otlpEndpoint;
    // As the chart: each process names itself whenever it reports (traces, or the scrape's target_info).
    if (o.otlpEndpoint || o.metrics) {
      env.OTEL_SERVICE_NAME = `chaos-core-${c}`;
      env.OTEL_RESOURCE_ATTRIBUTES = `service.namespace=local,deployment.environment.name=local-${offset}`;
    }
    if (o.metrics) {
      env.CHAOS_CORE_METRICS_PROMETHEUS_PORT = String(metricsPort(c));
      env.CHAOS_CORE_METRICS_PROMETHEUS_HOST = "127.0.0.1";
    }
    // The gRPC health ports sit 10 000 above the service ports: an offset fine for those may not be for these.
    for (const k of LISTEN_VARS.filter((v) => env[v] !== undefined)) {
      if (Number(env[k]) > 65535) throw new Error(`deploy/local: portOffset ${offset} puts ${c}'s ${k} at ${env[k]}, above 65535`);
    }
    envs[c] = env;
  }
  return envs;
}

/** What a child gets besides its component environment: only what Node itself needs to run. */
function baseEnv() {
  const keep = ["PATH", "HOME", "TMPDIR", "NODE_EXTRA_CA_CERTS"];
  return Object.fromEntries(keep.filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]]));
}

/**
 * Migrates once (`chaos-core migrate`, the chart's hook Job), then starts every component in
 * {@link START_ORDER} with {@link localEnvironments}, each resolving when it logs its address.
 * Stopping a component is the kubelet's: SIGTERM, then SIGKILL after terminationGracePeriodSeconds
 * (no preStop delay: nothing here needs time to take the process out of a Service's endpoints).
 * @param {{ dir: string, databaseUrl: string, redisUrl?: string, portOffset?: number, otlpEndpoint?: string, logLevel?: string, grpcTls?: { dir: string, mutual?: boolean, serverName?: string }, ledgerPolicyFile?: string, metrics?: { port?: number }, lifecycle?: { terminationGracePeriodSeconds?: number, preStopSeconds?: number }, onLine?: (component: string, line: string) => void }} o
 */
export async function startTopology(o) {
  shutdownGraceSeconds(o.lifecycle); // refused before anything starts, as the chart's install refuses it
  localEnvironments({ ...o, contextKey: "" }); // likewise a port above 65535 (the key file is made below)
  const files = await prepareSecrets(o.dir);
  const migrate = spawn(process.execPath, [join(ROOT, "services/standalone/bin/chaos-core.js"), "migrate", "--database-url", o.databaseUrl], {
    cwd: ROOT,
    env: baseEnv(),
    stdio: ["ignore", "inherit", "inherit"],
  });
  const [code] = await once(migrate, "exit");
  if (code !== 0) throw new Error(`chaos-core migrate exited with ${code}`);
  const envs = localEnvironments(o);
  const bridges = o.upstreams ? await prepareUpstreams(o) : [];
  const killAfterSeconds = o.lifecycle?.terminationGracePeriodSeconds ?? CHART_DEFAULTS.terminationGracePeriodSeconds;
  const procs = new Map();
  const logs = new Map();

  const start = (c) =>
    new Promise((resolveStart, reject) => {
      const proc = spawn(process.execPath, ["--import", "@chaos-core/kit/telemetry", join(ROOT, `services/${c}/dist/main.js`)], {
        cwd: ROOT,
        env: { ...baseEnv(), ...envs[c] },
        stdio: ["ignore", "ignore", "pipe"],
      });
      procs.set(c, proc);
      let log = "";
      logs.set(c, () => log);
      const ready = c === "edge" ? /listening|http:\/\/127\.0\.0\.1:\d+/ : /gRPC server listening/;
      let started = false;
      createInterface({ input: proc.stderr }).on("line", (line) => {
        log += `${line}\n`;
        o.onLine?.(c, line);
        if (!started && ready.test(line)) {
          started = true;
          resolveStart(proc);
        }
      });
      proc.once("exit", (exitCode) => {
        if (!started) reject(new Error(`${c} exited with ${exitCode} before it was ready:\n${log}`));
      });
    });

  const stop = async (c) => {
    const proc = procs.get(c);
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = once(proc, "exit");
    proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), killAfterSeconds * 1000);
    await exited;
    clearTimeout(timer);
  };

  const bridgeProcs = [];
  const stopBridges = async () => {
    for (const p of bridgeProcs) {
      if (p.exitCode !== null || p.signalCode !== null) continue;
      const exited = once(p, "exit");
      p.kill("SIGTERM");
      await exited;
    }
  };
  try {
    // The bridged upstreams' pods first: cognition reaches them on its first call to one.
    for (const b of bridges) bridgeProcs.push(await startBridge(b, o.onLine));
    for (const c of START_ORDER) await start(c);
  } catch (err) {
    for (const c of [...START_ORDER].reverse()) await stop(c);
    await stopBridges();
    throw err;
  }
  return {
    edgeUrl: `http://127.0.0.1:${envs.edge.PORT}/mcp`,
    apiKey: readFileSync(files.apiKey, "utf8").trim(),
    envs,
    processes: procs,
    log: (c) => logs.get(c)?.() ?? "",
    /** Stops one component (SIGTERM, as the kubelet does). */
    stop,
    /** Starts a stopped component again, with the same environment. */
    start: (c) => start(c),
    /** Stops everything, callers first, the bridged upstreams last. */
    async close() {
      for (const c of [...START_ORDER].reverse()) await stop(c);
      await stopBridges();
    },
  };
}

/**
 * Writes what the chart's upstreams values give cognition — upstreams.json and upstreams.lock (the
 * rendered ConfigMap), the Secret's keys as files — and returns each bridged declaration's process:
 * `chaos-core bridge` on its port with its token file, the command after `--`, in its own folder.
 */
async function prepareUpstreams(o) {
  const u = upstreamsDirs(o.dir);
  await mkdir(u.config, { recursive: true });
  await writeFile(join(u.config, "upstreams.json"), localUpstreamsJson(o));
  await writeFile(join(u.config, "upstreams.lock"), o.upstreams.lock);
  await mkdir(u.secrets, { recursive: true, mode: 0o700 });
  for (const [key, value] of Object.entries(o.upstreams.secrets ?? {})) await writeFile(join(u.secrets, key), value, { mode: 0o600 });
  const bridges = [];
  for (const { decl, port } of bridgedPorts(o)) {
    if (!decl.bridge) continue;
    const cwd = join(u.bridges, decl.name);
    await mkdir(cwd, { recursive: true });
    const env = { ...baseEnv(), HOME: cwd };
    for (const [k, v] of Object.entries(decl.env ?? {})) env[k] = typeof v === "string" ? v : readFileSync(join(u.secrets, v.file), "utf8").replace(/\r?\n$/, "");
    bridges.push({
      name: decl.name,
      cwd,
      env,
      args: ["bridge", "--host", "127.0.0.1", "--port", String(port), "--token-file", join(u.secrets, decl.bridge.tokenKey), "--", decl.command, ...(decl.args ?? [])],
    });
  }
  return bridges;
}

/** Starts one bridge; resolves when it logs its address. */
function startBridge(b, onLine) {
  return new Promise((resolveStart, reject) => {
    const proc = spawn(process.execPath, [join(ROOT, "services/standalone/bin/chaos-core.js"), ...b.args], { cwd: b.cwd, env: b.env, stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    let started = false;
    createInterface({ input: proc.stderr }).on("line", (line) => {
      log += `${line}\n`;
      onLine?.(`upstream-${b.name}`, line);
      if (!started && /bridging the stdio MCP server/.test(line)) {
        started = true;
        resolveStart(proc);
      }
    });
    proc.once("exit", (code) => {
      if (!started) reject(new Error(`the bridge of upstream ${b.name} exited with ${code} before it listened:\n${log}`));
    });
  });
}
