import { readFile } from "node:fs/promises";
import { metrics } from "@opentelemetry/api";
import { parseUpstreamsLock, type ContractSet } from "@chaos-core/contracts";
import { watchFile, type Logger, type ServiceClient } from "@chaos-core/kit";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { Capability } from "./capability.js";
import { upstreamCapabilities } from "./upstream-tools.js";
import { createUpstreamDrift, type UpstreamDrift } from "../upstreams/drift.js";
import { ledgerUpstreamDrift } from "../upstreams/drift-ledger.js";
import type { QuarantineBoard } from "../upstreams/quarantine-board.js";
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
  /** Stops watching the lock and closes the connections. */
  close(): Promise<void>;
}

/**
 * Reads the operator's upstreams and their pins, and makes each pinned tool a capability served
 * through one pool, held to its pin while serving: a tool whose definition drifts is quarantined
 * until `chaos-core upstreams approve` re-pins it, which this process reads from the lock as it
 * changes. A declared upstream that is not pinned serves nothing, and says so once. Every
 * quarantine, cosmetic change and release is recorded in `ledger` (`upstream.drift`, once per
 * change in this process), from which the ledger sends its webhook event.
 */
export async function serveUpstreams(
  config: UpstreamsConfig,
  version: string,
  logger: Logger,
  ledger?: ServiceClient<typeof LedgerService>,
  board?: QuarantineBoard,
): Promise<ServedUpstreams> {
  const { declarations, pins } = await loadUpstreams({ file: config.file, required: config.fileChosen, lock: config.lock });
  const log = logger.child({ service: "upstreams" });
  const drift = createUpstreamDrift(pins, log, board);
  const recording = ledger ? ledgerUpstreamDrift(drift, ledger, log) : undefined;
  const pool = createUpstreamPool({
    connect: { secrets: config.secrets, workDir: config.workDir, version },
    logger: log,
    drift,
    ...(config.maxResultBytes !== undefined ? { maxResultBytes: config.maxResultBytes } : {}),
  });
  let { capabilities, unpinned } = upstreamCapabilities(declarations, pins, pool, drift);
  const capabilityListeners: Array<(capabilities: readonly Capability[]) => void> = [];
  /** The pins changed: the drift compares against them, and each tool is served as now pinned. */
  const repin = (next: ReadonlyMap<string, ContractSet>) => {
    ({ capabilities, unpinned } = upstreamCapabilities(declarations, next, pool, drift));
    for (const listener of capabilityListeners) listener(capabilities);
    drift.setPins(next);
  };
  for (const upstream of unpinned) log.warn({ upstream, lock: config.lock }, "this upstream serves nothing until it is pinned: run chaos-core upstreams lock");
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
                repin(parseUpstreamsLock(text, config.lock));
              },
              () => {},
            ).catch((err: unknown) => log.error({ err: err instanceof Error ? err.message : String(err) }, "the upstreams lock could not be read again; the pins in force stay")),
          { logger: log, what: "the upstreams lock's directory", pollMs: 2_000, debounceMs: 100 },
        );
  lockText = await readFile(config.lock, "utf8").catch(() => "");
  // Each breaker's state as a metric (docs/federation.md §7): 0 closed, 1 half-open, 2 open.
  const breakerGauge = metrics.getMeter("chaoscore.upstreams").createObservableGauge("chaoscore.upstream.breaker.state", {
    description: "An upstream connection's circuit breaker: 0 closed, 1 half-open (one probe may go through), 2 open (calls fail at once)",
  });
  const observeBreakers = (result: { observe(value: number, attributes: Record<string, string>): void }) => {
    for (const b of pool.breakers()) result.observe(b.state === "open" ? 2 : b.state === "half-open" ? 1 : 0, { upstream: b.upstream, scope: b.scope });
  };
  breakerGauge.addCallback(observeBreakers);
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
    async close() {
      breakerGauge.removeCallback(observeBreakers);
      watch?.close();
      await pool.close();
      // What was seen is written before the ledger closes (it closes after this); a ledger that is
      // down is not waited for past its first retries.
      if (recording) await Promise.race([recording.settled(), new Promise((r) => setTimeout(r, 10_000).unref())]);
    },
  };
}
