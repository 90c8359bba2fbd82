import { constants, existsSync } from "node:fs";
import { access } from "node:fs/promises";
import { dirname } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { diffContracts, entryDigest, formatDiff, upstreamToolEntryText, type ContractSet } from "@chaos-core/contracts";
import { overlayApprovals, UPSTREAMS_LEDGER_TENANT, type ApprovalOutcome, type UpstreamApprovalEntry } from "@chaos-core/cognition";
import { ChaosError, type CallContext, type Env } from "@chaos-core/kit";
import { resolveDataDir } from "./config.js";
import { openAdmin, type Admin, type WhereFlags } from "./tenant-admin-access.js";
import { appendOperatorEntries, localOperator, pinChanges } from "./upstreams-ledger.js";

// `chaos-core upstreams approve` where `upstreams.lock` cannot be written (a read-only mount: the
// chart's ConfigMap; docs/federation.md §4): the approval is recorded in the tenant registry as an
// overlay (UpstreamApprovalService), which every serving process merges over the lock's pins
// until the lock is updated.

/** The errors that say a file cannot be written here: a read-only filesystem, or no permission. */
const READ_ONLY_CODES = new Set(["EROFS", "EACCES", "EPERM"]);

/** Whether `err` is a write refused for one of {@link READ_ONLY_CODES}. */
export function isReadOnlyError(err: unknown): boolean {
  return READ_ONLY_CODES.has(String((err as NodeJS.ErrnoException | undefined)?.code));
}

/**
 * Why the lock cannot be written here — its directory or the file itself refuses writes (EROFS,
 * EACCES, EPERM: a read-only mount, or a directory made read-only) — or undefined when it can.
 */
export async function lockReadOnly(lock: string): Promise<string | undefined> {
  for (const path of existsSync(lock) ? [dirname(lock), lock] : [dirname(lock)]) {
    try {
      await access(path, constants.W_OK);
    } catch (err) {
      if (isReadOnlyError(err)) return `${path} cannot be written (${(err as NodeJS.ErrnoException).code})`;
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }
  return undefined;
}

/** The operator's call: tenant `default`, where the operator's upstream entries go. */
const OPERATOR: CallContext = Object.freeze({ tenant: UPSTREAMS_LEDGER_TENANT, principal: "operator" });
const EMPTY: ContractSet = { tools: {}, prompts: {}, resources: {}, capabilities: {} };

/** The registry's approvals of tenant `default`, as `overlayApprovals` takes them; `registered` false when the registry does not hold the tenant (generation 0). */
async function listedWith(admin: Admin): Promise<{ approvals: UpstreamApprovalEntry[]; registered: boolean }> {
  const answer = await admin.approvals.listApprovals({}, { ctx: OPERATOR });
  const approvals = answer.approvals.map((a) => ({ upstream: a.upstream, tool: a.tool, entry: a.entry, replacesDigest: a.replacesDigest, digest: a.digest, approvedBy: a.approvedBy }));
  return { approvals, registered: answer.generation > 0n };
}

const listed = async (admin: Admin) => (await listedWith(admin)).approvals;

/** Opens the registry, runs `act`, and lets it go. */
async function withRegistry<T>(where: WhereFlags, env: Env, act: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = await openAdmin(where, env);
  try {
    return await act(admin);
  } finally {
    await admin.close();
  }
}

/** The registry's approvals of `upstream` over the lock's pins: what is served, and each approval's standing. */
export async function overlaysOf(where: WhereFlags, env: Env, lock: ReadonlyMap<string, ContractSet>, upstream: string): Promise<{ pins: Map<string, ContractSet>; outcomes: ApprovalOutcome[] }> {
  const approvals = await withRegistry(where, env, listed);
  const merged = overlayApprovals(lock, approvals);
  return { pins: merged.pins, outcomes: merged.outcomes.filter((o) => o.upstream === upstream) };
}

const short = (digest: string) => (digest === "" ? "none" : digest.slice(0, 19));

/** One line per approval of the upstream, saying whether it is served. */
export function overlayLines(outcomes: readonly ApprovalOutcome[]): string {
  const said: Record<ApprovalOutcome["state"], string> = {
    "in-force": "in force until the lock is updated",
    moot: "moot: the lock pins it now",
    overridden: "not served: the lock pins another contract than the one it replaced",
    invalid: "not served: not a valid upstreams.lock entry",
  };
  return outcomes.map((o) => `overlay ${o.upstream}/${o.tool} ${short(o.digest)} (replaces ${short(o.replacesDigest)}, approved by ${o.approvedBy}): ${said[o.state]}\n`).join("");
}

/** What `approve` was asked and read. */
export interface OverlayApproval {
  readonly upstream: string;
  readonly tool?: string;
  /** The lock's pins as read. */
  readonly lock: ReadonlyMap<string, ContractSet>;
  /** What the upstream lists now. */
  readonly live: ContractSet;
  /** Why an overlay: `--overlay`, or what refused the lock's write. */
  readonly why: string;
  readonly lockFile: string;
}

/**
 * Records an approval as an overlay: reads the approvals in force (so the diff is against what is
 * served), appends `upstream.approved` with `overlay: true` to the ledger — through the cluster's
 * or the running server's ledger, else on the data directory's stores — BEFORE anything is
 * recorded (a ledger that cannot record refuses), then records each changed tool's contract with
 * the lock digest it replaces. Resolves with what to print.
 */
export async function approveAsOverlay(a: OverlayApproval, where: WhereFlags, env: Env, say: (line: string) => void): Promise<string> {
  const label = `${a.upstream}${a.tool ? `/${a.tool}` : ""}`;
  const admin = await openAdmin(where, env);
  let open: Admin | undefined = admin;
  try {
    const found = await listedWith(admin);
    // Refused before anything is ledgered: an approval the registry would refuse is not recorded as made.
    if (!found.registered) {
      throw new ChaosError(
        "failed_precondition",
        `tenant "${UPSTREAMS_LEDGER_TENANT}" is not registered in ${admin.where}: an overlay is kept under it — register it first (chaos-core tenants create ${UPSTREAMS_LEDGER_TENANT}; a standalone server registers it when it starts)`,
      );
    }
    const served = overlayApprovals(a.lock, found.approvals).pins;
    const pinned = served.get(a.upstream) ?? EMPTY;
    let next: ContractSet;
    if (a.tool === undefined) next = a.live;
    else {
      if (!a.live.tools[a.tool]) throw new ChaosError(pinned.tools[a.tool] ? "failed_precondition" : "not_found", `upstream "${a.upstream}" lists no tool "${a.tool}"${pinned.tools[a.tool] ? ": an overlay cannot unpin a tool; update the lock where it is kept (chaos-core upstreams lock)" : ", and none is pinned"}`);
      next = { ...pinned, tools: { ...pinned.tools, [a.tool]: a.live.tools[a.tool]! } };
    }
    const tools = pinChanges(pinned, next);
    const removed = tools.filter((t) => t.change === "removed").map((t) => t.tool);
    if (removed.length > 0) throw new ChaosError("failed_precondition", `upstream "${a.upstream}" no longer lists ${removed.map((t) => `"${t}"`).join(", ")}: an overlay cannot unpin a tool; update the lock where it is kept (chaos-core upstreams lock), or approve the other tools one by one`);
    const diff = diffContracts(pinned, next);
    if (diff.changes.length === 0 || tools.length === 0) return `${label}: what is served already matches (the lock with the overlays in force); nothing changed\n`;
    const by = localOperator(env);
    const event: JsonObject = { type: "upstream.approved", upstream: a.upstream, ...(a.tool ? { tool: a.tool } : {}), verdict: diff.verdict, tools: tools.map((t) => ({ ...t })), by, overlay: true };

    // In the ledger before it takes effect; one the ledger cannot record is not made.
    let seq: number;
    try {
      if (admin.ledger) seq = Number((await admin.ledger.append({ event }, { ctx: OPERATOR })).entry?.seq ?? 0);
      else {
        // The registry's own stores (no server, no cluster): let them go while the ledger's command holds the data directory.
        await admin.close();
        open = undefined;
        const dataDir = where["data-dir"] ?? resolveDataDir(env);
        const ledgerEnv = where["database-url"] !== undefined ? { ...env, DATABASE_URL: where["database-url"] } : env;
        [seq] = (await appendOperatorEntries(ledgerEnv, [event], dataDir, say)) as [number];
      }
    } catch (err) {
      throw new ChaosError("unavailable", `the audit ledger could not record the approval, so no overlay was recorded: ${err instanceof Error ? err.message : String(err)}`);
    }
    const registry = open ?? (open = await openAdmin(where, env));
    for (const t of tools) {
      const contract = next.tools[t.tool]!;
      const locked = a.lock.get(a.upstream)?.tools[t.tool];
      await registry.approvals.recordApproval(
        { tenant: UPSTREAMS_LEDGER_TENANT, upstream: a.upstream, tool: t.tool, entry: upstreamToolEntryText(a.upstream, t.tool, contract), replacesDigest: locked ? entryDigest(locked) : "", approvedBy: by },
        { ctx: OPERATOR },
      );
    }
    return (
      `approved ${label} (${diff.verdict}) as an overlay in the tenant registry (tenant ${UPSTREAMS_LEDGER_TENANT}, ${registry.where}): ${a.why}; recorded in the audit ledger as entry ${seq}\n` +
      `the overlay holds until the lock is updated: run chaos-core upstreams lock (or approve) where ${a.lockFile} is kept — its git repository, say — and roll it out; the overlay is moot once the lock pins the same contract\n` +
      `${formatDiff(diff)}\n`
    );
  } finally {
    await open?.close();
  }
}
