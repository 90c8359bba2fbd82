import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { credentials, makeClientConstructor, type Client, type ServiceDefinition } from "@grpc/grpc-js";
import { ContextSigner, createGrpcClient } from "@chaos-core/kit";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { service as healthService } from "grpc-health-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";

const MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const KEY = "memory-main-test-key-0123456789abcdefghij";
const ctx = { ctx: { tenant: "default", principal: "tester" } };

interface Running {
  child: ChildProcess;
  address: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** Starts `node dist/main.js` with only the given environment, in an empty directory (no .env). */
async function startMain(env: Record<string, string>, cwd: string): Promise<Running> {
  const child = spawn(process.execPath, [MAIN], {
    cwd,
    env: { PATH: process.env.PATH ?? "", CHAOS_CORE_CONTEXT_KEY: KEY, HOST: "127.0.0.1", PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const address = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`main did not start in time:\n${err}`)), 60_000);
    child.stderr?.on("data", (d: Buffer) => {
      err += d.toString();
      const m = /"address":"([^"]+)"/.exec(err);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`main exited with ${code}:\n${err}`));
    });
  });
  return { child, address, stdout: () => out, stderr: () => err, exited };
}

/** Runs main to completion (for start-up failures). */
async function runMain(env: Record<string, string>, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [MAIN], { cwd, env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  return { code, stdout, stderr };
}

const HealthClient = makeClientConstructor(healthService as unknown as ServiceDefinition, "grpc.health.v1.Health");

async function healthOf(address: string, service: string): Promise<string> {
  const client = new HealthClient(address, credentials.createInsecure()) as unknown as Client & {
    check(req: { service: string }, cb: (err: Error | null, res?: { status: string }) => void): void;
  };
  try {
    return await new Promise<string>((resolve, reject) =>
      client.check({ service }, (err, res) => (err ? reject(err) : resolve(String(res?.status)))),
    );
  } finally {
    client.close();
  }
}

async function stop(running: Running): Promise<number | null> {
  running.child.kill("SIGTERM");
  return running.exited;
}

describe("memory main, run alone", () => {
  let database: TestDatabase;
  let cwd: string;

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npx tsc -b services/memory\` first`);
    database = await createTestDatabase("chaoscore_memory_main");
    cwd = await mkdtemp(join(tmpdir(), "chaoscore-memory-main-"));
  });
  afterAll(async () => {
    await database?.drop();
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  it("on Postgres: migrates, answers health SERVING and calls, prints nothing on stdout, drains on SIGTERM", async () => {
    const running = await startMain({ DATABASE_URL: database.url }, cwd);
    try {
      expect(await healthOf(running.address, "")).toBe("SERVING");
      expect(await healthOf(running.address, "chaoscore.memory.v1.MemoryService")).toBe("SERVING");
      const { client, close } = createGrpcClient(MemoryService, running.address, new ContextSigner(KEY));
      try {
        await client.remember({ key: "hello", value: fromJson(ValueSchema, { from: "main" }) }, ctx);
        const recalled = await client.recall({ key: "hello" }, ctx);
        expect(recalled.item?.key).toBe("hello");
      } finally {
        close();
      }
    } finally {
      expect(await stop(running)).toBe(0);
    }
    expect(running.stdout()).toBe("");
    expect(running.stderr()).toMatch(/"msg":"applied migrations"/);
    expect(running.stderr()).toMatch(/"msg":"stopped"/);
  });

  it("on embedded PGlite: keeps data across restarts and refuses a second process on the same directory", async () => {
    const dataDir = join(cwd, "data");
    const first = await startMain({ CHAOS_CORE_DATA_DIR: dataDir }, cwd);
    try {
      expect(await healthOf(first.address, "")).toBe("SERVING");
      const { client, close } = createGrpcClient(MemoryService, first.address, new ContextSigner(KEY));
      try {
        await client.remember({ key: "durable", value: fromJson(ValueSchema, 42) }, ctx);
      } finally {
        close();
      }
      const second = await runMain({ CHAOS_CORE_DATA_DIR: dataDir, CHAOS_CORE_CONTEXT_KEY: KEY, PORT: "0" }, cwd);
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(/is in use by another chaos-core process/);
    } finally {
      expect(await stop(first)).toBe(0);
    }

    const again = await startMain({ CHAOS_CORE_DATA_DIR: dataDir }, cwd);
    try {
      const { client, close } = createGrpcClient(MemoryService, again.address, new ContextSigner(KEY));
      try {
        const recalled = await client.recall({ key: "durable" }, ctx);
        expect(recalled.item?.value?.kind).toEqual({ case: "numberValue", value: 42 });
      } finally {
        close();
      }
    } finally {
      expect(await stop(again)).toBe(0);
    }
  });

  it("fails fast, naming the variable, when configuration is missing", async () => {
    const res = await runMain({ DATABASE_URL: database.url }, cwd);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe("");
    expect(res.stderr).toMatch(/CHAOS_CORE_CONTEXT_KEY/);
  });
});
