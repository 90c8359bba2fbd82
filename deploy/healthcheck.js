// The container image's HEALTHCHECK (Docker and Podman run it inside the container; Kubernetes
// ignores it and uses the chart's probes). It finds the component running in this container from
// its command line, and asks it the way a probe would: GET /healthz for the edge and standalone,
// the gRPC health service for cognition, policy, memory, ledger and council. Exit 0 healthy, 1 not.
/* global fetch, AbortSignal */
import { readdirSync, readFileSync } from "node:fs";

const DEFAULT_PORTS = { edge: 3000, standalone: 3000, policy: 50051, memory: 50052, cognition: 50053, ledger: 50054, council: 50055 };

/** The component this container runs, with the command line and environment of its process. */
function findComponent() {
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    if (Number(pid) === process.pid) continue;
    let argv;
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    const main = argv.map((a) => /(?:^|\/)services\/(edge|cognition|policy|memory|ledger|council)\/dist\/main\.js$/.exec(a)?.[1]).find(Boolean);
    const cli = argv.findIndex((a) => /(?:^|\/)services\/standalone\/bin\/chaos-core\.js$/.test(a));
    const component = main ?? (cli >= 0 ? (argv[cli + 1] === "serve" ? "standalone" : argv[cli + 1]) : undefined);
    if (!component) continue;
    let env;
    try {
      env = Object.fromEntries(
        readFileSync(`/proc/${pid}/environ`, "utf8")
          .split("\0")
          .filter(Boolean)
          .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
      );
    } catch {
      env = process.env;
    }
    // Flags only on the standalone command line (serve --host H --port P); the services take none.
    return { component, argv: main ? [] : argv.slice(cli + 2), env };
  }
  return undefined;
}

/** `--name value` or `--name=value` from a command line. */
function flag(argv, name) {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === `--${name}`) return argv[i + 1];
    if (argv[i]?.startsWith(`--${name}=`)) return argv[i].slice(name.length + 3);
  }
  return undefined;
}

function fail(message) {
  process.stderr.write(`healthcheck: ${message}\n`);
  process.exit(1);
}

const found = findComponent();
if (!found) fail("no Chaos Core component runs in this container");
const { component, argv, env } = found;
// A one-shot command (migrate, an operator command) is healthy while it runs.
if (!(component in DEFAULT_PORTS)) process.exit(0);

const port = Number(flag(argv, "port") ?? (env.PORT || DEFAULT_PORTS[component]));
if (!Number.isInteger(port) || port <= 0 || port > 65535) fail(`${component}: PORT=${env.PORT} cannot be checked (set a fixed port)`);
const bound = flag(argv, "host") ?? (env.HOST || "127.0.0.1");
// A wildcard bind answers on loopback.
const host = bound === "0.0.0.0" ? "127.0.0.1" : bound === "::" || bound === "[::]" ? "[::1]" : bound.includes(":") && !bound.startsWith("[") ? `[${bound}]` : bound;

if (component === "edge" || component === "standalone") {
  try {
    const res = await fetch(`http://${host}:${port}/healthz`, { signal: AbortSignal.timeout(3_000) });
    if (res.status !== 200) fail(`${component}: GET http://${host}:${port}/healthz answered ${res.status}`);
  } catch (err) {
    fail(`${component}: GET http://${host}:${port}/healthz failed: ${err instanceof Error ? err.message : String(err)}`);
  }
} else {
  const { checkGrpcHealth, createLogger, loadGrpcTransportConfig, openGrpcTls } = await import("@chaos-core/kit");
  // With gRPC TLS on, ask the plaintext health port when there is one, else the main port over TLS
  // (the certificate names the service, not 127.0.0.1, hence the server name).
  let transport;
  try {
    transport = loadGrpcTransportConfig(env);
  } catch (err) {
    fail(`${component}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const healthPort = transport.healthPort;
  const target = `${host}:${healthPort ?? port}`;
  const tls = transport.tls && healthPort === undefined ? openGrpcTls(transport.tls, { logger: createLogger("healthcheck", "silent") }) : undefined;
  const status = await checkGrpcHealth(target, "", 3_000, tls).catch((err) => fail(`${component}: gRPC health at ${target} failed: ${err.message}`));
  tls?.close();
  if (status !== "SERVING") fail(`${component}: gRPC health at ${target} is ${status}`);
}
process.stdout.write(`${component} healthy\n`);
