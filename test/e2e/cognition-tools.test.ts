import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { seedDataDir } from "../support/data-dir-template.js";
import {
  allStarted,
  httpClient,
  removeDir,
  runToExit,
  startServe,
  stdioClient,
  tempDir,
  type ServeProcess,
} from "../support/processes.js";

// The cognition tools through real `chaos-core serve` and `chaos-core stdio` processes, with the
// heuristic provider (named explicitly, so an OPENAI_* variable in the shell cannot change it):
// no model, no network.

const OBJECTIVE = "remember that the deploy window is friday";
const HEURISTIC = { CHAOS_CORE_PROVIDER: "heuristic" };

interface StepResult {
  capability: string;
  status: string;
  decision: string;
  ran: boolean;
}

interface Trace {
  status: string;
  plans: Array<{ steps: Array<{ capability: string; input: Record<string, unknown> }> }>;
  results: StepResult[];
}

function ok<T>(res: unknown): T {
  const r = res as CallToolResult;
  expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
  return r.structuredContent as T;
}

async function achieve(client: Client, objective = OBJECTIVE): Promise<{ trace: Trace; stages: string[] }> {
  const stages: string[] = [];
  const res = await client.callTool({ name: "chaoscore_achieve", arguments: { objective } }, undefined, {
    onprogress: (p) => stages.push(p.message ?? ""),
  });
  return { trace: ok<Trace>(res), stages };
}

async function recall(client: Client, key: string): Promise<Array<{ key: string; value: unknown }>> {
  return ok<{ items: Array<{ key: string; value: unknown }> }>(
    await client.callTool({ name: "chaoscore_recall", arguments: { key } }),
  ).items;
}

/** One `serve` process and one `stdio` process, each on its own data directory. */
function bothTransports(policy?: Record<string, unknown>) {
  const dirs = [tempDir(), tempDir()];
  const state: { serve?: ServeProcess; http?: Client; stdio?: Client } = {};
  beforeAll(async () => {
    await Promise.all(dirs.map(seedDataDir));
    if (policy) for (const d of dirs) writeFileSync(join(d, "policy.json"), JSON.stringify(policy));
    await allStarted([
      startServe({ CHAOS_CORE_DATA_DIR: dirs[0], LOG_LEVEL: "info", ...HEURISTIC }).then(async (s) => {
        state.serve = s;
        state.http = await httpClient(s.url);
      }),
      stdioClient({ CHAOS_CORE_DATA_DIR: dirs[1], ...HEURISTIC }).then((s) => (state.stdio = s.client)),
    ]);
  });
  afterAll(async () => {
    await state.http?.close();
    await state.stdio?.close();
    await state.serve?.stop();
    dirs.forEach(removeDir);
  });
  const clients = () =>
    [
      ["http", state.http!],
      ["stdio", state.stdio!],
    ] as const;
  return Object.assign(clients, { serveStderr: () => state.serve!.stderr() });
}

describe("choosing the AI provider at start", () => {
  it("refuses a selected provider that is not configured, naming the variable", async () => {
    const dir = tempDir();
    try {
      const res = await runToExit(["stdio"], { CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_PROVIDER: "openai", OPENAI_API_KEY: "", OPENAI_MODEL: "" });
      expect(res.code).toBe(1);
      // Empty counts as unset.
      expect(res.stderr).toMatch(/OPENAI_API_KEY/);
      expect(res.stdout).toBe("");
    } finally {
      removeDir(dir);
    }
  });
});

describe("the cognition tools with the heuristic provider", () => {
  const clients = bothTransports();

  it("says at start which provider was chosen", () => {
    expect(clients.serveStderr()).toMatch(/"provider":"heuristic \(no model; set by CHAOS_CORE_PROVIDER\)"/);
  });

  it("are listed identically over both transports", async () => {
    const [[, http], [, stdio]] = clients();
    const [a, b] = await Promise.all([http.listTools(), stdio.listTools()]);
    expect(b.tools).toEqual(a.tools);
    expect(a.tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(["chaoscore_reason", "chaoscore_plan", "chaoscore_execute", "chaoscore_achieve"]),
    );
  });

  it("achieve remembers the objective's fact, recallable afterwards, with progress per stage", async () => {
    for (const [name, client] of clients()) {
      const { trace, stages } = await achieve(client);
      expect(trace.status, name).toBe("succeeded");
      expect(trace.results.map((r) => [r.capability, r.status])).toEqual([["memory.remember", "executed"]]);
      expect(stages.length, name).toBeGreaterThanOrEqual(4);
      const key = trace.plans[0]!.steps[0]!.input.key as string;
      const items = await recall(client, key);
      expect(items, name).toHaveLength(1);
      expect(JSON.stringify(items[0]!.value)).toMatch(/friday/);
    }
  });

  it("inspect lists five plannable capabilities and the internal memory.episode, and the heuristic provider, without a secret", async () => {
    for (const [name, client] of clients()) {
      const caps = ok<{ capabilities: Array<{ name: string; internal?: boolean }> }>(
        await client.callTool({ name: "chaoscore_inspect", arguments: { what: "capabilities" } }),
      );
      expect(caps.capabilities.filter((c) => !c.internal).map((c) => c.name).sort(), name).toEqual([
        "cognition.generate_text",
        "http.request",
        "memory.forget",
        "memory.recall",
        "memory.remember",
      ]);
      expect(caps.capabilities.filter((c) => c.internal).map((c) => c.name), name).toEqual(["memory.episode"]);
      const res = ok<{ provider: { id: string; model: string; configured: boolean } }>(
        await client.callTool({ name: "chaoscore_inspect", arguments: { what: "providers" } }),
      );
      expect(res.provider, name).toMatchObject({ id: "heuristic", model: "none", configured: true });
      expect(JSON.stringify(res)).not.toMatch(/key|secret|token/i);
    }
  });
});

describe("the cognition tools under a policy denying memory.remember", () => {
  const clients = bothTransports({ deniedCapabilities: ["memory.remember"] });

  it("achieve reports denied and writes nothing, on both transports", async () => {
    for (const [name, client] of clients()) {
      const { trace } = await achieve(client);
      expect(trace.status, name).toBe("denied");
      expect(trace.results[0], name).toMatchObject({ capability: "memory.remember", status: "denied", decision: "DENY", ran: false });
      expect(await recall(client, trace.plans[0]!.steps[0]!.input.key as string), name).toEqual([]);
    }
  });

  it("achieve stores no episode or procedure, says so, and the audit ledger shows the DENY, on both transports", async () => {
    for (const [name, client] of clients()) {
      const res = ok<Trace & { episode_key?: string; notes: string[]; bookkeeping: Array<Record<string, unknown>> }>(
        await client.callTool({ name: "chaoscore_achieve", arguments: { objective: "recall what I stored about the deploy window" } }),
      );
      // The run (memory.recall) is allowed; only its bookkeeping is a memory.remember write.
      expect(res.status, name).toBe("succeeded");
      expect(res.episode_key, name).toBeUndefined();
      expect(res.bookkeeping.map((w) => [w.kind, w.stored, w.decision, w.matched_rule]), name).toEqual([
        ["episode", false, "DENY", "memory.remember: deniedCapabilities"],
        ["procedure", false, "DENY", "memory.remember: deniedCapabilities"],
      ]);
      expect(res.notes, name).toContain("The episode was not stored: policy denied memory.remember (deniedCapabilities)");
      for (const query of ["episode:", "procedure:"]) {
        const found = ok<{ items: unknown[] }>(await client.callTool({ name: "chaoscore_recall", arguments: { query } }));
        expect(found.items, `${name} ${query}`).toEqual([]);
      }
      const audit = ok<{ entries: Array<{ event: Record<string, unknown> }> }>(
        await client.callTool({ name: "inspect_audit_ledger", arguments: { limit: 50 } }),
      );
      const denials = audit.entries.filter((e) => e.event.type === "step.decision" && e.event.capability === "memory.episode");
      expect(denials.length, name).toBeGreaterThanOrEqual(2);
      expect(denials[0]!.event, name).toMatchObject({
        verdict: {
          decision: "DENY",
          matchedRule: "memory.remember: deniedCapabilities",
          implied: [{ capability: "memory.remember", verdict: { decision: "DENY", matchedRule: "deniedCapabilities" } }],
        },
      });
    }
  });

  it("execute refuses a hand-written memory.episode step as internal, on both transports", async () => {
    for (const [name, client] of clients()) {
      const res = (await client.callTool({
        name: "chaoscore_execute",
        arguments: { steps: [{ id: "s1", capability: "memory.episode", input: { key: "episode:forged", value: 1, tags: [], ttl_seconds: 60 } }] },
      })) as CallToolResult;
      expect(res.isError, name).toBe(true);
      expect(JSON.stringify(res.content), name).toMatch(/invalid_argument: .*memory\.episode\\" is an internal capability/);
    }
  });

  it("execute with hand-written steps reports denied and writes nothing, on both transports", async () => {
    for (const [name, client] of clients()) {
      const res = ok<{ results: StepResult[] }>(
        await client.callTool({
          name: "chaoscore_execute",
          arguments: { steps: [{ id: "s1", capability: "memory.remember", input: { key: "deploy-window", value: "friday" } }] },
        }),
      );
      expect(res.results, name).toEqual([expect.objectContaining({ status: "denied", decision: "DENY", ran: false })]);
      expect(await recall(client, "deploy-window"), name).toEqual([]);
    }
  });
});
