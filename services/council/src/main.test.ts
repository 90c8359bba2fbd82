import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type ChaosError, checkGrpcHealth, ContextSigner, createGrpcClient } from "@chaos-core/kit";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";

const MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url));
const KEY = "council-main-test-key-0123456789abcdefghij";
const ctx = { ctx: { tenant: "default", principal: "tester" } };
const TASK = "Migrate a 2 GB MySQL database to PostgreSQL with downtime under 30 minutes";

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

async function stop(running: Running): Promise<number | null> {
  running.child.kill("SIGTERM");
  return running.exited;
}

async function withClient<T>(address: string, fn: (client: ReturnType<typeof createGrpcClient<typeof CouncilService>>["client"]) => Promise<T>): Promise<T> {
  const { client, close } = createGrpcClient(CouncilService, address, new ContextSigner(KEY));
  try {
    return await fn(client);
  } finally {
    close();
  }
}

describe("council main, run alone", () => {
  let database: TestDatabase;
  let cwd: string;

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npx tsc -b services/council\` first`);
    database = await createTestDatabase("chaoscore_council_main");
    cwd = await mkdtemp(join(tmpdir(), "chaoscore-council-main-"));
  });
  afterAll(async () => {
    await database?.drop();
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  it("on Postgres: migrates, answers health SERVING and calls, prints nothing on stdout, drains on SIGTERM", async () => {
    const running = await startMain({ DATABASE_URL: database.url }, cwd);
    try {
      expect(await checkGrpcHealth(running.address)).toBe("SERVING");
      expect(await checkGrpcHealth(running.address, "chaoscore.council.v1.CouncilService")).toBe("SERVING");
      await withClient(running.address, async (client) => {
        const init = await client.init({ task: TASK }, ctx);
        expect(init.sessionId).toMatch(/^[0-9a-f-]{36}$/);
        expect(init.phase).toBe("decompile");
        expect(init.persona).toBe("Systems Analyst");
        const cont = await client.continue({ sessionId: init.sessionId }, ctx);
        expect(cont.currentPhase).toBe("decompile");
        // A forged context is refused before any handler runs.
        const forged = createGrpcClient(CouncilService, running.address, new ContextSigner("x".repeat(40)));
        try {
          const err = await forged.client.continue({ sessionId: init.sessionId }, ctx).catch((e: unknown) => e);
          expect((err as ChaosError).code).toBe("unauthenticated");
        } finally {
          forged.close();
        }
      });
    } finally {
      expect(await stop(running)).toBe(0);
    }
    expect(running.stdout()).toBe("");
    expect(running.stderr()).toMatch(/"msg":"applied migrations"/);
    expect(running.stderr()).toMatch(/"msg":"stopped"/);
  });

  it("on embedded PGlite: keeps sessions across restarts and refuses a second process on the same directory", async () => {
    const dataDir = join(cwd, "data");
    const first = await startMain({ CHAOS_CORE_DATA_DIR: dataDir }, cwd);
    let sessionId = "";
    try {
      sessionId = await withClient(first.address, async (client) => (await client.init({ task: TASK, title: "durable" }, ctx)).sessionId);
      const second = await runMain({ CHAOS_CORE_DATA_DIR: dataDir, CHAOS_CORE_CONTEXT_KEY: KEY, PORT: "0" }, cwd);
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(/is in use by another chaos-core process/);
    } finally {
      expect(await stop(first)).toBe(0);
    }

    const again = await startMain({ CHAOS_CORE_DATA_DIR: dataDir }, cwd);
    try {
      await withClient(again.address, async (client) => {
        const cont = await client.continue({ sessionId }, ctx);
        expect(cont.sessionId).toBe(sessionId);
        expect(cont.currentPhase).toBe("decompile");
        expect(cont.result).toMatchObject({ sessionId });
      });
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
