import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { userInfo } from "node:os";
import type { JsonObject } from "@bufbuild/protobuf";
import { entryDigest, type ContractSet } from "@chaos-core/contracts";
import { UPSTREAMS_LEDGER_TENANT } from "@chaos-core/cognition";
import { createPostgresDb, type CallContext, type Env } from "@chaos-core/kit";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { adminRpcClient } from "./admin-rpc.js";
import { loadStandaloneConfig } from "./config.js";
import { accessDataDir } from "./data-dir-access.js";
import { openEmbeddedDb } from "./data-dir-layout.js";

// What an operator changes in the pins of the operator's upstreams (docs/federation.md §4:
// `upstream.approved`, `upstream.pinned`); what a serving process sees of them (`upstream.drift`)
// is recorded by cognition (upstreams/drift-ledger.ts). Entries carry names, verdicts, sections and
// digests — never a declaration, whose headers and environment may resolve to secrets.

/** The principal of an operator's change, as the admin endpoint records every operator call. */
const OPERATOR = "operator";

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
      ...(outbox
        ? {
            batches: { inTransaction: (q, tenant, entries) => outbox.enqueue(q, tenant, entries), committed: () => {} },
            ...(webhooks?.checkpoints ? { integration: { onCheckpoint: (q, tenant, checkpoint) => outbox.enqueueCheckpoint(q, tenant, checkpoint) } } : {}),
          }
        : {}),
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
