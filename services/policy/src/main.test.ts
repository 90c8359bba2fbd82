import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkGrpcHealth, ContextSigner, createGrpcClient } from "@chaos-core/kit";
import { Decision, PolicyService, Risk } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const MAIN = join(ROOT, "services/policy/dist/main.js");
const KEY = "policy-main-test-key-0123456789abcdef";
const signer = new ContextSigner(KEY);
const ctx = { ctx: { tenant: "default", principal: "test" } };

interface Running {
  proc: ChildProcess;
  address: string;
  stdout(): string;
  stderr(): string;
}

const children: ChildProcess[] = [];
const dirs: string[] = [];

/** Only what the test gives: an inherited DATABASE_URL or PORT must not change what runs. */
function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: "info", PORT: "0", CHAOS_CORE_ADMIN_PORT: "0", ...extra };
}

function spawnMain(extra: Record<string, string>): { proc: ChildProcess; out: { stdout: string; stderr: string } } {
  // The working directory is a fresh one, so a developer's .env never leaks into the test.
  const proc = spawn(process.execPath, [MAIN], { cwd: tmpdir(), env: env(extra), stdio: ["ignore", "pipe", "pipe"] });
  children.push(proc);
  const out = { stdout: "", stderr: "" };
  proc.stdout!.on("data", (d: Buffer) => (out.stdout += d.toString()));
  proc.stderr!.on("data", (d: Buffer) => (out.stderr += d.toString()));
  return { proc, out };
}

/** Starts main and resolves with the address it logged once listening. */
function startMain(extra: Record<string, string>): Promise<Running> {
  const { proc, out } = spawnMain(extra);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`main did not start in time:\n${out.stderr}`)), 30_000);
    const onData = () => {
      const m = /"address":"([\d.]+:\d+)"/.exec(out.stderr);
      if (!m) return;
      clearTimeout(timer);
      proc.stderr!.off("data", onData);
      resolve({ proc, address: m[1]!, stdout: () => out.stdout, stderr: () => out.stderr });
    };
    proc.stderr!.on("data", onData);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`main exited with ${code}:\n${out.stderr}`));
    });
  });
}

/** Runs main to its exit (for start-up failures). */
async function runToExit(extra: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { proc, out } = spawnMain(extra);
  const [code] = (await once(proc, "exit")) as [number | null];
  return { code, ...out };
}

async function stop(proc: ChildProcess): Promise<number | null> {
  if (proc.exitCode !== null) return proc.exitCode;
  const exited = once(proc, "exit");
  proc.kill("SIGTERM");
  const [code] = (await exited) as [number | null];
  return code;
}

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "chaoscore-policy-main-"));
  dirs.push(dir);
  return dir;
}

beforeAll(() => {
  // Test the code as it is now, not a stale build; tsc -b is incremental, so this is quick when fresh.
  execFileSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-b", "services/policy"], {
    cwd: ROOT,
    stdio: "pipe",
  });
}, 180_000);

afterEach(async () => {
  for (const proc of children.splice(0)) if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

describe("policy main on the file store", () => {
  it("answers health SERVING, decides with the policy.json it created, and drains on SIGTERM", async () => {
    const dir = await dataDir();
    const main = await startMain({ CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_CONTEXT_KEY: KEY });
    expect(await checkGrpcHealth(main.address)).toBe("SERVING");
    expect(await checkGrpcHealth(main.address, "chaoscore.policy.v1.PolicyService")).toBe("SERVING");

    expect(JSON.parse(await readFile(join(dir, "policy.json"), "utf8"))).toMatchObject({
      requireConfirmationFor: ["http.request"],
    });
    const grpc = createGrpcClient(PolicyService, main.address, signer);
    try {
      const res = await grpc.client.evaluate({ capability: "memory.read", risk: Risk.LOW }, ctx);
      expect(res).toMatchObject({ decision: Decision.ALLOW, policyVersion: 1n });
    } finally {
      grpc.close();
    }

    expect(await stop(main.proc)).toBe(0);
    expect(main.stdout()).toBe("");
  });

  it("refuses to start on a malformed policy.json, naming the file and the field", async () => {
    const dir = await dataDir();
    await writeFile(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["http*"] }));
    const res = await runToExit({ CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_CONTEXT_KEY: KEY });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`${join(dir, "policy.json")}: requireConfirmationFor[0]: \\"http*\\" is a wildcard`);
    expect(res.stdout).toBe("");
  });

  it("refuses to start without a context key, naming the variable", async () => {
    const res = await runToExit({ CHAOS_CORE_DATA_DIR: await dataDir() });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("CHAOS_CORE_CONTEXT_KEY: is required");
  });
});

describe("policy main on Postgres", () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createTestDatabase("chaoscore_policy_main");
  });

  afterAll(async () => {
    await database?.drop();
  });

  it("migrates, answers health SERVING and stores policies in Postgres", async () => {
    const main = await startMain({ DATABASE_URL: database.url, CHAOS_CORE_CONTEXT_KEY: KEY });
    expect(await checkGrpcHealth(main.address)).toBe("SERVING");
    const grpc = createGrpcClient(PolicyService, main.address, signer);
    try {
      const put = await grpc.client.putPolicy({ document: { deniedCapabilities: ["shell.exec"] } }, ctx);
      expect(put.version).toBe(1n);
      const got = await grpc.client.getPolicy({}, ctx);
      expect(got).toMatchObject({ version: 1n, source: "postgres" });
      const res = await grpc.client.evaluate({ capability: "shell.exec", risk: Risk.LOW }, ctx);
      expect(res).toMatchObject({ decision: Decision.DENY, matchedRule: "deniedCapabilities" });
    } finally {
      grpc.close();
    }
    expect(await stop(main.proc)).toBe(0);
  });
});
