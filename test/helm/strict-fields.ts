/**
 * A strict unknown-field check for rendered Kubernetes objects. kubernetes-models' validators
 * (compiled from the OpenAPI schemas, which leave `additionalProperties` open) accept any extra
 * field, so a misspelt `imagePullPolicyy` would pass them and be dropped, or refused, only by a
 * live API server. Its TypeScript types list every field, though, and TypeScript refuses an object
 * literal with a property its type does not declare: each object is written out as a typed literal
 * and compiled, and every excess-property error is reported with where it is.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import ts from "typescript";

const ROOT = resolve(import.meta.dirname, "../..");

/** The kubernetes-models module and interface of each kind the chart renders. */
const TYPES: Record<string, [module: string, type: string]> = {
  "apps/v1/Deployment": ["kubernetes-models/apps/v1", "IDeployment"],
  "v1/Service": ["kubernetes-models/v1", "IService"],
  // NOTES.txt's toolbox pod, as kubectl run makes it.
  "v1/Pod": ["kubernetes-models/v1", "IPod"],
  "v1/ServiceAccount": ["kubernetes-models/v1", "IServiceAccount"],
  "v1/ConfigMap": ["kubernetes-models/v1", "IConfigMap"],
  "batch/v1/Job": ["kubernetes-models/batch/v1", "IJob"],
  "batch/v1/CronJob": ["kubernetes-models/batch/v1", "ICronJob"],
  "autoscaling/v2/HorizontalPodAutoscaler": ["kubernetes-models/autoscaling/v2", "IHorizontalPodAutoscaler"],
  "policy/v1/PodDisruptionBudget": ["kubernetes-models/policy/v1", "IPodDisruptionBudget"],
  "networking.k8s.io/v1/NetworkPolicy": ["kubernetes-models/networking.k8s.io/v1", "INetworkPolicy"],
  "networking.k8s.io/v1/Ingress": ["kubernetes-models/networking.k8s.io/v1", "IIngress"],
  "monitoring.coreos.com/v1/ServiceMonitor": ["", ""],
};

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
}

/**
 * Every field of `objects` that its kind does not declare (and any other type error), as
 * "Deployment rel-chaos-core-policy: Object literal may only specify known properties, and
 * 'imagePullPolicyy' does not exist in type 'IIoK8sApiCoreV1Container'". Kinds without
 * kubernetes-models types (a CRD such as ServiceMonitor) are skipped.
 */
export function unknownFields(objects: readonly Obj[], label: string): string[] {
  const dir = join(ROOT, ".cache/helm/strict");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${label.replace(/[^a-z0-9-]/gi, "_")}.ts`);
  const imports = new Map<string, Set<string>>();
  const lines: string[] = [];
  const names: string[] = [];
  objects.forEach((o, i) => {
    const t = TYPES[`${o.apiVersion}/${o.kind}`];
    if (!t) throw new Error(`no type for ${o.apiVersion} ${o.kind}: add it to TYPES in strict-fields.ts`);
    if (!t[0]) return;
    const [mod, type] = t;
    if (!imports.has(mod)) imports.set(mod, new Set());
    imports.get(mod)!.add(type);
    names[i] = `${o.kind} ${o.metadata.name}`;
    lines.push(`// object ${i}\nexport const o${i}: ${type} = ${JSON.stringify(o, null, 1)};`);
  });
  const head = [...imports].map(([mod, types]) => `import type { ${[...types].join(", ")} } from "${mod}";`);
  const text = [...head, ...lines].join("\n");
  writeFileSync(file, text);
  try {
    const program = ts.createProgram([file], {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: [],
    });
    const source = program.getSourceFile(file)!;
    const objectAt = (pos: number): string => {
      const before = text.slice(0, pos);
      const m = [...before.matchAll(/\/\/ object (\d+)\n/g)].pop();
      return m ? names[Number(m[1])]! : "(imports)";
    };
    return [...program.getSemanticDiagnostics(source), ...program.getSyntacticDiagnostics(source)].map((d) => {
      const where = d.start !== undefined ? objectAt(d.start) : "?";
      return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`;
    });
  } finally {
    rmSync(file, { force: true });
  }
}
