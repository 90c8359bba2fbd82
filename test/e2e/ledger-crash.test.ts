/**
 * Sequence, then integrate, survives a crash (issue 14): the ledger main is killed with SIGKILL
 * in the middle of a burst of appends from 64 concurrent callers over gRPC, on real Postgres.
 * Entries it acknowledged may not yet be in any signed checkpoint — the integrator signs them in
 * batches — but each one's entry and chain link were committed before its answer left. After a
 * restart every acknowledged entry is there with the sig it was acknowledged with, the chain
 * verifies, and once the restarted ledger's integrator has caught up (its start-up sweep finds
 * the log the dead one left) signed checkpoints cover every entry and verify with the public key.
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { ContextSigner, createGrpcClient, createPostgresDb } from "@chaos-core/kit";
import { createLedgerReader, verifyStoredLedger } from "@chaos-core/ledger";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { startServiceMain, stopProcess, type ServiceMain } from "../support/processes.js";

/** Polls `check` until it returns true (the integrator's timer decides when; this only waits for it). */
async function eventually(what: string, check: () => Promise<boolean>, limitMs = 40_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("ledger: kill -9 during a burst of appends", () => {
  let db: TestDatabase;
  let keys: LedgerKeys;
  const key = randomBytes(32).toString("hex");
  const procs: ChildProcess[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_ledger_crash");
    keys = await createLedgerKeys();
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key };
    const policy = await startServiceMain("policy", common);
    procs.push(policy.proc);
    env = { ...common, ...keys.env, POLICY_ADDR: policy.address };
  }, 120_000);

  afterAll(async () => {
    for (const p of procs) await stopProcess(p);
    await keys?.remove();
    await db?.drop();
  });

  it("keeps every acknowledged entry; after a restart the chain and the signed checkpoints verify", async () => {
    const tenant = "crash";
    const ctx = { ctx: { tenant, principal: "burst@crash" } };
    const first: ServiceMain = await startServiceMain("ledger", env);
    procs.push(first.proc);
    const client = createGrpcClient(LedgerService, first.address, new ContextSigner(key), { timeoutMs: 10_000 });
    const acked = new Map<number, string>();
    let failed = 0;
    let stop = false;
    const exited = new Promise<void>((resolve) => first.proc.once("exit", () => resolve()));
    const writers = Array.from({ length: 64 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        try {
          const res = await client.client.append({ event: { type: "test.burst", writer: w, i } }, ctx);
          acked.set(Number(res.entry!.seq), res.entry!.sig);
        } catch {
          // The process died under this call: not acknowledged, so it promises nothing.
          failed++;
          return;
        }
      }
    });
    // Kill it mid-burst, once enough has been acknowledged that the integrator is behind or busy.
    await eventually("a few hundred acknowledged appends", async () => acked.size >= 600, 60_000);
    first.proc.kill("SIGKILL");
    await exited;
    stop = true;
    await Promise.all(writers);
    client.close();
    expect(failed).toBeGreaterThan(0); // appends were in flight when it died

    const direct = createPostgresDb({ connectionString: db.url });
    try {
      const reader = createLedgerReader(direct, { name: "chaos-core/ledger/{tenant}" });
      // Every acknowledged entry is there, with the sig it was acknowledged with.
      const stored = new Map<number, string>();
      for (let after = 0; ; ) {
        const page = await reader.list(tenant, { afterSeq: after, limit: 1000 });
        for (const e of page) stored.set(e.seq, e.sig);
        if (page.length < 1000) break;
        after = page[page.length - 1]!.seq;
      }
      for (const [seq, sig] of acked) expect(stored.get(seq), `entry ${seq}`).toBe(sig);
      expect(stored.size).toBeGreaterThanOrEqual(acked.size);

      // Restart: the new process's integrator catches up on the log the dead one left.
      const second = await startServiceMain("ledger", env);
      procs.push(second.proc);
      await eventually("the restarted ledger integrates every entry", async () => {
        const cp = await reader.latestCheckpoint(tenant);
        return cp !== null && cp.size === stored.size;
      });
      const again = createGrpcClient(LedgerService, second.address, new ContextSigner(key), { timeoutMs: 30_000 });
      try {
        const { checkpoint } = await again.client.getCheckpoint({}, ctx);
        // With only the public key, read straight from the database: nothing pending, all signed.
        const report = await verifyStoredLedger(reader, tenant, checkpoint!.verifierKey);
        expect(report).toMatchObject({ ok: true, entries: stored.size, verifiedSize: stored.size });
        // And the service's own check agrees; appends go on after the crash.
        await expect(again.client.verifyChain({}, ctx)).resolves.toMatchObject({ ok: true, entries: BigInt(stored.size) });
        const next = await again.client.append({ event: { type: "test.after" } }, ctx);
        expect(Number(next.entry!.seq)).toBe(stored.size + 1);
        const proof = await again.client.getInclusionProof({ seq: next.entry!.seq }, ctx);
        expect(Number(proof.treeSize)).toBeGreaterThanOrEqual(stored.size + 1);
      } finally {
        again.close();
      }
    } finally {
      await direct.close();
    }
  }, 180_000);
});
