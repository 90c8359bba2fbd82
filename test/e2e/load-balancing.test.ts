/**
 * Cognition scaled out, and a service that goes away and comes back, in the chart's shape: every
 * service its own built main on the machine's Postgres, the edge reaching cognition through ONE
 * target that lists two cognition processes (`ipv4:127.0.0.1:P1,127.0.0.1:P2`, what a headless
 * Service's `dns:///` name resolves to in a cluster), driven by a real MCP client.
 *
 * Which replica answered a call is visible in the answer: the two cognition processes run the
 * openai-compatible provider with different model names ("replica-a", "replica-b"), which
 * `chaoscore_inspect {what: "providers"}` reports (DescribeProvider never calls the model, so the
 * base URL points nowhere). Nothing here waits a fixed time: each "eventually" polls with a
 * generous deadline. Needs `npm run build` (it starts each service's dist/main.js).
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createMrtrKeys, type MrtrKeys } from "../support/mrtr-keys.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { httpClient, startServiceMain, startServiceMains, stopProcess, type ServiceMain } from "../support/processes.js";

type ToolResult = Awaited<ReturnType<Client["callTool"]>>;

/** What one call came back with: the replica that answered, or the error's code and message. */
type Outcome = { replica: string } | { code: string; message: string };

function outcome(res: ToolResult): Outcome {
  if (res.isError) {
    const error = (res.structuredContent as { error?: { code: string; message: string } } | undefined)?.error;
    return { code: error?.code ?? "no code", message: error?.message ?? JSON.stringify(res.content) };
  }
  return { replica: (res.structuredContent as { provider: { model: string } }).provider.model };
}

const isReplica = (o: Outcome, name: string) => "replica" in o && o.replica === name;

function summary(outcomes: Outcome[]): string {
  const counts = new Map<string, number>();
  for (const o of outcomes) {
    const key = "replica" in o ? o.replica : `${o.code}: ${o.message}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([k, n]) => `${k} ×${n}`).join("; ");
}

/** Polls `attempt` until `done` holds for what it returned; fails with what it saw after `timeoutMs`. */
async function eventually<T>(attempt: () => Promise<T>, done: (seen: T[]) => boolean, what: string, show: (seen: T[]) => string, timeoutMs = 60_000) {
  const seen: T[] = [];
  const deadline = Date.now() + timeoutMs;
  while (!done(seen)) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms; saw ${show(seen)}`);
    seen.push(await attempt());
    await new Promise((r) => setTimeout(r, 25));
  }
  return seen;
}

describe("cognition behind one round-robin target, and a service restarted under a running edge", () => {
  let db: TestDatabase;
  let keys: LedgerKeys;
  let mrtrKeys: MrtrKeys;
  const procs: ChildProcess[] = [];
  let key: string;
  let memory: ServiceMain;
  let memoryPort: string;
  let cognitionEnv: Record<string, string>;
  let replicaA: ServiceMain;
  let portA: string;
  let edge: ServiceMain;
  let client: Client;

  const providers = async (): Promise<Outcome> => outcome(await client.callTool({ name: "chaoscore_inspect", arguments: { what: "providers" } }));

  const startCognition = async (model: string, port = "0") => {
    const started = await startServiceMain("cognition", { ...cognitionEnv, OPENAI_MODEL: model, PORT: port });
    procs.push(started.proc);
    return started;
  };

  const startMemory = async (port = "0") => {
    const started = await startServiceMain("memory", { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key, PORT: port });
    procs.push(started.proc);
    return started;
  };

  const kill = async (proc: ChildProcess) => {
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    proc.kill("SIGKILL");
    await exited;
  };

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_load_balancing");
    key = randomBytes(32).toString("hex");
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key };
    keys = await createLedgerKeys();
    // As startMemory() starts it: the test restarts it later on the port it took here.
    const [policy, firstMemory, council] = await startServiceMains(procs, [
      ["policy", common],
      ["memory", { ...common, PORT: "0" }],
      ["council", common],
    ]);
    memory = firstMemory;
    memoryPort = memory.address.split(":")[1]!;
    const ledger = await startServiceMain("ledger", { ...common, ...keys.env, POLICY_ADDR: policy.address });
    procs.push(ledger.proc);
    cognitionEnv = {
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      LEDGER_ADDR: ledger.address,
      CHAOS_CORE_PROVIDER: "openai-compatible",
      // Never reached: DescribeProvider reports the configuration without calling the model.
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
    };
    const [a, replicaB] = await startServiceMains(procs, [
      ["cognition", { ...cognitionEnv, OPENAI_MODEL: "replica-a", PORT: "0" }],
      ["cognition", { ...cognitionEnv, OPENAI_MODEL: "replica-b", PORT: "0" }],
    ]);
    replicaA = a;
    portA = replicaA.address.split(":")[1]!;
    mrtrKeys = await createMrtrKeys();
    edge = await startServiceMain("edge", {
      ...mrtrKeys.env,
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      COGNITION_ADDR: `ipv4:${replicaA.address},${replicaB.address}`,
      COUNCIL_ADDR: council.address,
      LEDGER_ADDR: ledger.address,
    });
    procs.push(edge.proc);
    client = await httpClient(edge.address);
  }, 180_000);

  afterAll(async () => {
    await client?.close();
    for (const p of procs.reverse()) await stopProcess(p);
    await db?.drop();
    await keys?.remove();
    await mrtrKeys?.remove();
  });

  it("spreads the edge's calls to cognition over both processes behind the one target", async () => {
    const seen: Outcome[] = [];
    for (let i = 0; i < 20; i++) seen.push(await providers());
    expect(seen.filter((o) => !("replica" in o)), summary(seen)).toEqual([]);
    expect(seen.filter((o) => isReplica(o, "replica-a")).length, summary(seen)).toBeGreaterThan(0);
    expect(seen.filter((o) => isReplica(o, "replica-b")).length, summary(seen)).toBeGreaterThan(0);
  });

  it("keeps serving on the other when one cognition process is killed mid-run; a call it drops fails `unavailable`, naming cognition", async () => {
    // Four callers keep calling while replica A is killed under them.
    const during: Outcome[] = [];
    let stop = false;
    const callers = Array.from({ length: 4 }, async () => {
      while (!stop) during.push(await providers());
    });
    await eventually(async () => during.length, () => during.some((o) => isReplica(o, "replica-a")), "a call on replica A", () => summary(during));
    await kill(replicaA.proc);
    const atKill = during.length;
    // After the kill, calls go on, and end up all on B (calls A had in flight may fail first).
    await eventually(
      async () => during.length,
      () => {
        const after = during.slice(atKill);
        return after.length >= 20 && after.slice(-10).every((o) => isReplica(o, "replica-b"));
      },
      "ten calls in a row on replica B after the kill",
      () => summary(during.slice(atKill)),
    );
    stop = true;
    await Promise.all(callers);

    const failures = during.filter((o): o is { code: string; message: string } => !("replica" in o));
    for (const f of failures) {
      expect(f.code, summary(during)).toBe("unavailable");
      expect(f.message).toMatch(/^the cognition service is unreachable: /);
    }
    // Nothing came from A once it was gone, beyond what it had answered before the edge saw the connection close.
    expect(during.slice(atKill).filter((o) => !isReplica(o, "replica-b") && !("code" in o)).length, summary(during.slice(atKill))).toBeLessThanOrEqual(4);
    expect(edge.proc.exitCode).toBeNull();
  });

  it("gives a cognition process restarted on its port calls again, without restarting the edge", async () => {
    const edgePid = edge.proc.pid;
    replicaA = await startCognition("replica-a", portA);
    const seen = await eventually(providers, (s) => s.some((o) => isReplica(o, "replica-a")), "a call on the restarted replica A", summary);
    // While it came back, every call was still answered (by B).
    expect(seen.filter((o) => !("replica" in o)), summary(seen)).toEqual([]);
    // And both share the calls again.
    const after: Outcome[] = [];
    for (let i = 0; i < 10; i++) after.push(await providers());
    expect(after.some((o) => isReplica(o, "replica-a")) && after.some((o) => isReplica(o, "replica-b")), summary(after)).toBe(true);
    expect(edge.proc.pid).toBe(edgePid);
    expect(edge.proc.exitCode).toBeNull();
  });

  // chaoscore_recall runs memory.recall through cognition's executor: the memory service sits
  // behind two callers here (cognition, and the edge's own client for readiness).
  it("fails calls with a clear `unavailable` while memory is down, and serves them again once it is back, without restarting a caller", async () => {
    const edgePid = edge.proc.pid;
    const base = edge.address.replace(/\/mcp$/, "");
    const wrote = await client.callTool({ name: "chaoscore_remember", arguments: { key: "window", value: "friday" } });
    expect(wrote.isError, JSON.stringify(wrote.content)).toBeFalsy();

    await kill(memory.proc);
    const during: Outcome[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await client.callTool({ name: "chaoscore_recall", arguments: { key: "window" } });
      during.push(res.isError ? outcome(res) : { replica: "answered" });
    }
    for (const o of during) {
      expect(o, summary(during)).toMatchObject({ code: "unavailable" });
      expect((o as { message: string }).message, summary(during)).toMatch(/^the memory service is unreachable: \S/);
    }
    // The first call may still meet the dying connection (read ECONNRESET); then nothing listens.
    expect((during.at(-1) as { message: string }).message).toMatch(/^the memory service is unreachable: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
    // The edge stays ready, naming memory (docs/operations.md "Readiness"): an outage behind it must not empty its Service.
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: "degraded", checks: { memory: { ok: false, error: "unavailable" }, policy: { ok: true } } });

    memory = await startMemory(memoryPort);
    const recalled = await eventually(
      async () => client.callTool({ name: "chaoscore_recall", arguments: { key: "window" } }),
      (s) => s.some((r) => !r.isError),
      "a recall after memory came back",
      (s) => summary(s.map((r) => (r.isError ? outcome(r) : { replica: "answered" }))),
    );
    const last = recalled.at(-1)!;
    // Until then each call failed the same clear way; now the value written before the outage is there.
    for (const r of recalled.slice(0, -1)) expect(outcome(r)).toMatchObject({ code: "unavailable" });
    expect((last.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value).toBe("friday");
    // The edge's own memory client (readiness, memory inspection) reconnects by itself too.
    await eventually(
      async () => ((await (await fetch(`${base}/readyz`)).json()) as { status: string }).status,
      (s) => s.at(-1) === "ready",
      "the edge ready again",
      (s) => s.join(","),
    );
    expect(edge.proc.pid).toBe(edgePid);
    expect(edge.proc.exitCode).toBeNull();
  });
});
