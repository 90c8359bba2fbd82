import { create } from "@bufbuild/protobuf";
import { credentials, loadPackageDefinition, Metadata, Client, type GrpcObject } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { createRequire } from "node:module";
import {
  Decision,
  PolicyService,
  PolicyDocumentSchema,
  type EvaluateRequest,
} from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONTEXT_HEADER, CONTEXT_SIG_HEADER, ContextSigner, type CallContext } from "../context.js";
import { ChaosError } from "../errors.js";
import { SUBJECT_TOKEN_HEADER, subjectTokenOf, withSubjectToken } from "../subject-token.js";
import { createLogger } from "../logger.js";
import { createGrpcClient, grpcServiceDefinition } from "./grpc.js";
import { checkGrpcHealth } from "./health-client.js";
import { createDeferredClient } from "./deferred.js";
import { createInProcessClient } from "./in-process.js";
import { register, startGrpcServer, type RunningGrpcServer } from "./server.js";
import type { HandlerContext, ServiceClient, ServiceImpl } from "./types.js";

/** The signal of the last `keep-signal` call, which a handler could keep for work after its answer. */
let kept: AbortSignal | undefined;

/**
 * A transport test double: it echoes what it was given so the tests can see exactly what
 * crossed the transport (the request, the verified context, the deadline signal).
 */
const impl: ServiceImpl<typeof PolicyService> = {
  async evaluate(req: EvaluateRequest, ctx: HandlerContext) {
    if (req.capability === "fail.denied") throw new ChaosError("policy_denied", "denied by test rule");
    if (req.capability === "fail.crash") throw new Error("secret internal detail");
    if (req.capability === "keep-signal") kept = ctx.signal;
    if (req.capability === "subject") return { decision: Decision.ALLOW, matchedRule: "", reason: subjectTokenOf(ctx.call) ?? "(none)", policyVersion: 0n };
    if (req.capability === "slow") {
      await new Promise((resolve, reject) => {
        const t = setTimeout(resolve, 5_000);
        ctx.signal.addEventListener("abort", () => {
          clearTimeout(t);
          reject(new ChaosError("cancelled", "aborted"));
        });
      });
    }
    return {
      decision: Decision.ALLOW,
      matchedRule: `${ctx.call.tenant}/${ctx.call.principal}/${ctx.call.sessionId ?? "-"}`,
      reason: req.facts?.httpHost ?? "",
      policyVersion: 7n,
    };
  },
  async getPolicy() {
    return { document: { deniedCapabilities: ["x.y"] }, version: 3n, source: "test" };
  },
  async putPolicy(req) {
    return { version: BigInt(req.document?.deniedCapabilities.length ?? 0) };
  },
  async evaluateApprovalChannels() {
    return {};
  },
  async *watchPolicy(_req, ctx) {
    for (let v = 1n; v <= 3n; v++) {
      yield { version: v, document: create(PolicyDocumentSchema, { allowedCapabilities: [ctx.call.tenant] }) };
    }
  },
};

const KEY = "k".repeat(40);
const ctx: CallContext = { tenant: "acme", principal: "agent-1", sessionId: "s-1" };
const logger = createLogger("test", "silent");

let server: RunningGrpcServer;
let grpcClient: ReturnType<typeof createGrpcClient<typeof PolicyService>>;

beforeAll(async () => {
  server = await startGrpcServer({
    host: "127.0.0.1",
    port: 0,
    signer: new ContextSigner(KEY),
    registrations: [register(PolicyService, impl)],
    logger,
  });
  grpcClient = createGrpcClient(PolicyService, `127.0.0.1:${server.port}`, new ContextSigner(KEY), {
    timeoutMs: 2_000,
  });
});

afterAll(async () => {
  grpcClient.close();
  await server.shutdown(1_000);
});

const transports: Array<[string, () => ServiceClient<typeof PolicyService>]> = [
  ["in-process", () => createInProcessClient(PolicyService, impl, { timeoutMs: 2_000 })],
  ["grpc", () => grpcClient.client],
  [
    "deferred, once ready",
    () => createDeferredClient(PolicyService, Promise.resolve(createInProcessClient(PolicyService, impl, { timeoutMs: 2_000 }))),
  ],
];

describe.each(transports)("%s transport", (_name, client) => {
  it("carries the request and the call context to the handler", async () => {
    const res = await client().evaluate({ capability: "a.b", facts: { httpHost: "example.com" } }, { ctx });
    expect(res.decision).toBe(Decision.ALLOW);
    expect(res.matchedRule).toBe("acme/agent-1/s-1");
    expect(res.reason).toBe("example.com");
    expect(res.policyVersion).toBe(7n);
  });

  it("streams every message of a server-streaming call in order", async () => {
    const versions: bigint[] = [];
    for await (const msg of client().watchPolicy({}, { ctx })) {
      versions.push(msg.version);
      expect(msg.document?.allowedCapabilities).toEqual(["acme"]);
    }
    expect(versions).toEqual([1n, 2n, 3n]);
  });

  it("keeps a domain error's stable code", async () => {
    const err = await client()
      .evaluate({ capability: "fail.denied" }, { ctx })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ChaosError);
    expect((err as ChaosError).code).toBe("policy_denied");
    expect((err as ChaosError).message).toBe("denied by test rule");
  });

  it("turns an unexpected error into `internal` without leaking its message", async () => {
    const err = (await client()
      .evaluate({ capability: "fail.crash" }, { ctx })
      .catch((e: unknown) => e)) as ChaosError;
    expect(err.code).toBe("internal");
    expect(err.message).not.toContain("secret");
  });

  it("enforces the deadline", async () => {
    const err = (await client()
      .evaluate({ capability: "slow" }, { ctx, timeoutMs: 100 })
      .catch((e: unknown) => e)) as ChaosError;
    expect(err.code).toBe("deadline_exceeded");
  });

  it("leaves a handler's signal alone once the call has answered", async () => {
    kept = undefined;
    await client().evaluate({ capability: "keep-signal" }, { ctx });
    await new Promise((r) => setTimeout(r, 50));
    expect(kept).toBeDefined();
    expect(kept!.aborted).toBe(false);
  });

  it("cancels a call when the caller's signal aborts", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const err = (await client()
      .evaluate({ capability: "slow" }, { ctx, signal: controller.signal, timeoutMs: 5_000 })
      .catch((e: unknown) => e)) as ChaosError;
    expect(err.code).toBe("cancelled");
  });

  it("rejects a malformed tenant id before any handler runs", async () => {
    const bad = { ...ctx, tenant: "../etc" };
    const err = (await client()
      .evaluate({ capability: "a.b" }, { ctx: bad })
      .catch((e: unknown) => e)) as ChaosError;
    expect(["invalid_argument", "unauthenticated"]).toContain(err.code);
  });
});

describe("a deferred client while its service is still starting", () => {
  function starting(options: { startTimeoutMs?: number } = {}) {
    let resolve!: (c: ServiceClient<typeof PolicyService>) => void;
    let reject!: (err: unknown) => void;
    const pending = new Promise<ServiceClient<typeof PolicyService>>((res, rej) => ((resolve = res), (reject = rej)));
    return { client: createDeferredClient(PolicyService, pending, options), resolve, reject };
  }

  it("holds unary and streaming calls until the service is there, then answers them", async () => {
    const s = starting();
    const unary = s.client.evaluate({ capability: "a.b" }, { ctx });
    const streamed = (async () => {
      const versions: bigint[] = [];
      for await (const msg of s.client.watchPolicy({}, { ctx })) versions.push(msg.version);
      return versions;
    })();
    let settled = false;
    void unary.finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(settled).toBe(false);
    s.resolve(createInProcessClient(PolicyService, impl));
    expect((await unary).matchedRule).toBe("acme/agent-1/s-1");
    expect(await streamed).toEqual([1n, 2n, 3n]);
  });

  it("fails waiting and later calls with the error the start-up failed with", async () => {
    const s = starting();
    const waiting = s.client.getPolicy({}, { ctx }).catch((e: unknown) => e);
    s.reject(new ChaosError("unavailable", "the stores did not open: corrupt database"));
    const later = await s.client.getPolicy({}, { ctx }).catch((e: unknown) => e);
    for (const err of [await waiting, later]) {
      expect(err).toBeInstanceOf(ChaosError);
      expect((err as ChaosError).code).toBe("unavailable");
      expect((err as ChaosError).message).toContain("corrupt database");
    }
  });

  it("lets a call on the default deadline wait for the start up to the start bound, not its deadline", async () => {
    const s = starting({ startTimeoutMs: 400 });
    const answered = s.client.evaluate({ capability: "a.b" }, { ctx });
    setTimeout(() => s.resolve(createInProcessClient(PolicyService, impl)), 120);
    expect((await answered).matchedRule).toBe("acme/agent-1/s-1");

    const never = starting({ startTimeoutMs: 100 });
    const started = performance.now();
    const err = (await never.client.getPolicy({}, { ctx }).catch((e: unknown) => e)) as ChaosError;
    expect(performance.now() - started).toBeGreaterThanOrEqual(90);
    expect(err.code).toBe("unavailable");
    expect(err.message).toMatch(/did not finish starting within/);
  });

  it("counts the wait against a deadline the call names and honours cancellation", async () => {
    const s = starting();
    const late = (await s.client.getPolicy({}, { ctx, timeoutMs: 50 }).catch((e: unknown) => e)) as ChaosError;
    expect(late.code).toBe("deadline_exceeded");
    expect(late.message).toMatch(/still starting/);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    const cancelled = (await s.client
      .getPolicy({}, { ctx, signal: controller.signal })
      .catch((e: unknown) => e)) as ChaosError;
    expect(cancelled.code).toBe("cancelled");
  });
});

describe("a subject token beside the call context (docs/federation-platform.md §3)", () => {
  const withToken = withSubjectToken(ctx, "the-callers-access-token");

  it("reaches the handler in one process, and over gRPC only from a client that forwards it", async () => {
    const reason = async (c: ServiceClient<typeof PolicyService>) => (await c.evaluate({ capability: "subject" }, { ctx: withToken })).reason;
    expect(await reason(createInProcessClient(PolicyService, impl, { timeoutMs: 2_000 }))).toBe("the-callers-access-token");
    // The default client (policy, memory, ledger, council) sends none.
    expect(await reason(grpcClient.client)).toBe("(none)");
    const forwarding = createGrpcClient(PolicyService, `127.0.0.1:${server.port}`, new ContextSigner(KEY), { timeoutMs: 2_000, forwardSubjectToken: true });
    try {
      expect(await reason(forwarding.client)).toBe("the-callers-access-token");
      expect((await forwarding.client.evaluate({ capability: "subject" }, { ctx })).reason).toBe("(none)");
    } finally {
      forwarding.close();
    }
    // Never a field of the context: what is logged or recorded of it does not hold it.
    expect(JSON.stringify(withToken)).not.toContain("the-callers-access-token");
  });

  it("refuses a token added to, or swapped on, a signed call", async () => {
    const call = async (token: string, signedWith?: string) => {
      const raw = new Client(`127.0.0.1:${server.port}`, credentials.createInsecure());
      const def = grpcServiceDefinition(PolicyService)["getPolicy"]!;
      const signed = new ContextSigner(KEY).sign(ctx, Date.now(), signedWith);
      const md = new Metadata();
      md.set(CONTEXT_HEADER, signed.context);
      md.set(CONTEXT_SIG_HEADER, signed.signature);
      md.set(SUBJECT_TOKEN_HEADER, token);
      const err = await new Promise<unknown>((resolve) => raw.makeUnaryRequest(def.path, def.requestSerialize, def.responseDeserialize, {}, md, (e) => resolve(e)));
      raw.close();
      return err ? ChaosError.from(err) : undefined;
    };
    expect(await call("someone-elses-token")).toMatchObject({ code: "unauthenticated", message: expect.stringContaining("not the one its signed context names") });
    expect(await call("someone-elses-token", "the-callers-access-token")).toMatchObject({ code: "unauthenticated" });
    expect(await call("the-callers-access-token", "the-callers-access-token")).toBeUndefined();
  });
});

describe("gRPC server", () => {
  it("refuses a call whose context is signed with another key", async () => {
    const other = createGrpcClient(PolicyService, `127.0.0.1:${server.port}`, new ContextSigner("z".repeat(40)));
    const err = (await other.client.getPolicy({}, { ctx }).catch((e: unknown) => e)) as ChaosError;
    other.close();
    expect(err.code).toBe("unauthenticated");
  });

  it("refuses a call that carries no context at all", async () => {
    const raw = new Client(`127.0.0.1:${server.port}`, credentials.createInsecure());
    const def = grpcServiceDefinition(PolicyService)["getPolicy"]!;
    const err = await new Promise<unknown>((resolve) =>
      raw.makeUnaryRequest(def.path, def.requestSerialize, def.responseDeserialize, {}, new Metadata(), (e) =>
        resolve(e),
      ),
    );
    raw.close();
    expect(ChaosError.from(err).code).toBe("unauthenticated");
  });

  it("refuses a context signed with the right key but too long ago (a replayed one)", async () => {
    const raw = new Client(`127.0.0.1:${server.port}`, credentials.createInsecure());
    const def = grpcServiceDefinition(PolicyService)["getPolicy"]!;
    const old = new ContextSigner(KEY).sign(ctx, Date.now() - 6 * 60_000);
    const md = new Metadata();
    md.set(CONTEXT_HEADER, old.context);
    md.set(CONTEXT_SIG_HEADER, old.signature);
    const err = await new Promise<unknown>((resolve) =>
      raw.makeUnaryRequest(def.path, def.requestSerialize, def.responseDeserialize, {}, md, (e) => resolve(e)),
    );
    raw.close();
    expect(ChaosError.from(err)).toMatchObject({ code: "unauthenticated", message: expect.stringContaining("the call context has expired") });
  });

  it("rotates the key without a refused call: accept the next key, sign with it, drop the old", async () => {
    const OLD = "o".repeat(40);
    const NEXT = "n".repeat(40);
    const started: RunningGrpcServer[] = [];
    const clients: Array<{ close(): void }> = [];
    // Each step, every pairing a rolling update can meet: a replica of the step before calling one of this step, and back.
    const steps = [
      { name: "before", sign: OLD, accepted: [] as string[] },
      { name: "accept the next", sign: OLD, accepted: [NEXT] },
      { name: "sign with the next", sign: NEXT, accepted: [OLD] },
      { name: "after", sign: NEXT, accepted: [] as string[] },
    ];
    const replicas = await Promise.all(
      steps.map(async (step) => {
        const srv = await startGrpcServer({ host: "127.0.0.1", port: 0, signer: new ContextSigner(step.sign, step.accepted), registrations: [register(PolicyService, impl)], logger });
        started.push(srv);
        return { ...step, port: srv.port };
      }),
    );
    const call = async (from: (typeof replicas)[number], to: (typeof replicas)[number]) => {
      const c = createGrpcClient(PolicyService, `127.0.0.1:${to.port}`, new ContextSigner(from.sign, from.accepted), { timeoutMs: 2_000 });
      clients.push(c);
      return c.client.getPolicy({}, { ctx }).then(
        () => "ok",
        (e: unknown) => ChaosError.from(e).code,
      );
    };
    try {
      for (let i = 1; i < replicas.length; i++) {
        const [a, b] = [replicas[i - 1]!, replicas[i]!];
        expect([await call(a, b), await call(b, a)], `${a.name} ↔ ${b.name}`).toEqual(["ok", "ok"]);
      }
      // Skipping the middle step is what refuses: the first and last share no key.
      expect(await call(replicas[0]!, replicas[3]!)).toBe("unauthenticated");
      expect(await call(replicas[3]!, replicas[0]!)).toBe("unauthenticated");
    } finally {
      for (const c of clients) c.close();
      await Promise.all(started.map((srv) => srv.shutdown(0)));
    }
  });

  it("answers grpc.health.v1 SERVING for the server and each service", async () => {
    await expect(checkGrpcHealth(`127.0.0.1:${server.port}`)).resolves.toBe("SERVING");
    await expect(checkGrpcHealth(`127.0.0.1:${server.port}`, "chaoscore.policy.v1.PolicyService")).resolves.toBe(
      "SERVING",
    );
  });

  it("lists its services through server reflection", async () => {
    const protoPath = createRequire(import.meta.url).resolve(
      "@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto",
    );
    const pkg = loadPackageDefinition(loadSync(protoPath, { keepCase: true })) as unknown as {
      grpc: { reflection: { v1: GrpcObject & { ServerReflection: new (a: string, c: unknown) => Client } } };
    };
    const client = new pkg.grpc.reflection.v1.ServerReflection(`127.0.0.1:${server.port}`, credentials.createInsecure());
    const stream = (client as unknown as { ServerReflectionInfo(): NodeJS.ReadWriteStream }).ServerReflectionInfo();
    const answer = new Promise<{ list_services_response: { service: Array<{ name: string }> } }>((resolve) =>
      stream.once("data", resolve),
    );
    stream.write({ list_services: "*" } as never);
    const names = (await answer).list_services_response.service.map((s) => s.name);
    stream.end();
    client.close();
    expect(names).toContain("chaoscore.policy.v1.PolicyService");
  });
});
