/**
 * ExecuteStream over both transports — in-process and a real gRPC server — against the real
 * policy and memory services: what a running step reports reaches the caller before the results,
 * which are Execute's (docs/federation.md §7).
 */
import { ContextSigner, createGrpcClient, createInProcessClient, createLogger, type CallContext, type GrpcClient, type RunningGrpcServer, type ServiceClient } from "@chaos-core/kit";
import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { CognitionService, type ExecuteResponse, type ExecuteStreamResponse } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { defineCapability } from "../capabilities/capability.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { createMemoryApprovalStore } from "../executor/approvals.js";
import { createInMemoryAuditSink } from "../executor/audit.js";
import { createMemoryPlanStore } from "../plans/memory-plan-store.js";
import { HeuristicProvider } from "../providers/heuristic.js";
import { startCognitionServer } from "../server.js";
import { expectChaosError } from "../test-support/expect-error.js";
import { createCognitionHandlers } from "./cognition-handlers.js";

type Client = ServiceClient<typeof CognitionService>;

const READ = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
/** Reports `count` lines while it runs, as an upstream tool's progress would reach it. */
const steps = defineCapability({
  name: "test.steps",
  description: "Reports a line per step.",
  risk: "low",
  inputSchema: z.object({ count: z.number().int().min(0) }),
  outputSchema: z.object({ done: z.number() }),
  annotations: READ,
  async handler(input, ctx) {
    for (let i = 1; i <= input.count; i++) {
      ctx.progress?.(`test: ${i}/${input.count}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    return { done: input.count };
  },
});
/** Tells whether the executor gave it a progress callback. */
const probe = defineCapability({
  name: "test.probe",
  description: "Says whether it may report progress.",
  risk: "low",
  inputSchema: z.object({}),
  outputSchema: z.object({ progress: z.boolean() }),
  annotations: READ,
  handler: (_input, ctx) => Promise.resolve({ progress: ctx.progress !== undefined }),
});

let services: RealServices;
let server: RunningGrpcServer;
let grpc: GrpcClient<typeof CognitionService>;
let inProcess: Client;

beforeAll(async () => {
  services = await startRealServices("chaoscore_execute_stream");
  const deps = {
    registry: createCapabilityRegistry([steps, probe]),
    provider: new HeuristicProvider(),
    policy: services.policy,
    memory: services.memory,
    plans: createMemoryPlanStore(),
    audit: createInMemoryAuditSink(),
    approvals: createMemoryApprovalStore(),
    logger: createLogger("cognition-test", "silent"),
    stepTimeoutMs: 5_000,
  };
  inProcess = createInProcessClient(CognitionService, createCognitionHandlers(deps));
  const signer = new ContextSigner("execute-stream-test-key-0123456789abcdef");
  server = await startCognitionServer({ host: "127.0.0.1", port: 0, signer, deps });
  grpc = createGrpcClient(CognitionService, `127.0.0.1:${server.port}`, signer);
});

afterAll(async () => {
  grpc?.close();
  await server?.shutdown(1000);
  await services?.close();
});

const as = (tenant: string): { ctx: CallContext } => ({ ctx: { tenant, principal: "agent", sessionId: "s" } });
const run = (capability: string, input: JsonObject) => ({ target: { case: "steps" as const, value: { steps: [{ id: "s1", capability, input }] } } });

async function events(client: Client, tenant: string, capability: string, input: JsonObject): Promise<ExecuteStreamResponse["event"][]> {
  const seen: ExecuteStreamResponse["event"][] = [];
  for await (const msg of client.executeStream({ execute: run(capability, input) }, as(tenant))) seen.push(msg.event);
  return seen;
}

describe.each([
  ["in-process", () => inProcess],
  ["gRPC", () => grpc.client],
])("ExecuteStream (%s)", (_name, client) => {
  it("streams each line a running step reports, naming the step, then the results last", async () => {
    const seen = await events(client(), "stream-a", "test.steps", { count: 3 });
    expect(seen.slice(0, 3)).toEqual(
      [1, 2, 3].map((i) => ({ case: "progress", value: expect.objectContaining({ stepId: "s1", capability: "test.steps", message: `test: ${i}/3` }) as unknown })),
    );
    expect(seen).toHaveLength(4);
    const last = seen[3];
    expect(last?.case).toBe("result");
    if (last?.case !== "result") return;
    expect(last.value.results).toEqual([expect.objectContaining({ stepId: "s1", status: "executed", ran: true })]);
  });

  it("gives a handler a progress callback only on ExecuteStream", async () => {
    const streamed = await events(client(), "stream-b", "test.probe", {});
    expect(streamed.map((e) => e.case)).toEqual(["result"]);
    const out = (r: ExecuteResponse) => toJson(ValueSchema, r.results[0]!.output!);
    if (streamed[0]?.case === "result") expect(out(streamed[0].value)).toEqual({ progress: true });
    expect(out(await client().execute(run("test.probe", {}), as("stream-b")))).toEqual({ progress: false });
  });

  it("refuses a request that names nothing to run", async () => {
    const drain = async () => {
      for await (const _ of client().executeStream({}, as("stream-c"))) void _;
    };
    await expectChaosError(drain(), "invalid_argument");
  });
});
