/**
 * The chart mounts the operator's upstreams ConfigMap into cognition as a whole directory (never
 * subPath) and says an approved lock reaches the pods without a restart (docs/federation.md §9).
 * No cluster runs here, so this builds the directory the way the kubelet's atomic writer lays out
 * and updates a ConfigMap volume — each key a symlink into `..data`, itself a symlink to a
 * timestamped directory, swapped by renaming a new `..data` over it — and serves a real stdio
 * upstream from it with cognition's own `serveUpstreams`, on the variables the chart renders
 * (their mount paths mapped onto this directory). A tool the upstream changed after it was pinned
 * is quarantined; the ConfigMap updated with the re-pinned lock releases it, in the same process.
 * A changed upstreams.json, by contrast, is read at start only: hence NOTES.txt's rollout restart.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { serializeUpstreamsLock, type ContractSet } from "@chaos-core/contracts";
import { readUpstreamContracts, serveUpstreams, type ServedUpstreams } from "@chaos-core/cognition";
import { upstreamsConfigOf } from "@chaos-core/cognition/upstreams-config";
import { createLogger, parseUpstreamsFile } from "@chaos-core/kit";
import { eventually } from "../support/eventually.js";

/** What the process reaches as the kubelet-like swap lands. */
const SOON = { timeoutMs: 15_000, intervalMs: 100 };

const ROOT = resolve(import.meta.dirname, "../..");
const HELM = join(ROOT, ".cache/helm/helm");
const CHANGING = join(ROOT, "test/support/upstreams/changing-server.mjs");

/** The upstreams variables the chart gives cognition in the upstreams scenario. */
function chartUpstreamsEnv(): Record<string, string> {
  const home = join(ROOT, ".cache/helm/home");
  const r = spawnSync(HELM, ["template", "rel", join(ROOT, "helm/chaos-core"), "-n", "chaos", "-f", join(ROOT, "helm/chaos-core/ci/upstreams-values.yaml")], {
    encoding: "utf8",
    env: { ...process.env, HELM_CACHE_HOME: home, HELM_CONFIG_HOME: home, HELM_DATA_HOME: home },
  });
  if (r.status !== 0) throw new Error(`helm template failed (run 'bash scripts/ci/helm.sh --prepare' if helm is missing):\n${r.stderr}`);
  for (const doc of parseAllDocuments(r.stdout)) {
    const o = doc.toJS() as { kind?: string; metadata?: { name: string }; spec?: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } } } | null;
    if (o?.kind !== "Deployment" || o.metadata?.name !== "rel-chaos-core-cognition") continue;
    return Object.fromEntries(o.spec!.template.spec.containers[0]!.env.filter((e) => e.name.includes("UPSTREAM") && e.value !== undefined).map((e) => [e.name, e.value!]));
  }
  throw new Error("no cognition Deployment rendered");
}

/** A ConfigMap volume as the kubelet's atomic writer keeps it: keys → `..data/<key>`, `..data` → the current version. */
class ConfigMapVolume {
  private version = 0;
  private current?: string;
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }
  /** Writes a new version and swaps `..data` to it in one rename, as the kubelet does; then removes the old one. */
  update(data: Record<string, string>): void {
    const name = `..2026_12_07_11_00_0${this.version++}.000000001`;
    mkdirSync(join(this.dir, name));
    for (const [key, text] of Object.entries(data)) writeFileSync(join(this.dir, name, key), text, { mode: 0o440 });
    symlinkSync(name, join(this.dir, "..data_tmp"));
    renameSync(join(this.dir, "..data_tmp"), join(this.dir, "..data"));
    for (const key of Object.keys(data)) {
      try {
        symlinkSync(join("..data", key), join(this.dir, key));
      } catch {
        // The key's symlink is there from an earlier version, and points through ..data.
      }
    }
    if (this.current) rmSync(join(this.dir, this.current), { recursive: true });
    this.current = name;
  }
}

const object = (properties: Record<string, unknown>, required: string[]) => ({ type: "object", properties, required });
const toolsFile = (echoRequired: string[]) =>
  JSON.stringify({
    tools: [
      { name: "echo", description: "Echoes.", inputSchema: object({ message: { type: "string" }, to: { type: "string" } }, echoRequired), annotations: { readOnlyHint: true, openWorldHint: false } },
      { name: "ping", description: "Answers pong.", inputSchema: object({}, []), annotations: { readOnlyHint: true, openWorldHint: false } },
    ],
  });

describe("the upstreams ConfigMap as the chart mounts it (a directory the kubelet updates)", () => {
  const dir = mkdtempSync(join(tmpdir(), "chaos-core-cm-"));
  const tools = join(dir, "changing-tools.json");
  let served: ServedUpstreams | undefined;
  afterAll(async () => {
    await served?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves an approved lock without a restart, and reads upstreams.json at start only", async () => {
    // The chart's variables, their mount paths mapped onto this machine's directories.
    const chart = chartUpstreamsEnv();
    const places: Record<string, string> = { "/etc/chaos-core/upstreams": join(dir, "configmap"), "/etc/chaos-core/upstream-secrets": join(dir, "secrets"), "/var/lib/chaos-core/upstreams": join(dir, "work") };
    const env = Object.fromEntries(Object.entries(chart).map(([k, v]) => [k, Object.entries(places).reduce((s, [from, to]) => s.replace(from, to), v)]));
    expect(Object.keys(env).sort()).toEqual(["CHAOS_CORE_UPSTREAMS_FILE", "CHAOS_CORE_UPSTREAMS_LOCK", "CHAOS_CORE_UPSTREAMS_WORK_DIR", "CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES", "CHAOS_CORE_UPSTREAM_SECRETS_DIR"]);
    mkdirSync(join(dir, "secrets"));
    const config = upstreamsConfigOf(env)!;
    expect([config.file, config.lock]).toEqual([join(dir, "configmap", "upstreams.json"), join(dir, "configmap", "upstreams.lock")]);

    const declarations = JSON.stringify({ upstreams: [{ name: "changing", command: process.execPath, args: [CHANGING, tools] }] });
    const [decl] = parseUpstreamsFile(declarations, "upstreams.json");
    const connect = { secrets: config.secrets, workDir: config.workDir, version: "test" };
    // Pinned while echo needed only `message`; re-pinned (an approval) once it needs `to` too.
    writeFileSync(tools, toolsFile(["message"]));
    const pinned = await readUpstreamContracts(decl!, connect);
    writeFileSync(tools, toolsFile(["message", "to"]));
    const approved = await readUpstreamContracts(decl!, connect);
    const lock = (set: ContractSet) => serializeUpstreamsLock(new Map([["changing", set]]));

    const volume = new ConfigMapVolume(join(dir, "configmap"));
    volume.update({ "upstreams.json": declarations, "upstreams.lock": lock(pinned) });
    served = await serveUpstreams(config, "test", createLogger("configmap-test", "silent"));
    expect(served.capabilities.map((c) => c.name).sort()).toEqual(["changing.echo", "changing.ping"]);

    // The upstream lists echo changed past its pin: quarantined, its calls refused; ping serves.
    await expect(served.pool.call(decl!, { tenant: "default", principal: "agent" }, "ping", {})).resolves.toMatchObject({ content: [{ type: "text" }] });
    await eventually("echo quarantined", () => served!.drift.driftOf("changing", "echo"), SOON);
    await expect(served.pool.call(decl!, { tenant: "default", principal: "agent" }, "echo", { message: "hi", to: "you" })).rejects.toMatchObject({ code: "contract_drift", message: expect.stringContaining("no longer matches its pin") });

    // The ConfigMap updated with the approved lock (and a second upstream declared): the kubelet swaps ..data.
    const more = JSON.stringify({ upstreams: [...(JSON.parse(declarations) as { upstreams: unknown[] }).upstreams, { name: "later", url: "https://mcp.example.com/mcp" }] });
    volume.update({ "upstreams.json": more, "upstreams.lock": lock(approved) });
    await eventually("echo released", () => (served!.drift.driftOf("changing", "echo") === undefined ? true : undefined), SOON);
    await expect(served.pool.call(decl!, { tenant: "default", principal: "agent" }, "echo", { message: "hi", to: "you" })).resolves.toMatchObject({ content: [{ type: "text", text: expect.stringContaining('"to":"you"') }] });
    // upstreams.json was read at start: the new declaration waits for a restart.
    expect(served.capabilities.map((c) => c.name).sort()).toEqual(["changing.echo", "changing.ping"]);
  }, 60_000);
});
