// Starts the chart's topology on this machine (deploy/local/topology.mjs) and keeps it running
// until Ctrl-C or SIGTERM, which stops every process (callers first). Settings, from the
// environment of this script only (the services get exactly the chart's environment):
//   DATABASE_URL         required: the Postgres the services share (migrated once first)
//   REDIS_URL            optional: Redis for the edge, cognition, policy and the ledger
//   PORT_OFFSET          added to every chart port (edge 3000, policy 50051, … council 50055, policy's
//                        admin API 50056), default 0; e.g. 100 runs a second topology beside the first
//   LOCAL_DIR            where the secret files live, default ./data/local-<offset> (kept between runs)
//   OTEL_EXPORTER_OTLP_ENDPOINT, LOG_LEVEL   passed on as the chart's telemetry and logLevel values
//   GRPC_TLS_DIR         a folder with tls.crt, tls.key, ca.crt: the chart's grpcTls.enabled
//   GRPC_TLS_MUTUAL, GRPC_TLS_SERVER_NAME    grpcTls.mutual ("true") and grpcTls.serverName
//   LEDGER_POLICY_FILE   the chart's config.ledger.policy file
//   METRICS_PROMETHEUS_PORT   the chart's metrics.prometheus.enabled with this metrics.prometheus.port
//                        (e.g. 9464): each process serves /metrics on 127.0.0.1 at that port + its
//                        index in edge, cognition, policy, ledger, memory, council + PORT_OFFSET
//   TERMINATION_GRACE_PERIOD_SECONDS, PRESTOP_SECONDS   the chart's lifecycle values (30, 5):
//                        CHAOS_CORE_SHUTDOWN_GRACE_SECONDS = their difference - 5, as in the chart
import { resolve } from "node:path";
import { CHART_ADMIN_PORT, startTopology } from "./topology.mjs";

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) {
  process.stderr.write("deploy/local: set DATABASE_URL to a Postgres database (postgres://postgres@127.0.0.1:5432/chaoscore)\n");
  process.exit(2);
}
const portOffset = Number(process.env.PORT_OFFSET ?? 0);
// (With GRPC_TLS_DIR the health ports, 10 000 higher, bound it lower: startTopology refuses those, naming the port.)
if (!Number.isInteger(portOffset) || portOffset < 0 || portOffset + CHART_ADMIN_PORT > 65535) {
  process.stderr.write(`deploy/local: PORT_OFFSET=${process.env.PORT_OFFSET} must be a whole number from 0 to ${65535 - CHART_ADMIN_PORT}\n`);
  process.exit(2);
}
/** A whole-number setting of this script, or undefined when unset. */
function wholeNumber(name, min, max) {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    process.stderr.write(`deploy/local: ${name}=${raw} must be a whole number from ${min} to ${max}\n`);
    process.exit(2);
  }
  return n;
}
const metricsPort = wholeNumber("METRICS_PROMETHEUS_PORT", 1, 65535 - 5 - portOffset);
const lifecycle = { terminationGracePeriodSeconds: wholeNumber("TERMINATION_GRACE_PERIOD_SECONDS", 0, 86400), preStopSeconds: wholeNumber("PRESTOP_SECONDS", 0, 86400) };
const dir = resolve(process.env.LOCAL_DIR ?? `data/local-${portOffset}`);
const topology = await startTopology({
  dir,
  databaseUrl,
  redisUrl: process.env.REDIS_URL || undefined,
  portOffset,
  otlpEndpoint: process.env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined,
  logLevel: process.env.LOG_LEVEL || undefined,
  grpcTls: process.env.GRPC_TLS_DIR
    ? { dir: resolve(process.env.GRPC_TLS_DIR), mutual: process.env.GRPC_TLS_MUTUAL === "true", serverName: process.env.GRPC_TLS_SERVER_NAME || undefined }
    : undefined,
  ledgerPolicyFile: process.env.LEDGER_POLICY_FILE ? resolve(process.env.LEDGER_POLICY_FILE) : undefined,
  metrics: metricsPort === undefined ? undefined : { port: metricsPort },
  lifecycle,
  // The edge's OAuth settings, as the chart's config.edge.oauth.* gives them (docs/auth.md).
  oauth: process.env.CHAOS_CORE_OAUTH_ISSUER
    ? {
        issuer: process.env.CHAOS_CORE_OAUTH_ISSUER,
        resource: process.env.CHAOS_CORE_OAUTH_RESOURCE ?? "",
        jwksUrl: process.env.CHAOS_CORE_OAUTH_JWKS_URL || undefined,
        algorithms: process.env.CHAOS_CORE_OAUTH_ALGORITHMS ? process.env.CHAOS_CORE_OAUTH_ALGORITHMS.split(",") : undefined,
        tenantClaim: process.env.CHAOS_CORE_OAUTH_TENANT_CLAIM || undefined,
        introspection: process.env.CHAOS_CORE_OAUTH_INTROSPECTION_URL
          ? {
              url: process.env.CHAOS_CORE_OAUTH_INTROSPECTION_URL,
              clientId: process.env.CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID ?? "",
              clientSecretFile: resolve(process.env.CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE ?? ""),
            }
          : undefined,
      }
    : undefined,
  onLine: (c, line) => process.stderr.write(`${c.padEnd(9)} ${line}\n`),
}).catch((err) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
process.stdout.write(`edge: ${topology.edgeUrl} (Authorization: Bearer <the key in ${dir}/secrets/api-key>)\n`);
let stopping = false;
const stop = async (code) => {
  if (stopping) return;
  stopping = true;
  await topology.close();
  process.exit(code);
};
process.on("SIGINT", () => void stop(0));
process.on("SIGTERM", () => void stop(0));
for (const [c, proc] of topology.processes) {
  proc.once("exit", (code) => {
    if (stopping) return;
    process.stderr.write(`deploy/local: ${c} exited with ${code}; stopping the others\n`);
    void stop(1);
  });
}
