/**
 * kill -9 during a burst on the embedded default (issue 14; docs/ledger.md "Known limits"): a
 * `chaos-core serve` on its data directory takes governed writes (`chaoscore_remember`, a
 * decision and an outcome entry each) from eight concurrent MCP clients and is killed with
 * SIGKILL while calls are in flight. Every call it acknowledged has its outcome entry in the
 * ledger, naming the exact input it ran on, and its item in memory; the chain and the signed
 * checkpoints verify with the public key, before and after the server runs again. Right after
 * the kill the dead server's lock still looks held: the operator's command and the restarted
 * server both see that the pid in `admin.json` is gone and wait for the lock to go stale
 * (≤ 10 s) instead of refusing the directory as "in use".
 */
import { contentHash } from "@chaos-core/kit";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";

const CLIENTS = 8;
/** Acknowledged calls before the kill: enough that several group commits were in flight. */
const ACKED_BEFORE_KILL = 120;

interface LedgerLine {
  type: string;
  seq?: number;
  event?: { type: string; capability?: string; status?: string; argsHash?: string };
}

function exportedEntries(jsonl: string): LedgerLine[] {
  return jsonl
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as LedgerLine)
    .filter((l) => l.type === "entry");
}

describe("ledger on the embedded store: kill -9 during a burst of governed writes", () => {
  const dataDir = tempDir("chaos-core-crash-embedded-");
  const env = { CHAOS_CORE_DATA_DIR: dataDir };
  let server: ServeProcess | undefined;
  afterAll(async () => {
    await server?.stop();
    removeDir(dataDir);
  });

  it("keeps every acknowledged call's entries and items, and the log verifies", async () => {
    await seedDataDir(dataDir);
    server = await startServe(env);
    const clients: Client[] = [];
    for (let i = 0; i < CLIENTS; i++) clients.push(await httpClient(server.url));

    const acked: { key: string; value: { client: number; i: number } }[] = [];
    let killed = false;
    // Calls in flight at the kill get no answer: the client would wait for its request timeout.
    const inFlight = new AbortController();
    const burst = clients.map(async (client, c) => {
      for (let i = 0; !killed; i++) {
        const call = { key: `crash/${c}/${i}`, value: { client: c, i } };
        try {
          const res = await client.callTool({ name: "chaoscore_remember", arguments: call }, undefined, { signal: inFlight.signal });
          if (res.isError) throw new Error(`remember failed: ${JSON.stringify(res.content)}`);
          acked.push(call);
        } catch (err) {
          if (killed) return; // in flight when the process died: not acknowledged
          throw err;
        }
        if (acked.length >= ACKED_BEFORE_KILL && !killed) {
          killed = true;
          server!.proc.kill("SIGKILL");
          inFlight.abort();
        }
      }
    });
    await Promise.all(burst);
    await new Promise((r) => server!.proc.exitCode !== null || server!.proc.signalCode !== null ? r(undefined) : server!.proc.once("exit", r));
    expect(server.proc.signalCode).toBe("SIGKILL");
    for (const client of clients) await client.close().catch(() => undefined);

    // With the server dead the command opens the directory itself: the log as the crash left it.
    const verified = await runToExit(["ledger", "verify", "--json"], env);
    expect(verified.code, verified.stderr).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, tenant: "default" });
    const exported = await runToExit(["ledger", "export"], env);
    expect(exported.code, exported.stderr).toBe(0);
    const outcomes = new Set(
      exportedEntries(exported.stdout)
        .filter((e) => e.event?.type === "step.outcome" && e.event.capability === "memory.remember" && e.event.status === "executed")
        .map((e) => e.event!.argsHash),
    );
    const missing = acked.filter((call) => !outcomes.has(contentHash(call)));
    expect(missing, "acknowledged calls without an outcome entry").toEqual([]);

    // Running again on the same directory: every acknowledged item is there, and once the
    // integrator has signed what the dead process sequenced, the log verifies with nothing pending.
    server = await startServe(env);
    const reader = await httpClient(server.url);
    for (const call of acked) {
      const res = await reader.callTool({ name: "chaoscore_recall", arguments: { key: call.key } });
      expect(res.isError, call.key).toBeFalsy();
      expect(JSON.stringify(res.structuredContent ?? res.content), call.key).toContain(JSON.stringify(call.value));
    }
    await reader.close();
    const live = await runToExit(["ledger", "verify", "--json"], env);
    expect(live.code, live.stderr).toBe(0);
    expect(JSON.parse(live.stdout)).toMatchObject({ ok: true, pending: 0 });
  });
});
