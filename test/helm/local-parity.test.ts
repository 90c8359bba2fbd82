/**
 * deploy/local runs the chart's topology on one machine: each component gets exactly the
 * environment the chart renders for its pod. This compares the two — every variable name per
 * component, and every value that is not an address, a bind, a secret or a file's directory —
 * for the chart's defaults, with tracing on, with gRPC TLS and its lifecycle values, and for the
 * production scenario's telemetry: Prometheus metrics (one port per process here) and tracing.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, basename, resolve } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { CHART_ADMIN_PORT, CHART_BRIDGE_PORT, CHART_EDGE_READINESS, CHART_PORTS, localUpstreamsJson, type LocalUpstreams, COMPONENT_ORDER, localEnvironments, shutdownGraceSeconds, type Component } from "../../deploy/local/topology.mjs";

const ROOT = resolve(import.meta.dirname, "../..");
const HELM = join(ROOT, ".cache/helm/helm");
const home = join(ROOT, ".cache/helm/home");

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: unknown;
}

interface Rendered {
  kind?: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: { template: { spec: { containers: Array<{ env: EnvVar[]; readinessProbe?: unknown }> } } };
  data?: Record<string, string>;
}

/** The chart rendered for a scenario of ci/, with more `helm template` arguments. */
function helmTemplate(scenario: string, extra: readonly string[] = []): Rendered[] {
  const r = spawnSync(HELM, ["template", "rel", join(ROOT, "helm/chaos-core"), "-n", "chaos", "-f", join(ROOT, `helm/chaos-core/ci/${scenario}-values.yaml`), ...extra], {
    encoding: "utf8",
    env: { ...process.env, HELM_CACHE_HOME: home, HELM_CONFIG_HOME: home, HELM_DATA_HOME: home },
  });
  if (r.status !== 0) throw new Error(`helm template failed (run 'bash scripts/ci/helm.sh --prepare' if helm is missing):\n${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as Rendered | null)
    .filter((o): o is Rendered => o !== null);
}

/** Each component's environment as the chart renders it (the bridged upstreams' Deployments are not components). */
function chartEnvs(scenario: string, extra: readonly string[] = []): Record<Component, EnvVar[]> {
  const out: Partial<Record<Component, EnvVar[]>> = {};
  for (const o of helmTemplate(scenario, extra)) {
    const component = o.metadata.labels?.["app.kubernetes.io/component"];
    if (o.kind !== "Deployment" || !(component! in CHART_PORTS)) continue;
    out[component as Component] = o.spec!.template.spec.containers[0]!.env;
  }
  return out as Record<Component, EnvVar[]>;
}

/** Values that differ by design: where things are (binds, addresses, file directories) and what the Secrets hold. */
const LOCAL_BY_DESIGN = /^(HOST|.*_ADDR|.*_DIR|CHAOS_CORE_CONTEXT_KEY|DATABASE_URL|REDIS_URL|OTEL_RESOURCE_ATTRIBUTES|CHAOS_CORE_GRPC_HEALTH_PORT|CHAOS_CORE_METRICS_PROMETHEUS_(PORT|HOST))$/;

/** The grpc-tls scenario's values, as deploy/local takes them. */
const GRPC_TLS = {
  grpcTls: { dir: "/tmp/tls", mutual: true, serverName: "chaos-core.internal" },
  ledgerPolicyFile: "/tmp/ledger-policy.json",
  lifecycle: { terminationGracePeriodSeconds: 60, preStopSeconds: 10 },
};
const BASE = { dir: "/tmp/unused", databaseUrl: "postgres://postgres@127.0.0.1:5432/x", redisUrl: "redis://127.0.0.1:6379", contextKey: "k".repeat(64) };

/** The ports one topology's processes listen on (service, policy's admin API, plaintext health, metrics): six processes, no two alike. */
function listenPorts(env: Record<string, string>): number[] {
  return ["PORT", "CHAOS_CORE_ADMIN_PORT", "CHAOS_CORE_GRPC_HEALTH_PORT", "CHAOS_CORE_METRICS_PROMETHEUS_PORT"].filter((k) => env[k] !== undefined).map((k) => Number(env[k]));
}

describe.each([
  ["defaults", {}, []],
  ["tracing", { otlpEndpoint: "http://otel-collector.observability.svc.cluster.local:4318" }, []],
  ["grpc-tls", GRPC_TLS, []],
  // No Redis (one edge, one cognition): no process gets REDIS_URL, policy included.
  ["defaults", { redisUrl: undefined }, ["--set", "secrets.redis.existingSecret=", "--set", "components.cognition.hpa.enabled=false", "--set", "components.cognition.replicas=1"]],
  // Metrics without tracing: the service names still come, for the scrape's target_info.
  ["defaults", { metrics: {} }, ["--set", "metrics.prometheus.enabled=true"]],
  // config.edge.oauth with introspection: the edge's OAuth variables and the secret file's name.
  [
    "defaults",
    {
      oauth: {
        issuer: "https://auth.example.com",
        resource: "https://chaos.example.com/mcp",
        algorithms: ["ES256"],
        introspection: { url: "https://auth.example.com/introspect", clientId: "chaos-core", clientSecretFile: "/tmp/unused/secrets/client-secret" },
      },
    },
    [
      "--set", "config.edge.oauth.issuer=https://auth.example.com",
      "--set", "config.edge.oauth.resource=https://chaos.example.com/mcp",
      "--set", "config.edge.oauth.algorithms={ES256}",
      "--set", "config.edge.oauth.introspection.url=https://auth.example.com/introspect",
      "--set", "config.edge.oauth.introspection.clientId=chaos-core",
      "--set", "secrets.oauthIntrospection.existingSecret=cc-oauth",
    ],
  ],
] as const)("deploy/local against the chart's %s render %j %j", (scenario, extra, args) => {
  const chart = chartEnvs(scenario, args);
  const local = localEnvironments({ ...BASE, ...extra });

  it("sets exactly the chart's variable names for every component", () => {
    expect(Object.keys(chart).sort()).toEqual(Object.keys(CHART_PORTS).sort());
    for (const c of Object.keys(chart) as Component[]) {
      expect(Object.keys(local[c]).sort(), c).toEqual(chart[c].map((e) => e.name).sort());
    }
  });

  it("gives them the chart's values, the chart's ports, and the same secret file names", () => {
    for (const c of Object.keys(chart) as Component[]) {
      for (const e of chart[c]) {
        if (LOCAL_BY_DESIGN.test(e.name)) continue;
        const mine = local[c][e.name]!;
        if (e.name.endsWith("_FILE") || e.name.endsWith("_LOCK")) expect(basename(mine), `${c} ${e.name}`).toBe(basename(e.value!));
        else expect(mine, `${c} ${e.name}`).toBe(e.value);
      }
      expect(Number(local[c].PORT)).toBe(CHART_PORTS[c]);
    }
    // Policy's tenant admin API at the chart's admin.port (its value compared above).
    expect(local.policy.CHAOS_CORE_ADMIN_PORT).toBe(String(CHART_ADMIN_PORT));
    // Ports move together for a second topology.
    const shifted = localEnvironments({ dir: "/tmp/unused", databaseUrl: "postgres://x@h/db", portOffset: 100, contextKey: "k".repeat(64) });
    expect(shifted.edge.PORT).toBe("3100");
    expect(shifted.edge.POLICY_ADDR).toBe("127.0.0.1:50151");
    expect(shifted.ledger.POLICY_ADDR).toBe("127.0.0.1:50151");
    expect(shifted.policy.CHAOS_CORE_ADMIN_PORT).toBe("50156");
  });
});

describe("deploy/local against the chart's production render: telemetry", () => {
  const chart = chartEnvs("production");
  // production-values.yaml: telemetry.otlpEndpoint and metrics.prometheus.enabled (port 9464), default lifecycle.
  const local = localEnvironments({ ...BASE, otlpEndpoint: "http://otel-collector.observability.svc.cluster.local:4318", metrics: { port: 9464 } });
  const TELEMETRY = /^(OTEL_.*|CHAOS_CORE_METRICS_.*|CHAOS_CORE_SHUTDOWN_GRACE_SECONDS)$/;

  it("sets the chart's tracing, metrics and lifecycle variables with the chart's values, each process its own service name", () => {
    for (const c of COMPONENT_ORDER) {
      const mine = Object.keys(local[c]).filter((k) => TELEMETRY.test(k)).sort();
      expect(mine, c).toEqual(chart[c].map((e) => e.name).filter((k) => TELEMETRY.test(k)).sort());
      expect(mine, c).toEqual(expect.arrayContaining(["OTEL_SERVICE_NAME", "CHAOS_CORE_METRICS_PROMETHEUS_PORT"]));
      for (const e of chart[c].filter((x) => TELEMETRY.test(x.name) && !LOCAL_BY_DESIGN.test(x.name))) expect(local[c][e.name], `${c} ${e.name}`).toBe(e.value);
      expect(local[c].OTEL_SERVICE_NAME).toBe(`chaos-core-${c}`);
      // The chart binds the pod's address for the ServiceMonitor; here loopback, and the chart's port + the component's index.
      expect(chart[c].find((e) => e.name === "CHAOS_CORE_METRICS_PROMETHEUS_PORT")?.value).toBe("9464");
      expect(local[c].CHAOS_CORE_METRICS_PROMETHEUS_HOST).toBe("127.0.0.1");
      expect(local[c].CHAOS_CORE_METRICS_PROMETHEUS_PORT).toBe(String(9464 + COMPONENT_ORDER.indexOf(c)));
    }
    expect(new Set(COMPONENT_ORDER.map((c) => local[c].OTEL_SERVICE_NAME)).size).toBe(6);
  });

  it("gives no two processes the same port, with metrics and gRPC TLS on, and none shared with a second topology at offset 100", () => {
    const first = localEnvironments({ ...BASE, ...GRPC_TLS, metrics: {} });
    const second = localEnvironments({ ...BASE, ...GRPC_TLS, metrics: {}, portOffset: 100 });
    const ports = [first, second].flatMap((t) => COMPONENT_ORDER.flatMap((c) => listenPorts(t[c])));
    // 6 service ports, policy's admin port, 5 health ports (the edge has no gRPC server), 6 metrics ports, twice.
    expect(ports).toHaveLength(36);
    expect(new Set(ports).size).toBe(ports.length);
    expect(first.council.CHAOS_CORE_METRICS_PROMETHEUS_PORT).toBe("9469");
    expect(second.edge.CHAOS_CORE_METRICS_PROMETHEUS_PORT).toBe("9564");
  });

  it("refuses a port offset that puts a port above 65535, naming it: the admin port is the chart's highest, the health ports are 10 000 higher", () => {
    expect(localEnvironments({ ...BASE, portOffset: 65535 - CHART_ADMIN_PORT }).policy.CHAOS_CORE_ADMIN_PORT).toBe("65535");
    expect(() => localEnvironments({ ...BASE, portOffset: 65536 - CHART_ADMIN_PORT })).toThrow("deploy/local: portOffset 15480 puts policy's CHAOS_CORE_ADMIN_PORT at 65536, above 65535");
    // With gRPC TLS the plaintext health ports (service port + 10 000) bound it: council's is the highest.
    expect(localEnvironments({ ...BASE, ...GRPC_TLS, portOffset: 5480 }).council.CHAOS_CORE_GRPC_HEALTH_PORT).toBe("65535");
    expect(() => localEnvironments({ ...BASE, ...GRPC_TLS, portOffset: 5481 })).toThrow("deploy/local: portOffset 5481 puts council's CHAOS_CORE_GRPC_HEALTH_PORT at 65536, above 65535");
  });

  it("derives CHAOS_CORE_SHUTDOWN_GRACE_SECONDS from the lifecycle values as the chart does, and refuses what the chart refuses", () => {
    expect(shutdownGraceSeconds()).toBe(20);
    expect(shutdownGraceSeconds({ terminationGracePeriodSeconds: 60, preStopSeconds: 10 })).toBe(45);
    expect(shutdownGraceSeconds({ terminationGracePeriodSeconds: 30, preStopSeconds: 0 })).toBe(25);
    expect(() => localEnvironments({ ...BASE, lifecycle: { terminationGracePeriodSeconds: 10, preStopSeconds: 5 } })).toThrow(
      "deploy/local: lifecycle.preStopSeconds (5) leaves no time to drain within lifecycle.terminationGracePeriodSeconds (10): the drain gets terminationGracePeriodSeconds - preStopSeconds - 5 s, at least 1",
    );
    expect(() => shutdownGraceSeconds({ preStopSeconds: -1 })).toThrow("deploy/local: lifecycle.preStopSeconds (-1) must be a whole number of seconds, 0 or more");
  });
});

describe("the edge's readiness probe", () => {
  it("is the one deploy/local's outage test probes at (CHART_EDGE_READINESS)", () => {
    const edge = helmTemplate("defaults").find((o) => o.kind === "Deployment" && o.metadata.labels?.["app.kubernetes.io/component"] === "edge");
    expect(edge?.spec?.template.spec.containers[0]?.readinessProbe).toEqual({ httpGet: { path: "/readyz", port: "http" }, ...CHART_EDGE_READINESS });
  });
});

describe("deploy/local against the chart's federation render: the operator's upstreams in values", () => {
  const values = parseYaml(readFileSync(join(ROOT, "helm/chaos-core/ci/federation-values.yaml"), "utf8")) as { upstreams: LocalUpstreams };
  const upstreams = { ...values.upstreams, secrets: { "files-bridge-token": "t".repeat(32), "github-token": "g" } };
  const local = localEnvironments({ ...BASE, upstreams });

  it("gives cognition the chart's upstreams variables, and renders upstreams.json as the chart does (the bridges' addresses aside)", () => {
    const chart = chartEnvs("federation");
    expect(Object.keys(local.cognition).sort()).toEqual(chart.cognition.map((e) => e.name).sort());
    for (const name of ["CHAOS_CORE_UPSTREAMS_FILE", "CHAOS_CORE_UPSTREAMS_LOCK"]) {
      expect(basename(local.cognition[name]!)).toBe(basename(chart.cognition.find((e) => e.name === name)!.value!));
    }
    const rendered = helmTemplate("federation").find((o) => o.kind === "ConfigMap" && o.metadata.name === "rel-chaos-core-upstreams")!.data!["upstreams.json"]!;
    const address = /http:\/\/[^/]+\/mcp/g;
    expect(JSON.parse(localUpstreamsJson({ upstreams }).replace(address, "BRIDGE"))).toEqual(JSON.parse(rendered.replace(address, "BRIDGE")));
    expect(localUpstreamsJson({ upstreams, portOffset: 100 })).toContain(`http://127.0.0.1:${CHART_BRIDGE_PORT + 100}/mcp`);
  });
});
