import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";

export const ROOT = new URL("../../", import.meta.url).pathname;
export const CLI = join(ROOT, "services/standalone/bin/chaos-core.js");

/** A fresh temporary data directory; remove it with {@link removeDir}. */
export function tempDir(name = "chaos-core-test-"): string {
  return mkdtempSync(join(tmpdir(), name));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Where a child's per-user data directory defaults to (its HOME and XDG_DATA_HOME): never the
 * real home directory. Shared, so a test that forgets CHAOS_CORE_DATA_DIR meets the data
 * directory lock of another instead of passing by accident.
 */
const CHILD_HOME = join(tmpdir(), "chaos-core-test-home");

/** The environment a child gets: this one minus anything that would change its stores. */
export function childEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ["DATABASE_URL", "REDIS_URL", "CHAOS_CORE_DATA_DIR", "HOST", "PORT", "CHAOS_CORE_API_KEYS_FILE"]) {
    delete env[k];
  }
  // Nor an OAuth issuer of the shell the tests run in.
  for (const k of Object.keys(env)) if (k.startsWith("CHAOS_CORE_OAUTH_")) delete env[k];
  env.HOME = CHILD_HOME;
  env.XDG_DATA_HOME = join(CHILD_HOME, ".local/share");
  env.XDG_STATE_HOME = join(CHILD_HOME, ".local/state");
  env.LOG_LEVEL = "warn";
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) env[k] = v;
  return env;
}

export interface ServeProcess {
  url: string;
  proc: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

/**
 * Starts `chaos-core serve` (with `args` after it) on an ephemeral port and resolves once it
 * prints its endpoint.
 */
export function startServe(env: Record<string, string | undefined>, timeoutMs = 60_000, args: string[] = []): Promise<ServeProcess> {
  const proc = spawn(process.execPath, [CLI, "serve", ...args], {
    cwd: ROOT,
    env: childEnv({ PORT: "0", ...env }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  proc.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`chaos-core serve did not start in time:\n${err}`));
    }, timeoutMs);
    createInterface({ input: proc.stdout! }).on("line", (line) => {
      const m = /(http:\/\/[\d.]+:\d+\/mcp)/.exec(line);
      if (!m) return;
      clearTimeout(timer);
      resolve({ url: m[1]!, proc, stderr: () => err, stop: () => stopProcess(proc) });
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`chaos-core serve exited with ${code}:\n${err}`));
    });
  });
}

/**
 * Calls `done` with the exit code once `proc` has exited and its output has been read: on
 * "close", not "exit" (a child can exit before its last lines reach the pipe's reader), or 2 s
 * after "exit" should something else still hold its pipes open.
 */
export function afterOutput(proc: ChildProcess, done: (code: number | null) => void): void {
  let called = false;
  const finish = (code: number | null) => {
    if (called) return;
    called = true;
    done(code);
  };
  proc.once("close", (code) => finish(code));
  proc.once("exit", (code) => setTimeout(() => finish(code), 2_000).unref());
}

/** Runs a command to completion (in `cwd`, by default the repository) and returns its exit code and output. */
export function runToExit(
  args: string[],
  env: Record<string, string | undefined>,
  timeoutMs = 60_000,
  cwd = ROOT,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [CLI, ...args], { cwd, env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  proc.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
    afterOutput(proc, (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export async function stopProcess(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  proc.kill("SIGTERM");
  const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/** What an e2e client declares, and the request handlers it sets before it connects (elicitation). */
export interface ClientOptions {
  readonly capabilities?: ClientCapabilities;
  readonly setup?: (client: Client) => void;
}

function newClient(options: ClientOptions): Client {
  const client = new Client({ name: "chaos-core-e2e", version: "0.0.0" }, { capabilities: options.capabilities ?? {} });
  options.setup?.(client);
  return client;
}

/** An SDK client connected over Streamable HTTP. */
export async function httpClient(url: string, headers?: Record<string, string>, options: ClientOptions = {}): Promise<Client> {
  const client = newClient(options);
  await client.connect(new StreamableHTTPClientTransport(new URL(url), headers ? { requestInit: { headers } } : undefined));
  return client;
}

/** An SDK client that starts `chaos-core stdio` as its subprocess (in `cwd`, as a host would). */
export async function stdioClient(
  env: Record<string, string | undefined>,
  cwd = ROOT,
  options: ClientOptions = {},
): Promise<{ client: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "stdio"],
    cwd,
    env: childEnv(env) as Record<string, string>,
    stderr: "pipe",
  });
  let err = "";
  transport.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  const client = newClient(options);
  await client.connect(transport);
  return { client, stderr: () => err };
}

export interface ServiceMain {
  proc: ChildProcess;
  /** "host:port" for a gRPC service, the MCP URL for the edge. */
  address: string;
  /** Everything the process has logged so far. */
  log(): string;
}

/**
 * Awaits starts begun together and resolves with their results in order once all have settled:
 * unlike Promise.all it never rejects while a sibling is still starting, so whatever the caller
 * records as each one resolves (its afterAll's cleanup) is complete. Throws the first failure.
 */
export async function allStarted<const T extends readonly unknown[]>(starts: { readonly [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(starts as readonly Promise<unknown>[]);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/**
 * Starts several service mains at once, as Kubernetes starts a topology's pods, and resolves
 * with them in the order given once every one has reported its address. Each `env` may name only
 * addresses already known: start a service that needs another's address in a later call. Every
 * process that started is pushed onto `procs` (in the order given), so the caller's afterAll stops
 * it even when another failed to start; the first failure is then thrown.
 */
export async function startServiceMains<const T extends ReadonlyArray<readonly [service: string, env: Record<string, string>]>>(
  procs: ChildProcess[],
  specs: T,
  timeoutMs = 60_000,
): Promise<{ -readonly [K in keyof T]: ServiceMain }> {
  const settled = await Promise.allSettled(specs.map(([service, env]) => startServiceMain(service, env, timeoutMs)));
  const started: ServiceMain[] = [];
  for (const s of settled) {
    if (s.status !== "fulfilled") continue;
    procs.push(s.value.proc);
    started.push(s.value);
  }
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) throw failed.reason;
  return started as { -readonly [K in keyof T]: ServiceMain };
}

/**
 * Starts a service's own built main (`services/<service>/dist/main.js`, the way Kubernetes runs
 * it) on an ephemeral port and resolves with the first address it reports on stderr.
 */
export function startServiceMain(service: string, env: Record<string, string>, timeoutMs = 60_000): Promise<ServiceMain> {
  const proc = spawn(process.execPath, [join(ROOT, `services/${service}/dist/main.js`)], {
    cwd: ROOT,
    // CHAOS_CORE_ADMIN_PORT: the policy service's second listener (the tenant admin API), ephemeral too.
    env: childEnv({ PORT: "0", CHAOS_CORE_ADMIN_PORT: "0", LOG_LEVEL: "info", ...env }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`${service} did not start in time:\n${out}`));
    }, timeoutMs);
    createInterface({ input: proc.stderr! }).on("line", (line) => {
      out += `${line}\n`;
      const found = /(http:\/\/127\.0\.0\.1:\d+\/mcp)/.exec(line)?.[1] ?? /"address":"(127\.0\.0\.1:\d+)"/.exec(line)?.[1];
      if (found) {
        clearTimeout(timer);
        resolve({ proc, address: found, log: () => out });
      }
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${service} exited with ${code}:\n${out}`));
    });
  });
}
