/**
 * The container image in tests: built once per run by scripts/ci/image.sh (cached in podman's
 * storage by the staged tree's digest), run with Debian's podman as root the way these machines
 * allow — the runc runtime and explicit ulimits (the containers.conf image.sh writes, through
 * CONTAINERS_CONF), the host network, `--init`, and always `--read-only --user 1000 --cap-drop ALL`.
 */
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { ROOT } from "./processes.js";

const run = promisify(execFile);

/** What to install where the image cannot be built or run (the skip message names it). */
export const PODMAN_INSTALL = "apt-get install -y podman buildah runc catatonit debootstrap";

function onPath(tool: string): boolean {
  return (process.env.PATH ?? "").split(":").some((dir) => dir && existsSync(join(dir, tool)));
}

/** Why the container tests cannot run here, or undefined when they can. */
export function containersUnavailable(): string | undefined {
  const missing = ["podman", "runc", "debootstrap"].filter((tool) => !onPath(tool));
  if (missing.length > 0) return `${missing.join(", ")} not installed: ${PODMAN_INSTALL}`;
  if (process.getuid?.() !== 0) return "podman builds and runs the image as root here";
  return undefined;
}

/** The image every container test shares, and what building it took. */
export interface TestImage {
  readonly name: string;
  /** CONTAINERS_CONF for every podman call. */
  readonly conf: string;
  /** image.sh's wall time: nothing when both were cached, else base and/or image builds. */
  readonly ms: number;
  /** image.sh's progress lines (which steps ran, and their times). */
  readonly log: string;
}

let building: Promise<TestImage> | undefined;

/** Builds (or finds) the one image of this run. */
export function testImage(): Promise<TestImage> {
  building ??= (async () => {
    const started = performance.now();
    const { stdout, stderr } = await run("bash", [join(ROOT, "scripts/ci/image.sh")], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 }).catch(
      (err: { stderr?: string; message: string }) => {
        throw new Error(`scripts/ci/image.sh failed: ${err.stderr ?? err.message}`);
      },
    );
    const name = stdout.trim().split("\n").at(-1)!;
    const conf = (await run("bash", [join(ROOT, "scripts/ci/image.sh"), "--conf"], { cwd: ROOT })).stdout.trim();
    return { name, conf, ms: Math.round(performance.now() - started), log: stderr };
  })();
  return building;
}

/** Runs podman with the test image's containers.conf; rejects with its stderr on failure. */
export async function podman(image: TestImage, args: string[], timeoutMs = 60_000): Promise<{ stdout: string; stderr: string }> {
  try {
    return await run("podman", args, { env: { ...process.env, CONTAINERS_CONF: image.conf }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; code?: number; message: string };
    throw Object.assign(new Error(`podman ${args.join(" ")} failed (${e.code ?? "?"}): ${e.stderr ?? e.message}`), { stdout: e.stdout, stderr: e.stderr, code: e.code });
  }
}

/** A podman run option list: the flags every container of these tests gets. */
export const LOCKED_DOWN = [
  "--init",
  "--read-only",
  "--user",
  "1000",
  "--cap-drop",
  "ALL",
  "--network",
  "host",
  // No tmpfs but /tmp: a service that needs any other writable path fails here.
  "--read-only-tmpfs=false",
  "--tmpfs",
  "/tmp:rw,size=64m,mode=1777",
  // The HEALTHCHECK runs when asked (`podman healthcheck run`); there is no systemd for timers.
] as const;

export interface ContainerOptions {
  /** The component: the image's first argument. */
  readonly component: string;
  /** More arguments after the component. */
  readonly args?: readonly string[];
  /** `--env-file`: the variables, secrets among them, never on a command line. */
  readonly envFile?: string;
  /** `-v` mounts: `source:target[:options]`. */
  readonly volumes?: readonly string[];
}

/** A started container of the test image, removed by {@link Containers.removeAll}. */
export interface Container {
  readonly name: string;
  logs(): Promise<string>;
  /** `podman healthcheck run`: resolves true when the image's HEALTHCHECK passes. */
  healthy(): Promise<boolean>;
  /** Whether it still runs, and if not how it ended (`exited 1`, `OOM-killed`), for a failure's message. */
  state(): Promise<string>;
  stop(): Promise<void>;
}

/** The containers one test file starts, named under one random prefix so cleanup finds them all. */
export class Containers {
  readonly prefix = `chaos-core-test-${randomBytes(4).toString("hex")}`;
  private readonly names: string[] = [];
  private count = 0;

  constructor(readonly image: TestImage) {}

  private args(options: ContainerOptions): string[] {
    return [
      ...LOCKED_DOWN,
      ...(options.envFile ? ["--env-file", options.envFile] : []),
      ...(options.volumes ?? []).flatMap((v) => ["-v", v]),
      this.image.name,
      options.component,
      ...(options.args ?? []),
    ];
  }

  /** `podman run --rm` to completion: the exit code and output. */
  async runToExit(options: ContainerOptions, timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const name = `${this.prefix}-${options.component}-${++this.count}`;
      this.names.push(name);
      const proc = spawn("podman", ["run", "--rm", "--name", name, ...this.args(options)], {
        env: { ...process.env, CONTAINERS_CONF: this.image.conf },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => {
        proc.kill("SIGKILL");
        reject(new Error(`${options.component} did not exit within ${timeoutMs} ms:\n${stderr}`));
      }, timeoutMs);
      proc.once("exit", (code) => {
        clearTimeout(timer);
        // podman's own complaints (no systemd for health check timers) are not the container's.
        resolve({ code: code ?? -1, stdout, stderr: stderr.replace(/^time=.*level=error msg="[^"]*systemd[^\n]*\n/gm, "") });
      });
    });
  }

  /** `podman run -d`: resolves once the container is created and started (not once it is ready). */
  async start(options: ContainerOptions): Promise<Container> {
    // A fresh name each time: a stopped container stays (its logs and exit code) until removeAll.
    const name = `${this.prefix}-${options.component}-${++this.count}`;
    this.names.push(name);
    await podman(this.image, ["run", "-d", "--name", name, ...this.args(options)]);
    return {
      name,
      logs: async () => {
        const { stdout, stderr } = await podman(this.image, ["logs", name]).catch(() => ({ stdout: "", stderr: "(no logs)" }));
        return stdout + stderr;
      },
      healthy: () =>
        podman(this.image, ["healthcheck", "run", name]).then(
          () => true,
          () => false,
        ),
      state: () =>
        podman(this.image, ["inspect", "--format", "{{.State.Status}} (exit {{.State.ExitCode}}{{if .State.OOMKilled}}, OOM-killed{{end}}) {{.State.Error}}", name]).then(
          (r) => r.stdout.trim(),
          (err: unknown) => `(not inspectable: ${(err as Error).message})`,
        ),
      stop: async () => {
        await podman(this.image, ["stop", "--time", "10", name]);
      },
    };
  }

  /** Removes every container this file started (and the named volumes given). */
  async removeAll(volumes: readonly string[] = []): Promise<void> {
    if (this.names.length > 0) await podman(this.image, ["rm", "--force", "--ignore", ...this.names]).catch(() => undefined);
    for (const volume of volumes) await podman(this.image, ["volume", "rm", "--force", volume]).catch(() => undefined);
  }
}

/** Polls `check` until it resolves true (or throws its last error after `timeoutMs`). */
export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 60_000, logs?: () => Promise<string>): Promise<number> {
  const started = performance.now();
  let last: unknown;
  while (performance.now() - started < timeoutMs) {
    try {
      if (await check()) return Math.round(performance.now() - started);
    } catch (err) {
      last = err;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${what} not ready within ${timeoutMs} ms${last ? ` (${(last as Error).message})` : ""}${logs ? `\n${await logs()}` : ""}`);
}
