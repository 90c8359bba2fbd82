import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";

/** The Redis tests use; each test picks its own key prefix, so runs never collide. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export function uniquePrefix(name: string): string {
  return `test:${name}:${randomBytes(4).toString("hex")}:`;
}

/** Two connections to one Redis, standing for two replicas of a service. */
export interface RedisReplicas {
  readonly a: Redis;
  readonly b: Redis;
  /** A key prefix unique to this test file. */
  readonly prefix: string;
}

/**
 * Opens two connections before the file's tests and closes them after, deleting every key under
 * the file's prefix. Call it at the top level of a test file.
 */
export function useRedisReplicas(name: string): RedisReplicas {
  const prefix = uniquePrefix(name);
  let a: Redis | undefined;
  let b: Redis | undefined;
  beforeAll(() => {
    a = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    b = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    if (a) {
      const keys = await a.keys(`${prefix}*`);
      if (keys.length > 0) await a.del(...keys);
    }
    a?.disconnect();
    b?.disconnect();
  });
  const opened = (r: Redis | undefined): Redis => {
    if (!r) throw new Error("useRedisReplicas: the connections open in beforeAll; use them inside tests");
    return r;
  };
  return {
    prefix,
    get a() {
      return opened(a);
    },
    get b() {
      return opened(b);
    },
  };
}

/** A `redis-server` of the test's own, so a test can stop it without touching the shared one. */
export interface PrivateRedis {
  /** `redis://127.0.0.1:<port>`, the same across restarts. */
  readonly url: string;
  /** Kills the server (SIGKILL, as a crash or a lost node would), resolving once it is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port and data directory; what it held before the kill is back. */
  start(): Promise<void>;
  /** Kills it and removes its data directory. */
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Starts a private `redis-server` on a free loopback port. Every write is appended and synced
 * (`appendfsync always`), so a restart after {@link PrivateRedis.kill} finds the sessions, plans
 * and approvals written before it, as a Redis with persistence (or a promoted replica) would.
 */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "chaos-core-redis-"));
  let proc: ChildProcess | undefined;
  const start = async () => {
    const child = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    proc = child;
    let out = "";
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${out}`)), 10_000);
      const onData = (d: Buffer) => {
        out += d.toString();
        if (out.includes("Ready to accept connections")) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on("data", onData);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}:\n${out}`));
      });
    });
    child.stdout!.resume();
  };
  const kill = async () => {
    const child = proc;
    proc = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGKILL");
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    kill,
    start,
    async close() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
