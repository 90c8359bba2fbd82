/**
 * The operator's upstreams declared in the chart's values (docs/federation-platform.md §1, §2),
 * scenario ci/federation-values.yaml: the rendered upstreams.json and upstreams.lock are what
 * kit's and contracts' own parsers accept; a stdio upstream with `bridge` runs as its own
 * Deployment and Service behind `chaos-core bridge`, which cognition reaches as an HTTP upstream
 * with the bridge's token; the NetworkPolicies admit exactly the declared upstreams — cognition
 * reaches each HTTP upstream through its own rule and each bridge on its port, the bridge admits
 * cognition alone and reaches DNS alone. (The scenario's golden file, lint, Kubernetes schemas,
 * strict fields and hardening are chart.test.ts's, as for every scenario.)
 */
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseUpstreamsLock } from "@chaos-core/contracts";
import { loadCognitionConfig } from "@chaos-core/cognition";
import { parseUpstreamsFile } from "@chaos-core/kit";

const ROOT = resolve(import.meta.dirname, "../..");
const CHART = join(ROOT, "helm/chaos-core");
const HELM = join(ROOT, ".cache/helm/helm");
const HOME = join(ROOT, ".cache/helm/home");
const SCENARIO = join(CHART, "ci/federation-values.yaml");
const FULL = "rel-chaos-core";

interface K8s {
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  data?: Record<string, string>;
}

function helm(extra: string[]): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(HELM, ["template", "rel", CHART, "-n", "chaos", "-f", SCENARIO, ...extra], {
    encoding: "utf8",
    env: { ...process.env, HELM_CACHE_HOME: HOME, HELM_CONFIG_HOME: HOME, HELM_DATA_HOME: HOME },
  });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

function render(extra: string[] = []): K8s[] {
  const r = helm(extra);
  if (r.status !== 0) throw new Error(`helm template failed (run 'bash scripts/ci/helm.sh --prepare' if helm is missing):\n${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as K8s | null)
    .filter((o): o is K8s => o !== null);
}

function refused(extra: string[]): string {
  const r = helm(extra);
  expect(r.status, "helm template should have refused these values").not.toBe(0);
  return r.stderr;
}

const named = (all: K8s[], kind: string, name: string) => {
  const o = all.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind} ${name}`);
  return o;
};
/** A container's environment, what a Secret holds stood in for (as the kubelet would give it). */
const SECRETS: Record<string, string> = { CHAOS_CORE_CONTEXT_KEY: "a".repeat(64), DATABASE_URL: "postgres://chaos@postgres.db:5432/chaoscore", REDIS_URL: "redis://redis.cache:6379" };
const envOf = (d: K8s) =>
  Object.fromEntries((d.spec!.template.spec.containers[0].env as Array<{ name: string; value?: string }>).map((e) => [e.name, e.value ?? SECRETS[e.name] ?? ""]));
const component = (peer: { podSelector?: { matchLabels?: Record<string, string> } }) => peer.podSelector?.matchLabels?.["app.kubernetes.io/component"];

describe("the operator's upstreams declared in values (ci/federation-values.yaml)", () => {
  const all = render();
  const configMap = named(all, "ConfigMap", `${FULL}-upstreams`);

  it("renders upstreams.json and the lock as kit's and contracts' own parsers read them; cognition mounts and reads them", () => {
    const declared = parseUpstreamsFile(configMap.data!["upstreams.json"]!, "upstreams.json");
    expect(declared.map((d) => [d.name, d.transport])).toEqual([
      ["files", "http"],
      ["github", "http"],
    ]);
    // The bridged stdio upstream is reached at its Service, with the bridge's token from the upstreams' Secret.
    expect(declared[0]).toMatchObject({ url: `http://${FULL}-up-files:8080/mcp`, headers: { Authorization: { file: "files-bridge-token", prefix: "Bearer " } }, exposure: [{ tenants: ["*"], roles: ["support"] }] });
    expect(declared[1]).toMatchObject({ url: "https://mcp.example.com/mcp", timeoutMs: 20000 });
    // The chart's own keys stay in the chart.
    expect(configMap.data!["upstreams.json"]).not.toMatch(/"(egress|bridge)"/);
    expect([...parseUpstreamsLock(configMap.data!["upstreams.lock"]!).keys()]).toEqual(["files"]);

    const cognition = named(all, "Deployment", `${FULL}-cognition`);
    expect(cognition.spec!.template.spec.volumes).toContainEqual(expect.objectContaining({ name: "upstreams", configMap: expect.objectContaining({ name: `${FULL}-upstreams` }) }));
    expect(loadCognitionConfig(envOf(cognition)).upstreams).toMatchObject({ file: "/etc/chaos-core/upstreams/upstreams.json", lock: "/etc/chaos-core/upstreams/upstreams.lock" });
  });

  it("runs the bridged upstream as its own Deployment: chaos-core bridge with its token file, the command after --, only its token key mounted", () => {
    const bridge = named(all, "Deployment", `${FULL}-up-files`);
    const c = bridge.spec!.template.spec.containers[0];
    expect(c.image).toBe("registry.example.com/chaos-core-with-mcp:0.1.0");
    expect(c.args).toEqual([
      "bridge", "--host", "0.0.0.0", "--port", "8080", "--token-file", "/etc/chaos-core/bridge/files-bridge-token",
      "--", "node", "/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/var/lib/chaos-core/upstream",
    ]);
    expect(bridge.spec!.template.spec.volumes).toContainEqual({ name: "token", secret: { secretName: "chaos-core-upstream-secrets", defaultMode: 0o440, items: [{ key: "files-bridge-token", path: "files-bridge-token" }] } });
    const service = named(all, "Service", `${FULL}-up-files`);
    expect(service.spec!.selector).toEqual(bridge.spec!.selector.matchLabels);
    expect(service.spec!.ports).toEqual([{ name: "mcp", port: 8080, targetPort: "mcp", protocol: "TCP" }]);
  });

  it("admits exactly the declared upstreams: cognition reaches each HTTP one by its rule and the bridge on its port; the bridge admits cognition alone and reaches DNS alone", () => {
    const cognition = named(all, "NetworkPolicy", `${FULL}-cognition`).spec!;
    const upstreamRules = (cognition.egress as Array<{ to?: Array<Record<string, any>>; ports: Array<{ port: number }> }>).filter( // eslint-disable-line @typescript-eslint/no-explicit-any
      (rule) => rule.to?.some((peer) => peer.ipBlock || String(component(peer) ?? "").startsWith("upstream-")) ?? false,
    );
    expect(upstreamRules).toEqual([
      { to: [{ podSelector: { matchLabels: { "app.kubernetes.io/name": "chaos-core", "app.kubernetes.io/instance": "rel", "app.kubernetes.io/component": "upstream-files" } } }], ports: [{ port: 8080, protocol: "TCP" }] },
      { ports: [{ port: 443, protocol: "TCP" }], to: [{ ipBlock: { cidr: "203.0.113.10/32" } }] },
    ]);
    // Beside them: DNS, the release's own services, and Redis (the store cognition uses) — nothing else.
    const others = (cognition.egress as Array<{ to?: Array<Record<string, any>>; ports: Array<{ port: number }> }>).filter((rule) => !upstreamRules.includes(rule as never)); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(others.map((rule) => (rule.to ? rule.to.map((peer) => component(peer) ?? "dns") : ["any"]).join() + ":" + rule.ports.map((p) => p.port).join())).toEqual([
      "dns:53,53",
      "policy:50051",
      "memory:50052",
      "ledger:50054",
      "any:6379",
    ]);

    const bridge = named(all, "NetworkPolicy", `${FULL}-up-files`).spec!;
    expect(bridge.podSelector.matchLabels["app.kubernetes.io/component"]).toBe("upstream-files");
    expect(bridge.ingress).toEqual([{ ports: [{ port: 8080, protocol: "TCP" }], from: [{ podSelector: { matchLabels: { "app.kubernetes.io/name": "chaos-core", "app.kubernetes.io/instance": "rel", "app.kubernetes.io/component": "cognition" } } }] }]);
    expect(bridge.egress).toHaveLength(1);
    expect(bridge.egress[0].ports).toEqual([{ port: 53, protocol: "UDP" }, { port: 53, protocol: "TCP" }]);
    // What the upstream itself needs, when its declaration says so.
    const opened = render(["--set-json", 'upstreams.declarations[0].bridge.egress=[{"ports":[{"port":443}],"to":[{"ipBlock":{"cidr":"198.51.100.0/24"}}]}]']);
    expect(named(opened, "NetworkPolicy", `${FULL}-up-files`).spec!.egress[1]).toEqual({ ports: [{ port: 443 }], to: [{ ipBlock: { cidr: "198.51.100.0/24" } }] });
  });

  it("rolls cognition when a declaration changes, not when the lock does (cognition re-reads the lock as the mount changes)", () => {
    const checksum = (objs: K8s[]) => named(objs, "Deployment", `${FULL}-cognition`).spec!.template.metadata.annotations?.["checksum/upstreams"];
    const before = checksum(all);
    expect(before).toMatch(/^[0-9a-f]{64}$/);
    expect(checksum(render(["--set", "upstreams.declarations[1].timeoutMs=30000"]))).not.toBe(before);
    expect(checksum(render(["--set-string", "upstreams.lock=a re-pinned lock"]))).toBe(before);
  });

  it("refuses what cannot be served, naming the values", () => {
    expect(refused(["--set", "upstreams.configMap=team-upstreams"])).toMatch(/upstreams\.configMap and upstreams\.declarations: give one/);
    expect(refused(["--set", "upstreams.lock="])).toMatch(/upstreams\.lock is required with upstreams\.declarations/);
    expect(refused(["--set-json", 'upstreams.declarations[1]={"name":"github","url":"https://mcp.example.com/mcp"}'])).toMatch(/upstreams\.declarations\[1\] \(github\): a Streamable HTTP upstream needs egress/);
    expect(refused(["--set", "upstreams.secrets.existingSecret="])).toMatch(/upstreams\.declarations\[0\] \(files\): bridge\.tokenKey is a key of upstreams\.secrets\.existingSecret, which is empty/);
    expect(refused(["--set", "upstreams.declarations[0].isolation=tenant"])).toMatch(/\(files\): isolation tenant needs the process in cognition's pod/);
    expect(refused(["--set", "upstreams.declarations[0].env.TOKEN.env=CHAOS_CORE_UPSTREAM_SECRET_X"])).toMatch(/\(files\)\.env\.TOKEN: a bridged upstream reads secrets as files/);
    // The schema: an unknown key, and both or neither of url and command.
    expect(refused(["--set", "upstreams.declarations[1].timeout=5"])).toMatch(/upstreams\/declarations\/1.*(additional properties|timeout)/is);
    expect(refused(["--set", "upstreams.declarations[1].command=node"])).toMatch(/upstreams\/declarations\/1/);
    expect(refused(["--set", "upstreams.declarations[0].bridge.tokenKey=../etc"])).toMatch(/upstreams\/declarations\/0\/bridge\/tokenKey/);
    // Without NetworkPolicies an HTTP upstream needs no egress rule.
    expect(() => render(["--set-json", 'upstreams.declarations[1]={"name":"github","url":"https://mcp.example.com/mcp"}', "--set", "networkPolicy.enabled=false"])).not.toThrow();
  });
});
