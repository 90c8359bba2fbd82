import { ChaosError, createDeferredClient, type Logger } from "@chaos-core/kit";
import { TenantAdminService } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { UpstreamApprovalService } from "@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import {
  createMemoryRateLimiter,
  NO_RATE_LIMITS,
  createMemorySessionStore,
  createSignInLinks,
  deferredUpstreamCatalog,
  loadMrtrKeyring,
  loadOrCreateMrtrKeyring,
  type EdgeDeps,
  type MrtrKeyring,
  type RateLimiter,
  type SessionStore,
  type SignInLinks,
} from "@chaos-core/edge/stdio";
import { startAdminServer, type RunningAdminServer } from "./admin-server.js";
import type { StandaloneConfig } from "./config.js";
import { lockDataDirAfterCrash } from "./data-dir-access.js";
import type * as runtimeModule from "./runtime.js";
import type { Runtime, RuntimeOptions } from "./runtime.js";

/** The standalone runtime while its stores open: the data directory is already this process's. */
export interface StartingRuntime {
  /**
   * Usable at once: what needs no service (initialize, tools/list, prompts/list, ping) answers
   * now; a call that needs one waits for {@link ready} within its deadline, and fails
   * `unavailable` naming the cause if the start-up failed.
   */
  readonly deps: EdgeDeps;
  /**
   * The runtime once every store is open; rejects with `unavailable` naming what failed, or
   * when the runtime closed before {@link open} was called.
   */
  readonly ready: Promise<Runtime>;
  /**
   * Starts opening the stores (once; later calls do nothing). Called by `startRuntime` itself
   * unless `openOnDemand` was given.
   */
  open(): void;
  /** Whether {@link open} was called: a runtime closed before that never opened anything. */
  readonly opened: boolean;
  /**
   * The operator's loopback admin endpoint (`chaos-core approvals`), when asked for: up before
   * anything answers, so `admin.json` is there as soon as the server is; its calls wait like the
   * edge's.
   */
  readonly admin?: RunningAdminServer;
  /**
   * The approval console's one-time sign-in links, shared by the admin endpoint (which issues
   * them, `chaos-core approvals console`) and the console (which consumes them); with the admin
   * endpoint only.
   */
  readonly signInLinks?: SignInLinks;
  /** Names the console once it serves: the admin endpoint's links point there and `admin.json` says `console_url`. */
  publishConsole(url: string): Promise<void>;
  /** Waits for the start-up to settle, then closes whatever it opened and releases the directory. */
  close(): Promise<void>;
}

/** Every call waits for the store behind it; the session store has no deadline of its own. */
function deferredSessionStore(pending: Promise<SessionStore>, ttlSeconds: number): SessionStore {
  // A failed start-up reaches each caller; it is not also an unhandled rejection.
  pending.catch(() => {});
  return {
    ttlSeconds,
    create: async (record, limits) => (await pending).create(record, limits),
    get: async (tenant, id) => (await pending).get(tenant, id),
    touch: async (tenant, id) => (await pending).touch(tenant, id),
    update: async (tenant, id, patch) => (await pending).update(tenant, id, patch),
    delete: async (tenant, id) => (await pending).delete(tenant, id),
    listByTenant: async (tenant) => (await pending).listByTenant(tenant),
    ping: async () => (await pending).ping(),
  };
}

/**
 * The runtime's limiter, shared in Redis, once it is connected: until then every call may be
 * limited, and waits for the stores as the session store's calls do (a call that gets this far
 * needs them anyway). A failed start-up refuses the call with its cause.
 */
function deferredRateLimiter(pending: Promise<RateLimiter>): RateLimiter {
  let arrived: RateLimiter | undefined;
  // Handled here once, so a rejection no call has waited for yet is not reported as unhandled.
  pending.then(
    (limiter) => (arrived = limiter),
    () => {},
  );
  return {
    limits: (call) => arrived?.limits(call) ?? true,
    admit: async (call) => (await pending).admit(call),
  };
}

/** A tenant's ledger export, once the stores are open (the admin endpoint is up before them). */
async function* exportOnceReady(ready: Promise<Runtime>, tenant: string): AsyncIterable<string> {
  yield* (await ready).exportLedger(tenant);
}

/**
 * Takes the data directory (a second process fails here, at once, before anything answers),
 * starts the admin endpoint when asked, and opens the stores in the background: the service
 * modules, the database and its migrations and the keyring come up while a transport already
 * answers. This module loads none of the services itself, so a transport can start right after it.
 */
export async function startRuntime(config: StandaloneConfig, logger: Logger, options: RuntimeOptions): Promise<StartingRuntime> {
  const unlock = await lockDataDirAfterCrash(config.dataDir, (pid) =>
    logger.warn({ dataDir: config.dataDir, pid }, "the server that held this data directory (pid in admin.json) is gone; waiting for its lock to go stale (at most 10 s)"),
  );
  // The key that seals multi-round-trip requestState: the operator's file, else one generated into
  // the data directory on first run (a file read, before anything answers). Never a built-in key.
  let mrtrKeyring: MrtrKeyring;
  try {
    mrtrKeyring = options.mrtr?.keysFile ? await loadMrtrKeyring(options.mrtr.keysFile) : await loadOrCreateMrtrKeyring(config.dataDir, logger);
  } catch (err) {
    await unlock();
    throw err;
  }
  const mrtr = { mrtrKeyring, ...(options.mrtr ? { mrtrTtlSeconds: options.mrtr.ttlSeconds } : {}) };
  const mrtrKey = `${mrtrKeyring.activeKid} (${options.mrtr?.keysFile ?? "generated in the data directory"})`;
  // The in-process session store answers at once; a Redis one opens with the other stores.
  const sessions = config.redisUrl ? undefined : createMemorySessionStore({ ttlSeconds: options.sessionTtlSeconds });
  // Approval answers name the operator's exact command only where its endpoint runs, with
  // --data-dir only when the command would not find this directory by itself.
  const operator = options.admin ? { operator: config.dataDirChosen ? { dataDir: config.dataDir } : {} } : {};
  // Without Redis the limits are this process's and answer at once: the file's, and a tenant's in
  // the registry over them once the stores are open. Both transports (stdio's deps below, serve's
  // the runtime's) gate their calls with this one limiter. With Redis they are shared by every
  // process using it, and the runtime connects it with the other stores.
  let openedRuntime: Runtime | undefined;
  const limiter = config.redisUrl
    ? undefined
    : createMemoryRateLimiter(options.rateLimits ?? NO_RATE_LIMITS, (tenant) => openedRuntime?.tenants.directory.tenantLimits(tenant));

  // Settles with true when the stores are to open, false when the runtime closed first.
  let begin!: (open: boolean) => void;
  const go = new Promise<boolean>((resolve) => (begin = resolve));
  let opened = false;
  const ready = (async () => {
    if (!(await go)) {
      await unlock();
      throw new ChaosError("unavailable", "chaos-core stopped before it opened its stores");
    }
    // One turn of the event loop first: a transport started right after this call reads and
    // answers the request already waiting on its input before module loading takes the CPU.
    await new Promise((resolve) => setImmediate(resolve));
    let runtime: typeof runtimeModule;
    try {
      runtime = await import("./runtime.js");
    } catch (err) {
      await unlock();
      throw err;
    }
    // From here the runtime owns the lock: it releases it when it fails or closes.
    const created = await runtime.createRuntime(config, logger, {
      ...options,
      admin: false,
      dataDirLock: unlock,
      ...(sessions ? { sessions } : {}),
      ...(limiter ? { limiter } : {}),
    });
    openedRuntime = created;
    return { ...created, deps: { ...created.deps, ...operator, ...mrtr }, stores: { ...created.stores, mrtrKey } };
  })().catch((err: unknown) => {
    const cause = err instanceof Error ? err.message : String(err);
    throw new ChaosError("unavailable", `chaos-core could not open its stores: ${cause}`, { cause: err });
  });

  const services = ready.then((runtime) => runtime.deps);
  const ledger = services.then((deps) => {
    if (!deps.ledger) throw new ChaosError("unavailable", "the audit ledger is not configured");
    return deps.ledger;
  });
  const ledgerClient = createDeferredClient(LedgerService, ledger);
  // The upstream tools are listed once the runtime has read them; none before (stdio answers
  // tools/list before its stores open, and tells the client to list again once they are read).
  const deps: EdgeDeps = {
    upstreams: deferredUpstreamCatalog(services.then((d) => d.upstreams)),
    policy: createDeferredClient(PolicyService, services.then((d) => d.policy)),
    memory: createDeferredClient(MemoryService, services.then((d) => d.memory)),
    cognition: createDeferredClient(CognitionService, services.then((d) => d.cognition)),
    council: createDeferredClient(CouncilService, services.then((d) => d.council)),
    ledger: ledgerClient,
    sessions: sessions ?? deferredSessionStore(services.then((d) => d.sessions), options.sessionTtlSeconds),
    logger,
    version: options.version,
    limiter: limiter ?? deferredRateLimiter(ready.then((r) => r.deps.limiter)),
    ...operator,
    ...mrtr,
  };
  const open = () => {
    if (opened) return;
    opened = true;
    begin(true);
  };
  if (!options.openOnDemand) open();
  const closeRuntime = async () => {
    // Never opened: nothing to wait for, the directory is released at once.
    begin(false);
    const runtime = await ready.catch(() => undefined);
    await runtime?.close();
  };

  let admin: RunningAdminServer | undefined;
  const signInLinks = options.admin ? createSignInLinks() : undefined;
  if (options.admin) {
    try {
      admin = await startAdminServer({
        ...(signInLinks ? { signInLinks } : {}),
        dataDir: config.dataDir,
        cognition: deps.cognition,
        ledger: ledgerClient,
        policy: deps.policy,
        tenantAdmin: createDeferredClient(TenantAdminService, ready.then((r) => r.tenants.admin)),
        upstreamApprovals: createDeferredClient(UpstreamApprovalService, ready.then((r) => r.tenants.approvals)),
        memory: deps.memory,
        council: deps.council,
        exportLedger: (tenant) => exportOnceReady(ready, tenant),
        logger: logger.child({ service: "admin" }),
      });
    } catch (err) {
      await closeRuntime();
      throw err;
    }
  }
  const running = admin;
  return {
    deps,
    ready,
    ...(running ? { admin: running } : {}),
    ...(signInLinks ? { signInLinks } : {}),
    open,
    get opened() {
      return opened;
    },
    async publishConsole(url) {
      await running?.setConsoleUrl(url);
    },
    async close() {
      // The admin endpoint first: nothing reaches the stores once they start to close.
      await running?.close();
      await closeRuntime();
    },
  };
}
