/**
 * How a channel finds replicas: real grpc-js servers and channels over TCP on loopback. The one
 * stand-in is DNS itself (a name whose answer changes, as a headless Service's does when an
 * autoscaler adds a pod): the system resolver cannot be changed here, so the lookup grpc-js calls
 * (`dns.promises.lookup`) answers from a list the test edits, for that one name only. The
 * two-process version of the spread, kill and restart is test/e2e/load-balancing.test.ts.
 */
import dns from "node:dns";
import net from "node:net";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { ContextSigner, type CallContext } from "../context.js";
import { ChaosError } from "../errors.js";
import { createLogger } from "../logger.js";
import { createGrpcClient, type GrpcClient } from "./grpc.js";
import { register, startGrpcServer, type RunningGrpcServer } from "./server.js";
import type { ServiceImpl } from "./types.js";

const KEY = "b".repeat(40);
const signer = new ContextSigner(KEY);
const ctx: CallContext = { tenant: "acme", principal: "agent" };
const logger = createLogger("test", "silent");

/** A policy service that answers GetPolicy with its own name and counts the calls it received. */
function replica(name: string) {
  const counter = { name, calls: 0 };
  const impl: ServiceImpl<typeof PolicyService> = {
    getPolicy() {
      counter.calls++;
      return Promise.resolve({ document: {}, version: 1n, source: name });
    },
    evaluate: () => Promise.reject(new ChaosError("unimplemented", "not in this test")),
    putPolicy: () => Promise.reject(new ChaosError("unimplemented", "not in this test")),
    evaluateApprovalChannels: () => Promise.reject(new ChaosError("unimplemented", "not in this test")),
    // eslint-disable-next-line require-yield
    async *watchPolicy() {
      throw new ChaosError("unimplemented", "not in this test");
    },
  };
  return { counter, impl };
}

const servers: RunningGrpcServer[] = [];
const clients: Array<GrpcClient<typeof PolicyService>> = [];

async function serve(host: string, port: number, impl: ServiceImpl<typeof PolicyService>, maxConnectionAgeMs?: number) {
  const server = await startGrpcServer({
    host,
    port,
    signer,
    logger,
    registrations: [register(PolicyService, impl)],
    ...(maxConnectionAgeMs !== undefined ? { maxConnectionAgeMs, maxConnectionAgeGraceMs: 5_000 } : {}),
  });
  servers.push(server);
  return server;
}

function client(target: string) {
  const c = createGrpcClient(PolicyService, target, signer, { timeoutMs: 5_000 });
  clients.push(c);
  return c.client;
}

/** Calls until `done` holds and returns every answer; fails after `deadlineMs`, counting the answers. */
async function callUntil(call: () => Promise<string>, done: () => boolean, deadlineMs = 30_000): Promise<string[]> {
  const answers: string[] = [];
  const end = Date.now() + deadlineMs;
  while (!done()) {
    if (Date.now() > end) {
      const counts = new Map<string, number>();
      for (const a of answers) counts.set(a, (counts.get(a) ?? 0) + 1);
      throw new Error(`not done within ${deadlineMs} ms; answers: ${[...counts].map(([a, n]) => `${a} ×${n}`).join(", ")}`);
    }
    answers.push(await call());
    await new Promise((r) => setTimeout(r, 20));
  }
  return answers;
}

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) await s.shutdown(0);
});

describe("a dns:/// name whose answer grows (a headless Service scaled out)", () => {
  const NAME = "policy-headless.lb-test.invalid";
  const realLookup = dns.promises.lookup;
  let answer: string[] = [];
  const lookups: string[] = [];
  (dns.promises as { lookup: unknown }).lookup = (hostname: string, options?: unknown) => {
    if (hostname !== NAME) return (realLookup as (h: string, o?: unknown) => Promise<unknown>)(hostname, options);
    lookups.push(answer.join(","));
    return Promise.resolve(answer.map((address) => ({ address, family: 4 })));
  };
  afterAll(() => {
    dns.promises.lookup = realLookup;
  });

  it("sends calls to the replica added to DNS once the servers age the connection (no call fails)", async () => {
    const a = replica("a");
    const b = replica("b");
    const first = await serve("127.0.0.1", 0, a.impl, 500);
    await serve("127.0.0.2", first.port, b.impl, 500);
    answer = ["127.0.0.1"];
    const policy = client(`dns:///${NAME}:${first.port}`);
    const call = async () => (await policy.getPolicy({}, { ctx })).source;

    for (let i = 0; i < 5; i++) expect(await call()).toBe("a");
    expect(b.counter.calls).toBe(0);

    // The autoscaler adds a pod: the name now resolves to both. Only a new lookup can find it.
    answer = ["127.0.0.1", "127.0.0.2"];
    const answers = await callUntil(call, () => b.counter.calls > 0);
    expect(answers.every((s) => s === "a" || s === "b")).toBe(true);
    expect(lookups.at(-1)).toBe("127.0.0.1,127.0.0.2");
    // Both replicas now share the calls.
    const before = { a: a.counter.calls, b: b.counter.calls };
    await callUntil(call, () => a.counter.calls > before.a && b.counter.calls > before.b);
  }, 60_000);
});

describe("connection ageing", () => {
  it("closes aged connections under concurrent calls without failing one", async () => {
    const r = replica("aged");
    // Far shorter than the default two minutes, so the test sees several connections come and go.
    // A call that meets a closing connection is refused and retried once by grpc-js (transparent
    // retry); at 100 ms a loaded machine sometimes saw the retry refused too, which two minutes
    // never come near. 250 ms keeps the ageing frequent and the double refusal out of reach.
    const server = await serve("127.0.0.1", 0, r.impl, 250);
    // A TCP relay in front of the server counts the connections the client opens.
    let connections = 0;
    const relay = net.createServer((downstream) => {
      connections++;
      const upstream = net.connect(server.port, "127.0.0.1");
      downstream.pipe(upstream).pipe(downstream);
      const end = () => (downstream.destroy(), upstream.destroy());
      downstream.on("error", end).on("close", end);
      upstream.on("error", end).on("close", end);
    });
    await new Promise<void>((res) => relay.listen(0, "127.0.0.1", res));
    const policy = client(`127.0.0.1:${(relay.address() as net.AddressInfo).port}`);
    const failures: string[] = [];
    let calls = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 60; i++) {
          await policy.getPolicy({}, { ctx }).then(
            () => calls++,
            (e: unknown) => failures.push(`${(e as ChaosError).code}: ${(e as ChaosError).message}`),
          );
          await new Promise((res) => setTimeout(res, 10));
        }
      }),
    );
    relay.close();
    expect(failures).toEqual([]);
    expect(calls).toBe(480);
    expect(r.counter.calls).toBe(480);
    // The calls ran over several connections: each aged out and the client opened the next.
    expect(connections).toBeGreaterThan(1);
  }, 60_000);
});

describe("a caller whose only service goes away", () => {
  it("fails with `unavailable` naming the service, and reaches it again on the same channel once it is back", async () => {
    const r = replica("only");
    const up = await serve("127.0.0.1", 0, r.impl);
    const port = up.port;
    const policy = client(`127.0.0.1:${port}`);
    expect((await policy.getPolicy({}, { ctx })).source).toBe("only");

    await up.shutdown(0);
    servers.splice(servers.indexOf(up), 1);
    const err = await policy.getPolicy({}, { ctx }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ChaosError);
    expect((err as ChaosError).code).toBe("unavailable");
    expect((err as ChaosError).message).toMatch(/^the policy service is unreachable: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);

    const back = replica("back");
    await serve("127.0.0.1", port, back.impl);
    const answers = await callUntil(
      () =>
        policy.getPolicy({}, { ctx }).then(
          (res) => res.source,
          (e: unknown) => `${(e as ChaosError).code}`,
        ),
      () => back.counter.calls > 0,
    );
    // Until it is back, every failure is the same clear `unavailable`.
    expect(answers.filter((a) => a !== "unavailable" && a !== "back")).toEqual([]);
  }, 60_000);
});
