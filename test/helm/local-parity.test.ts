/**
 * deploy/local runs the chart's topology on one machine: each component gets exactly the
 * environment the chart renders for its pod. This compares the two — every variable name per
 * component, and every value that is not an address, a bind, a secret or a file's directory —
 * for the chart's defaults and with tracing on.
 */
import { spawnSync } from "node:child_process";
import { join, basename, resolve } from "node:path";
import { parseAllDocuments } from "yaml";
import { describe, expect, it } from "vitest";
import { CHART_PORTS, localEnvironments, type Component } from "../../deploy/local/topology.mjs";

const ROOT = resolve(import.meta.dirname, "../..");
const HELM = join(ROOT, ".cache/helm/helm");
const home = join(ROOT, ".cache/helm/home");

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: unknown;
}

function chartEnvs(scenario: string): Record<Component, EnvVar[]> {
  const r = spawnSync(HELM, ["template", "rel", join(ROOT, "helm/chaos-core"), "-n", "chaos", "-f", join(ROOT, `helm/chaos-core/ci/${scenario}-values.yaml`)], {
    encoding: "utf8",
    env: { ...process.env, HELM_CACHE_HOME: home, HELM_CONFIG_HOME: home, HELM_DATA_HOME: home },
  });
  if (r.status !== 0) throw new Error(`helm template failed (run 'bash scripts/ci/helm.sh --prepare' if helm is missing):\n${r.stderr}`);
  const out: Partial<Record<Component, EnvVar[]>> = {};
  for (const doc of parseAllDocuments(r.stdout)) {
    const o = doc.toJS() as { kind?: string; metadata?: { labels?: Record<string, string> }; spec?: { template: { spec: { containers: { env: EnvVar[] }[] } } } } | null;
    if (o?.kind !== "Deployment") continue;
    out[o.metadata!.labels!["app.kubernetes.io/component"] as Component] = o.spec!.template.spec.containers[0]!.env;
  }
  return out as Record<Component, EnvVar[]>;
}

/** Values that differ by design: where things are (binds, addresses, file directories) and what the Secrets hold. */
const LOCAL_BY_DESIGN = /^(HOST|.*_ADDR|CHAOS_CORE_CONTEXT_KEY|DATABASE_URL|REDIS_URL|OTEL_RESOURCE_ATTRIBUTES|CHAOS_CORE_GRPC_HEALTH_PORT)$/;

/** The grpc-tls scenario's values, as deploy/local takes them (its lifecycle values differ: compared by name only). */
const GRPC_TLS = { grpcTls: { dir: "/tmp/tls", mutual: true, serverName: "chaos-core.internal" }, ledgerPolicyFile: "/tmp/ledger-policy.json" };

describe.each([
  ["defaults", {}],
  ["tracing", { otlpEndpoint: "http://otel-collector.observability.svc.cluster.local:4318" }],
  ["grpc-tls", GRPC_TLS],
])("deploy/local against the chart's %s render", (scenario, extra) => {
  const chart = chartEnvs(scenario);
  const local = localEnvironments({ dir: "/tmp/unused", databaseUrl: "postgres://postgres@127.0.0.1:5432/x", redisUrl: "redis://127.0.0.1:6379", contextKey: "k".repeat(64), ...extra });

  it("sets exactly the chart's variable names for every component", () => {
    expect(Object.keys(chart).sort()).toEqual(Object.keys(CHART_PORTS).sort());
    for (const c of Object.keys(chart) as Component[]) {
      expect(Object.keys(local[c]).sort(), c).toEqual(chart[c].map((e) => e.name).sort());
    }
  });

  it("gives them the chart's values, the chart's ports, and the same secret file names", () => {
    for (const c of Object.keys(chart) as Component[]) {
      for (const e of chart[c]) {
        if (LOCAL_BY_DESIGN.test(e.name) || (scenario === "grpc-tls" && e.name === "CHAOS_CORE_SHUTDOWN_GRACE_SECONDS")) continue;
        const mine = local[c][e.name]!;
        if (e.name.endsWith("_FILE")) expect(basename(mine), `${c} ${e.name}`).toBe(basename(e.value!));
        else expect(mine, `${c} ${e.name}`).toBe(e.value);
      }
      expect(Number(local[c].PORT)).toBe(CHART_PORTS[c]);
    }
    // Ports move together for a second topology.
    const shifted = localEnvironments({ dir: "/tmp/unused", databaseUrl: "postgres://x@h/db", portOffset: 100, contextKey: "k".repeat(64) });
    expect(shifted.edge.PORT).toBe("3100");
    expect(shifted.edge.POLICY_ADDR).toBe("127.0.0.1:50151");
    expect(shifted.ledger.POLICY_ADDR).toBe("127.0.0.1:50151");
  });
});
