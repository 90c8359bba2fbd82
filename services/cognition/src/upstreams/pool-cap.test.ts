import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChaosError, createLogger, parseUpstreamsFile, type UpstreamDeclaration } from "@chaos-core/kit";
import { guardedUpstreamFetch } from "./guarded-fetch.js";
import type { UpstreamNotice } from "./notices.js";
import { createUpstreamPool, type UpstreamPool } from "./pool.js";

/** Who the calls are made for. */
const ACME = { tenant: "acme", principal: "agent" };

// A real Streamable HTTP upstream in a process of its own (so the 50 MB it builds is not counted
// here), answering as SSE streams at /mcp and as JSON bodies at /json; and server-everything over
// stdio beside it. This process is the pool's: its memory is what the cap keeps bounded.
const ROOT = new URL("../../../../", import.meta.url).pathname;
const TROUBLE = join(ROOT, "test/support/upstreams/trouble-server.mjs");
const EVERYTHING = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const CAP = 1024 * 1024;
const REFUSAL = (name: string) => `upstream "${name}" sent an answer over ${CAP} bytes, the most Chaos Core accepts (CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES)`;
const MB = 1024 * 1024;

let remote: ChildProcess;
let port: number;
const pools: UpstreamPool[] = [];
let everything: UpstreamDeclaration;

beforeAll(async () => {
  remote = spawn(process.execPath, [TROUBLE, "http"], { stdio: ["ignore", "pipe", "ignore"] });
  port = await new Promise<number>((resolve) => createInterface({ input: remote.stdout! }).once("line", (line) => resolve(Number(/^listening (\d+)$/.exec(line)![1]))));
  everything = parseUpstreamsFile(JSON.stringify({ upstreams: [{ name: "everything", command: process.execPath, args: [EVERYTHING, "stdio"] }] }), "test")[0]!;
});
afterAll(async () => {
  for (const pool of pools) await pool.close();
  remote?.kill();
});

function poolOf(options: { perTenant?: boolean } = {}): UpstreamPool {
  const pool = createUpstreamPool({
    connect: {
      secrets: { env: {} },
      workDir: join(ROOT, ".cache", "pool-cap-test-upstreams"),
      version: "test",
      // A tenant's upstream: only through the guarded fetch, which must let 127.0.0.1 through here.
      ...(options.perTenant ? { fetch: guardedUpstreamFetch({ who: 'upstream "remote" of tenant "acme"', allowedAddresses: ["127.0.0.1/32"] }) } : {}),
    },
    logger: createLogger("pool-cap-test", "error"),
    maxResultBytes: CAP,
    ...(options.perTenant ? { perTenant: true } : {}),
  });
  pools.push(pool);
  return pool;
}

const http = (name: string, path: "mcp" | "json") =>
  parseUpstreamsFile(JSON.stringify({ upstreams: [{ name, url: `http://127.0.0.1:${port}/${path}`, timeoutMs: 60_000 }] }), "test")[0]!;
const text = (r: { content: Array<{ type: string; text?: string }> }) => r.content.map((c) => c.text ?? "").join("");
async function refusal(p: Promise<unknown>): Promise<ChaosError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    return err as ChaosError;
  }
  throw new Error("the call succeeded");
}

/**
 * The most this process's memory (V8 heap and buffers) grew by while `run` ran, sampled every 5 ms.
 * (Its resident set is no measure: once grown, it stays.) Without the cut it grows by 35 MB (a
 * JSON body) to 190 MB (an SSE stream) on a 50 MB answer; with it, by 3-6 MB.
 */
async function growthDuring<T>(run: () => Promise<T>): Promise<{ result: T; heapAndBuffers: number }> {
  const before = process.memoryUsage();
  let heapAndBuffers = 0;
  const sample = () => {
    const now = process.memoryUsage();
    heapAndBuffers = Math.max(heapAndBuffers, now.heapUsed + now.arrayBuffers - before.heapUsed - before.arrayBuffers);
  };
  const timer = setInterval(sample, 5);
  try {
    const result = await run();
    sample();
    return { result, heapAndBuffers };
  } finally {
    clearInterval(timer);
  }
}

describe("an answer over the cap is cut while it arrives", () => {
  for (const [mode, path] of [
    ["an SSE stream", "mcp"],
    ["a JSON body", "json"],
  ] as const) {
    it(`fails a 50 MB answer sent as ${mode} at once, naming the upstream and the cap, with memory bounded; another upstream answers meanwhile and after`, { timeout: 120_000 }, async () => {
      const pool = poolOf();
      const remoteDecl = http(`remote_${path}`, path);
      // Both connections open (and the process warm) before the measure.
      expect(text(await pool.call(remoteDecl, ACME, "ok", {}))).toMatch(/^pid \d+$/);
      expect(text(await pool.call(everything, ACME, "echo", { message: "warm" }))).toContain("warm");

      const started = Date.now();
      const { result, heapAndBuffers } = await growthDuring(async () => {
        const huge = refusal(pool.call(remoteDecl, ACME, "huge", { mb: 50 }));
        const meanwhile = await pool.call(everything, ACME, "echo", { message: "meanwhile" });
        return { huge: await huge, meanwhile };
      });
      const elapsed = Date.now() - started;
      expect(result.huge.code).toBe("resource_exhausted");
      expect(result.huge.message).toBe(REFUSAL(`remote_${path}`));
      expect(text(result.meanwhile)).toContain("meanwhile");
      // Cut after about 1 MiB: no waiting for the call's 60 s timeout, nor for 50 MB to arrive.
      expect(elapsed).toBeLessThan(15_000);
      // 50 MB read whole would be 50 MB of buffers, then as much again as text and as parsed JSON.
      expect(heapAndBuffers).toBeLessThan(16 * MB);
      // A failure of that upstream alone; the next call opens a new connection and is served.
      expect(pool.breakers()).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ upstream: `remote_${path}`, state: "closed", consecutiveFailures: 1 }),
          expect.objectContaining({ upstream: "everything", consecutiveFailures: 0 }),
        ]),
      );
      expect(text(await pool.call(remoteDecl, ACME, "ok", {}))).toMatch(/^pid \d+$/);
      expect(text(await pool.call(everything, ACME, "echo", { message: "after" }))).toContain("after");
      expect(pool.breakers().find((b) => b.upstream === `remote_${path}`)!.consecutiveFailures).toBe(0);
    });
  }

  it("counts the cap per message: a call whose progress adds up to far more than the cap, each notification small, is served", async () => {
    const pool = poolOf();
    const notices: UpstreamNotice[] = [];
    // 48 notifications of 64 KiB: 3 MiB on the call's SSE stream.
    const result = await pool.call(http("remote_chatty", "mcp"), ACME, "chatty", { count: 48, kb: 64 }, undefined, (n) => notices.push(n));
    expect(text(result)).toBe("told 48");
    expect(notices.filter((n) => n.kind === "progress")).toHaveLength(48);
  });

  it("stdio alike: the reader holds no more of one message than the cap and its allowance, and the call fails at once", { timeout: 120_000 }, async () => {
    const pool = poolOf();
    const [bulky] = parseUpstreamsFile(JSON.stringify({ upstreams: [{ name: "bulky", command: process.execPath, args: [TROUBLE], timeoutMs: 60_000 }] }), "test");
    expect(text(await pool.call(bulky!, ACME, "ok", {}))).toMatch(/^pid \d+$/);
    const started = Date.now();
    const { result: e, heapAndBuffers } = await growthDuring(() => refusal(pool.call(bulky!, ACME, "huge", { mb: 50 })));
    expect(e.code).toBe("resource_exhausted");
    expect(e.message).toBe(REFUSAL("bulky"));
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(heapAndBuffers).toBeLessThan(16 * MB);
    expect(text(await pool.call(bulky!, ACME, "ok", {}))).toMatch(/^pid \d+$/);
  });

  it("cuts a tenant's upstream, reached through the guarded fetch, alike; its breaker is the tenant's", { timeout: 120_000 }, async () => {
    const pool = poolOf({ perTenant: true });
    const decl = http("remote", "mcp");
    const { result: e, heapAndBuffers } = await growthDuring(() => refusal(pool.call(decl, ACME, "huge", { mb: 50 })));
    expect(e.code).toBe("resource_exhausted");
    expect(e.message).toBe(REFUSAL("remote"));
    expect(heapAndBuffers).toBeLessThan(16 * MB);
    expect(pool.breakers()).toEqual([expect.objectContaining({ upstream: "remote", scope: "acme", consecutiveFailures: 1 })]);
    expect(text(await pool.call(decl, ACME, "ok", {}))).toMatch(/^pid \d+$/);
  });
});
