import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { userInfo } from "node:os";
import type { JsonObject } from "@bufbuild/protobuf";
import { entryDigest, type ContractSet } from "@chaos-core/contracts";
import type { UpstreamDrift, UpstreamDriftEvent } from "@chaos-core/cognition";
import { createPostgresDb, type CallContext, type Env, type Logger, type ServiceClient } from "@chaos-core/kit";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { adminRpcClient } from "./admin-rpc.js";
import { loadStandaloneConfig } from "./config.js";
import { accessDataDir } from "./data-dir-access.js";
import { openEmbeddedDb } from "./data-dir-layout.js";

// The audit trail of the operator's upstreams (docs/federation.md §4): what a serving process
// sees of them (`upstream.drift`) and what an operator changes in their pins (`upstream.approved`,
// `upstream.pinned`). Entries carry names, verdicts, sections and digests — never a declaration,
// whose headers and environment may resolve to secrets.

/** The operator's upstreams serve every tenant, so their entries go where the operator's own do: tenant `default`. */
export const UPSTREAMS_LEDGER_TENANT = "default";
/** The principal of what a serving process records on its own (a drift it saw), never a person's. */
export const UPSTREAMS_OBSERVER = "chaos-core";
/** The principal of an operator's change, as the admin endpoint records every operator call. */
const OPERATOR = "operator";

type LedgerClient = ServiceClient<typeof LedgerService>;

/** The `upstream.drift` entry of a change a serving process saw. */
export function driftEntry(e: UpstreamDriftEvent): JsonObject {
  return {
    type: "upstream.drift",
    upstream: e.upstream,
    tool: e.tool,
    state: e.state,
    ...(e.reason ? { reason: e.reason } : {}),
    ...(e.verdict ? { verdict: e.verdict } : {}),
    sections: [...e.sections],
    ...(e.pinnedDigest ? { pinned_digest: e.pinnedDigest } : {}),
    ...(e.liveDigest ? { live_digest: e.liveDigest } : {}),
  };
}

/** Waits between the attempts to record one change; then it is logged at error and dropped. */
const RETRY_MS = [1_000, 5_000, 30_000];

/**
 * Records each change the drift tracker tells (once per change in this process: drift.ts) in the
 * ledger, in order. The quarantine is in force whether or not its entry is written — it refuses
 * calls, it never allows one — so a ledger that cannot be written is retried, then logged at error
 * naming the change. `settled` resolves once what was told so far is written or given up.
 */
export function ledgerUpstreamDrift(drift: Pick<UpstreamDrift, "onEvent">, ledger: LedgerClient, logger: Logger): { settled(): Promise<void> } {
  const ctx: CallContext = { tenant: UPSTREAMS_LEDGER_TENANT, principal: UPSTREAMS_OBSERVER };
  let chain: Promise<void> = Promise.resolve();
  drift.onEvent((e) => {
    const event = driftEntry(e);
    chain = chain.then(async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          await ledger.append({ event }, { ctx });
          return;
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          const at = { upstream: e.upstream, tool: e.tool, state: e.state, err: message };
          if (attempt >= RETRY_MS.length) return logger.error(at, "the upstream drift could not be recorded in the audit ledger; giving up on this entry");
          logger.warn(at, "the upstream drift could not be recorded in the audit ledger yet; retrying");
          await new Promise((r) => setTimeout(r, RETRY_MS[attempt]).unref());
        }
      }
    });
  });
  return { settled: () => chain };
}

/** One tool whose pin an operator's command changes, as the entry records it. */
export interface PinChange {
  readonly tool: string;
  readonly change: "added" | "changed" | "removed";
  readonly digest?: string;
}

/** The tools whose pin differs between `before` and `after` (by contract digest), sorted by name. */
export function pinChanges(before: ContractSet | undefined, after: ContractSet | undefined): PinChange[] {
  const was = before?.tools ?? {};
  const now = after?.tools ?? {};
  const out: PinChange[] = [];
  for (const tool of [...new Set([...Object.keys(was), ...Object.keys(now)])].sort()) {
    const a = was[tool] ? entryDigest(was[tool]) : undefined;
    const b = now[tool] ? entryDigest(now[tool]) : undefined;
    if (a === b) continue;
    out.push(b === undefined ? { tool, change: "removed" } : { tool, change: a === undefined ? "added" : "changed", digest: b });
  }
  return out;
}

/** Who runs this command: the local OS user (the admin endpoint records every operator call as `operator`). */
export function localOperator(env: Env): string {
  try {
    return userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid).
    return env.USER || env.LOGNAME || `uid ${process.getuid?.() ?? "unknown"}`;
  }
}

/**
 * Appends an operator's changes to the ledger of the data directory this environment names, before
 * they take effect: through the running server's admin endpoint when one holds the directory (as
 * `chaos-core tenants` and `ledger export` reach it), else on the stores themselves while this
 * command holds the directory — the embedded database or Postgres (`DATABASE_URL`), signed with the
 * server's keyring, and with each entry's webhook event put in the outbox for the next server to
 * send. Resolves with the sequence numbers; rejects when the ledger cannot be written.
 */
export async function appendOperatorEntries(env: Env, events: readonly JsonObject[], dataDir: string, say: (line: string) => void): Promise<number[]> {
  if (events.length === 0) return [];
  const ctx: CallContext = { tenant: UPSTREAMS_LEDGER_TENANT, principal: OPERATOR };
  // A first `upstreams lock` may come before the first start: its pin is the ledger's first entry.
  if (!existsSync(dataDir)) await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const access = await accessDataDir(dataDir);
  if (access.running) {
    const ledger = adminRpcClient(LedgerService, access.admin);
    const seqs: number[] = [];
    for (const event of events) seqs.push(Number((await ledger.append({ event }, { ctx })).entry?.seq ?? 0));
    return seqs;
  }
  try {
    return await appendDirectly(env, events, dataDir, ctx, say);
  } finally {
    await access.release();
  }
}

async function appendDirectly(env: Env, events: readonly JsonObject[], dataDir: string, ctx: CallContext, say: (line: string) => void): Promise<number[]> {
  const { createLedgerStore, createWebhookOutbox, loadKeyring, loadOrCreateKeyring, migrateLedger } = await import("@chaos-core/ledger");
  const config = loadStandaloneConfig({ ...env, CHAOS_CORE_DATA_DIR: dataDir });
  const db = config.databaseUrl
    ? createPostgresDb({ connectionString: config.databaseUrl, max: 2, applicationName: "chaos-core-upstreams-cli" })
    : await openEmbeddedDb(dataDir, { create: true });
  try {
    await migrateLedger(db);
    // A first run generates the server's key here, and says so, as the server would.
    const keyring = config.ledgerKeysFile ? await loadKeyring(config.ledgerKeysFile) : await loadOrCreateKeyring(dataDir, { info: (_obj, msg) => say(msg) });
    const webhooks = config.webhooks;
    const outbox = webhooks ? createWebhookOutbox(db, webhooks.publicUrl !== undefined ? { publicUrl: webhooks.publicUrl } : {}) : undefined;
    // The server's signing key and checkpoint origin, so its log stays one verifiable chain.
    const store = createLedgerStore(db, {
      key: { name: `${config.ledgerOrigin}/{tenant}`, privateKey: keyring.active.privateKey, publicKey: keyring.active.publicKey },
      ...(outbox ? { batches: { inTransaction: (q, tenant, entries) => outbox.enqueue(q, tenant, entries), committed: () => {} } } : {}),
    });
    try {
      const seqs: number[] = [];
      for (const event of events) seqs.push((await store.append(ctx.tenant, { session: "", principal: ctx.principal, event })).seq);
      return seqs;
    } finally {
      await store.close();
    }
  } finally {
    await db.close();
  }
}
