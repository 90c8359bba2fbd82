import { readFile } from "node:fs/promises";
import { parseUpstreamsLock, serializeUpstreamsLock, type ContractSet } from "@chaos-core/contracts";
import { publishedGeneration, watchFile, type CallContext, type Logger, type ServiceClient, type TenantGenerations } from "@chaos-core/kit";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { UpstreamApprovalService } from "@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js";
import type { Capability } from "./capability.js";
import { upstreamCapabilities } from "./upstream-tools.js";
import { createUpstreamDrift, type UpstreamDrift } from "../upstreams/drift.js";
import { ledgerUpstreamDrift, UPSTREAMS_LEDGER_TENANT, UPSTREAMS_OBSERVER } from "../upstreams/drift-ledger.js";
import { overlayApprovals, type ApprovalOutcome, type UpstreamApprovalEntry } from "../upstreams/approval-overlay.js";
import type { UpstreamBoard } from "../upstreams/upstream-board.js";
import type { UpstreamsConfig } from "../upstreams/config.js";
import { loadUpstreams } from "../upstreams/load.js";
import { createUpstreamPool, type UpstreamPool } from "../upstreams/pool.js";

/** The operator's upstreams, as this process serves them (docs/federation.md). */
export interface ServedUpstreams {
  /** Each pinned tool of each declared upstream, as a capability: as pinned now (an approval re-pins). */
  readonly capabilities: readonly Capability[];
  /**
   * Called with every pinned tool as a capability whenever the pins change (an operator approved
   * a new contract, or a tool that appeared later): its schema, risk and description are the new
   * pin's from then on, not the ones read at start.
   */
  onCapabilities(listener: (capabilities: readonly Capability[]) => void): void;
  /** The connections, opened on first use. */
  readonly pool: UpstreamPool;
  /** What each upstream lists now against its pin; tells its listeners when a tool is quarantined or freed. */
  readonly drift: UpstreamDrift;
  /** For the start-up line a person reads. */
  readonly summary: string;
  /** Each declared upstream's transport, by name (ListUpstreams). */
  readonly transports: ReadonlyMap<string, "http" | "stdio">;
  /** The breakers of the connections opened so far (ListUpstreams). */
  breakers(): ReturnType<UpstreamPool["breakers"]>;
  /** Reads the registry's approvals now (the standalone, right after one is recorded), instead of at the next poll. */
  approvalsChanged(): Promise<void>;
  /** Stops watching the lock and the approvals, and closes the connections. */
  close(): Promise<void>;
}

/** Where the operator's approvals are kept when the lock is read-only (docs/federation.md §4). */
export interface ApprovalOverlayOptions {
  /** `UpstreamApprovalService` (the policy service): ListApprovals, asked as tenant `default`. */
  readonly client: ServiceClient<typeof UpstreamApprovalService>;
  /** Where that tenant's generation is published: the approvals are read again when it moves. Without it, at every poll. */
  readonly generations?: TenantGenerations;
  /** How often the generation (or, without one, the approvals) is read. Default {@link APPROVALS_POLL_MS}. */
  readonly pollMs?: number;
}

/** How often a serving process looks for a new approval in the registry. */
export const APPROVALS_POLL_MS = 5_000;

/** One line per approval whose standing changed, naming it. */
function logOutcome(log: Logger, o: ApprovalOutcome): void {
  const at = { upstream: o.upstream, tool: o.tool, digest: o.digest, lock_digest: o.lockDigest || undefined, approved_by: o.approvedBy };
  if (o.state === "in-force") log.info(at, "an approval in the registry is served over the read-only lock until the lock is updated");
  else if (o.state === "moot") log.info(at, "the lock pins what the approval in the registry approved: the approval is moot");
  else if (o.state === "overridden") log.warn({ ...at, replaces_digest: o.replacesDigest || undefined }, "the lock pins another contract than the one the approval in the registry replaced: the lock wins");
  else log.error({ ...at, err: o.problem }, "an approval in the registry is not a valid upstreams.lock entry; it is not served");
}

/**
 * Reads the operator's upstreams and their pins, and makes each pinned tool a capability served
 * through one pool, held to its pin while serving: a tool whose definition drifts is quarantined
 * until `chaos-core upstreams approve` re-pins it, which this process reads from the lock as it
 * changes — or, where the lock is read-only, from the registry's approvals (`overlay`:
 * UpstreamApprovalService, read at start and when tenant default's generation moves), merged over
 * the lock's pins while the lock still pins what each replaced (`upstreams/approval-overlay.ts`).
 * A declared upstream that is not pinned serves nothing, and says so once. Every
 * quarantine, cosmetic change and release is recorded in `ledger` (`upstream.drift`, once per
 * change in this process), from which the ledger sends its webhook event.
 */
export async function serveUpstreams(
  config: UpstreamsConfig,
  version: string,
  logger: Logger,
  ledger?: ServiceClient<typeof LedgerService>,
  board?: UpstreamBoard,
  overlay?: ApprovalOverlayOptions,
): Promise<ServedUpstreams> {
  const { declarations, pins: lockedAtStart } = await loadUpstreams({ file: config.file, required: config.fileChosen, lock: config.lock });
  const log = logger.child({ service: "upstreams" });

  // The pins served are the lock's with the registry's approvals in force over them.
  let lockPins: ReadonlyMap<string, ContractSet> = lockedAtStart;
  let approvals: readonly UpstreamApprovalEntry[] = [];
  let approvalsText = "[]";
  let approvalsGeneration: bigint | undefined;
  const standing = new Map<string, string>();
  const merge = () => {
    const { pins, outcomes } = overlayApprovals(lockPins, approvals);
    for (const o of outcomes) {
      const key = `${o.upstream}\u0000${o.tool}`;
      const said = `${o.state} ${o.digest} ${o.lockDigest}`;
      if (standing.get(key) !== said) logOutcome(log, o);
      standing.set(key, said);
    }
    return pins;
  };
  const asked: CallContext = { tenant: UPSTREAMS_LEDGER_TENANT, principal: UPSTREAMS_OBSERVER };
  /** Reads the approvals; true when they changed. Rejects when the registry cannot be read. */
  const readApprovals = async (): Promise<boolean> => {
    if (!overlay) return false;
    const answer = await overlay.client.listApprovals({}, { ctx: asked, signal: AbortSignal.timeout(10_000) });
    approvalsGeneration = answer.generation;
    const next = answer.approvals.map((a) => ({ upstream: a.upstream, tool: a.tool, entry: a.entry, replacesDigest: a.replacesDigest, digest: a.digest, approvedBy: a.approvedBy }));
    const text = JSON.stringify(next);
    if (text === approvalsText) return false;
    approvalsText = text;
    approvals = next;
    return true;
  };
  let unreadable = false;
  const approvalsUnreadable = (err: unknown) => {
    // A failed read keeps the approvals read last, and so the pins in force: an approval only ever
    // serves a contract an operator approved, so keeping one a little longer serves nothing new,
    // and dropping them would quarantine again what an operator released.
    if (!unreadable) log.warn({ err: err instanceof Error ? err.message : String(err) }, "the upstream approvals in the registry could not be read; the pins in force stay");
    unreadable = true;
  };
  if (overlay && declarations.length > 0) await readApprovals().catch(approvalsUnreadable);
  const pins = merge();
  let servedText = serializeUpstreamsLock(pins);

  const drift = createUpstreamDrift(pins, log, board);
  const recording = ledger ? ledgerUpstreamDrift(drift, ledger, log) : undefined;
  const pool = createUpstreamPool({
    connect: { secrets: config.secrets, workDir: config.workDir, version },
    logger: log,
    drift,
    ...(config.maxResultBytes !== undefined ? { maxResultBytes: config.maxResultBytes } : {}),
    ...(config.tokenMaxSeconds !== undefined ? { tokenMaxSeconds: config.tokenMaxSeconds } : {}),
    ...(board ? { board } : {}),
  });
  const atStart = upstreamCapabilities(declarations, pins, pool, drift);
  let capabilities = atStart.capabilities;
  const capabilityListeners: Array<(capabilities: readonly Capability[]) => void> = [];
  /** The pins changed: the drift compares against them, and each tool is served as now pinned. */
  const repin = (next: ReadonlyMap<string, ContractSet>) => {
    capabilities = upstreamCapabilities(declarations, next, pool, drift).capabilities;
    for (const listener of capabilityListeners) listener(capabilities);
    drift.setPins(next);
  };
  /** The lock or the approvals changed: serve the merge when it differs from what is served. */
  const apply = () => {
    const next = merge();
    const text = serializeUpstreamsLock(next);
    if (text === servedText) return;
    servedText = text;
    repin(next);
  };
  for (const upstream of atStart.unpinned) log.warn({ upstream, lock: config.lock }, "this upstream serves nothing until it is pinned: run chaos-core upstreams lock");
  // An approval re-pins in the lock: read again as it changes (a bad lock keeps the pins in force).
  let lockText = "";
  const watch =
    declarations.length === 0
      ? undefined
      : watchFile(
          config.lock,
          () =>
            void readFile(config.lock, "utf8").then(
              (text) => {
                if (text === lockText) return;
                lockText = text;
                lockPins = parseUpstreamsLock(text, config.lock);
                apply();
              },
              () => {},
            ).catch((err: unknown) => log.error({ err: err instanceof Error ? err.message : String(err) }, "the upstreams lock could not be read again; the pins in force stay")),
          { logger: log, what: "the upstreams lock's directory", pollMs: 2_000, debounceMs: 100 },
        );
  lockText = await readFile(config.lock, "utf8").catch(() => "");
  // The approvals: read again when tenant default's published generation moves (every approval
  // raises it), or at every poll where no generation is published to this process.
  let polling: Promise<void> | undefined;
  const poll = (force: boolean): Promise<void> => {
    polling ??= (async () => {
      try {
        if (!force && overlay?.generations && approvalsGeneration !== undefined) {
          const published = await publishedGeneration(overlay.generations, UPSTREAMS_LEDGER_TENANT, log);
          if (published !== undefined && BigInt(published) === approvalsGeneration) return;
        }
        const changed = await readApprovals();
        if (unreadable) log.info("the upstream approvals in the registry are read again");
        unreadable = false;
        if (changed) apply();
      } catch (err) {
        approvalsUnreadable(err);
      }
    })().finally(() => (polling = undefined));
    return polling;
  };
  const poller = overlay && declarations.length > 0 ? setInterval(() => void poll(false), overlay.pollMs ?? APPROVALS_POLL_MS) : undefined;
  poller?.unref();
  const served = new Set(capabilities.map((c) => c.upstream?.name));
  const summary = declarations.length === 0 ? "none" : `${capabilities.length} tools of ${served.size} pinned upstreams (${config.file})`;
  return {
    get capabilities() {
      return capabilities;
    },
    onCapabilities(listener) {
      capabilityListeners.push(listener);
    },
    pool,
    drift,
    summary,
    transports: new Map(declarations.map((d) => [d.name, d.transport])),
    breakers: () => pool.breakers(),
    approvalsChanged: () => (overlay && declarations.length > 0 ? poll(true) : Promise.resolve()),
    async close() {
      clearInterval(poller);
      watch?.close();
      await pool.close();
      // What was seen is written before the ledger closes (it closes after this); a ledger that is
      // down is not waited for past its first retries.
      if (recording) await Promise.race([recording.settled(), new Promise((r) => setTimeout(r, 10_000).unref())]);
    },
  };
}
