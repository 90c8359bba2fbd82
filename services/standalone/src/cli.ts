import { readFileSync } from "node:fs";
import { ChaosError, createLogger, type Env, type Logger } from "@chaos-core/kit";
import type { runChpConformance as RunChpConformance } from "./chp-conformance.js";
import type { runLedgerCommand as RunLedgerCommand } from "./ledger-command.js";
import { runApprovalsCommand } from "./approvals-command.js";
import { flagProblem, parseCommandLine, UsageError, withFlags, type FlagVariables } from "./command-line.js";
import { loadStandaloneConfig } from "./config.js";
import type { Runtime } from "./runtime.js";
import type { StartingRuntime } from "./startup.js";

const VERSION = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string })
  .version;

// Loaded when their command runs, so `chaos-core stdio` reaches its transport without the ledger.
const runChpConformance: typeof RunChpConformance = async (...args) =>
  (await import("./chp-conformance.js")).runChpConformance(...args);
const runLedgerCommand: typeof RunLedgerCommand = async (...args) => (await import("./ledger-command.js")).runLedgerCommand(...args);

const USAGE = `Usage: chaos-core <command> [options]
       chaos-core -v | --version

Commands:
  serve     Serve MCP over Streamable HTTP at http://HOST:PORT/mcp (default 127.0.0.1:3000)
            [--host HOST] [--port PORT] [--data-dir DIR]
  stdio     Serve MCP over stdio (stdout carries only JSON-RPC; logs go to stderr)
            [--data-dir DIR]
  chp-conformance
            Speak the CHP conformance line protocol on stdin/stdout: one JSON request
            {"op", "args"} per line (ops and their args: chaos-core chp-conformance --help)
  ledger    verify | export a tenant's audit ledger (chaos-core ledger help)
  policy    show | set the capability policy of a tenant (chaos-core policy help)
  tenants   create | list | show | disable | enable | settings: the tenant registry
            (chaos-core tenants help)
  keys      create | list | revoke a tenant's API keys (chaos-core keys help)
  migrate   Apply every service's database migrations to DATABASE_URL once and exit (the
            container image's "migrate" component; chaos-core migrate --help)
  approvals list | approve | reject | approve-spend | reject-spend | console: answer pending
            approvals as the operator, through the running server's loopback admin endpoint,
            or sign in to the approval console (chaos-core approvals help)
  contracts lock | lock --check | diff OLD NEW: pin the tool surface in chaoscore.lock and
            classify every change (chaos-core contracts help)
  help      Show this text

Every service runs in this one process, on embedded stores in the data directory, or on
Postgres and Redis when DATABASE_URL / REDIS_URL are set. The data directory is --data-dir,
else CHAOS_CORE_DATA_DIR, else the per-user one: $XDG_DATA_HOME/chaos-core or
~/.local/share/chaos-core (macOS ~/Library/Application Support/chaos-core, Windows
%LOCALAPPDATA%\\chaos-core); every command uses the same. A flag wins over its variable
(--host HOST, --port PORT, --data-dir CHAOS_CORE_DATA_DIR). See .env.example for every setting.
`;

/** The options of serve and stdio, and the variable each sets. */
const SERVE_FLAGS = { host: "HOST", port: "PORT", "data-dir": "CHAOS_CORE_DATA_DIR" } as const satisfies FlagVariables;
const STDIO_FLAGS = { "data-dir": "CHAOS_CORE_DATA_DIR" } as const satisfies FlagVariables;

const COMMAND_USAGE = {
  serve: "Usage: chaos-core serve [--host HOST] [--port PORT] [--data-dir DIR]",
  stdio: "Usage: chaos-core stdio [--data-dir DIR]",
  "chp-conformance": "Usage: chaos-core chp-conformance < requests.jsonl (chaos-core chp-conformance --help)",
  top: "Usage: chaos-core <command> [options] (chaos-core help lists the commands)",
} as const;

/** One line naming the problem, one usage line, exit 2. */
function usageError(problem: string, usage: string): number {
  process.stderr.write(`chaos-core: ${problem}\n${usage}\n`);
  return 2;
}

const flagOptions = (flags: FlagVariables) => ({
  ...Object.fromEntries(Object.keys(flags).map((name) => [name, { type: "string" as const }])),
  help: { type: "boolean" as const, short: "h" },
  version: { type: "boolean" as const, short: "v" },
});

/**
 * Checks the flags of serve and stdio through the same loaders the server uses, so `--port x`
 * and `PORT=x` are refused alike; a flag's problem is a usage error naming the flag.
 */
async function checkFlags(env: Env, fromFlags: ReadonlyMap<string, string>): Promise<string | undefined> {
  if (fromFlags.size === 0) return undefined;
  try {
    const { loadEdgeConfig } = await import("@chaos-core/edge/stdio");
    loadEdgeConfig(env);
    loadStandaloneConfig(env);
  } catch (err) {
    // Anything else (a bad variable, a provider left half-configured) is start-up's to report.
    return flagProblem(err, fromFlags);
  }
  return undefined;
}

/** Runs the command line and resolves with the exit code (servers resolve when they stop). */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case undefined:
      case "help":
      case "--help":
      case "-h":
        process.stdout.write(USAGE);
        return 0;
      case "--version":
      case "-v":
        process.stdout.write(`${VERSION}\n`);
        return 0;
      case "ledger":
        return await runLedgerCommand(rest, { stdout: process.stdout, stderr: process.stderr, env: process.env });
      case "policy":
        // Loaded here: the policy service's module is for this command only.
        return await (await import("./policy-command.js")).runPolicyCommand(rest, {
          stdout: process.stdout,
          stderr: process.stderr,
          env: process.env,
        });
      case "tenants":
      case "keys": {
        // Loaded here: the tenant registry's modules are for these commands only.
        const { runKeysCommand, runTenantsCommand } = await import("./tenants-command.js");
        const io = { stdout: process.stdout, stderr: process.stderr, env: process.env };
        return await (command === "tenants" ? runTenantsCommand(rest, io) : runKeysCommand(rest, io));
      }
      case "migrate":
        // Loaded here: the services' migrations are for this command (and serve) only.
        return await (await import("./migrate-command.js")).runMigrateCommand(rest, {
          stdout: process.stdout,
          stderr: process.stderr,
          env: process.env,
        });
      case "contracts":
        // Loaded here: the scanner (and the TypeScript compiler under it) is for this command only.
        return await (await import("./contracts-command.js")).runContractsCommand(rest, { stdout: process.stdout, stderr: process.stderr });
      case "approvals":
        return await runApprovalsCommand(rest, { stdout: process.stdout, stderr: process.stderr, env: process.env });
      case "chp-conformance": {
        const { values } = parseCommandLine(rest, flagOptions({}));
        if (values.version) return await main(["--version"]);
        if (values.help) {
          process.stdout.write((await import("./chp-conformance.js")).CHP_CONFORMANCE_USAGE);
          return 0;
        }
        return await runChpConformance(process.stdin, process.stdout);
      }
      case "serve":
      case "stdio": {
        const flags = command === "serve" ? SERVE_FLAGS : STDIO_FLAGS;
        let values: Record<string, unknown>;
        try {
          values = parseCommandLine(rest, flagOptions(flags)).values;
        } catch (err) {
          if (err instanceof UsageError) return usageError(err.message, COMMAND_USAGE[command]);
          throw err;
        }
        if (values.version) return await main(["--version"]);
        if (values.help) {
          process.stdout.write(`${COMMAND_USAGE[command]}\n`);
          return 0;
        }
        const { env, fromFlags } = withFlags(process.env, values, flags);
        const problem = await checkFlags(env, fromFlags);
        if (problem) return usageError(problem, COMMAND_USAGE[command]);
        return await serve(command, env);
      }
      default:
        return command.startsWith("-")
          ? usageError(`unknown option ${command}`, COMMAND_USAGE.top)
          : usageError(`unknown command "${command}"`, COMMAND_USAGE.top);
    }
  } catch (err) {
    if (err instanceof UsageError) return usageError(err.message, COMMAND_USAGE[command === "chp-conformance" ? command : "top"]);
    throw err;
  }
}

/** How long a failed start-up lets the client read the answers to calls already made, at most. */
const FAILED_START_DRAIN_MS = 2_000;

async function serve(mode: "serve" | "stdio", env: Env): Promise<number> {
  let logger: Logger = createLogger("chaos-core");
  let starting: StartingRuntime | undefined;
  try {
    // Loaded here, not at the top: the other commands (chp-conformance, ledger, approvals) start
    // without every service in memory. The services themselves load in the background (startup.ts),
    // and the HTTP transport only for serve.
    const { checkContractsAtStart, loadEdgeConfig, loadRateLimitsFile, runStdioTransport } = await import("@chaos-core/edge/stdio");
    const { startRuntime } = await import("./startup.js");
    const config = loadStandaloneConfig(env);
    const edgeConfig = loadEdgeConfig(env);
    logger = createLogger("chaos-core", config.logLevel);
    // The data directory is this process's before anything answers: a second process fails here,
    // and a directory that cannot be used is the one line a person reads.
    starting = await startRuntime(config, logger, {
      version: VERSION,
      sessionTtlSeconds: edgeConfig.sessionTtlSeconds,
      mrtr: { ttlSeconds: edgeConfig.mrtrTtlSeconds, ...(edgeConfig.mrtrKeysFile ? { keysFile: edgeConfig.mrtrKeysFile } : {}) },
      admin: true,
      // stdio opens them on the first request that needs them: a 2026-07-28 client's version
      // probe (a sibling process sent `server/discover` alone, then stopped) never does.
      openOnDemand: mode === "stdio",
      contractLockFile: edgeConfig.contracts.lockFile,
      ...(edgeConfig.rateLimitsFile ? { rateLimits: loadRateLimitsFile(edgeConfig.rateLimitsFile) } : {}),
    });
    const rt = starting;
    // The definitions served against chaoscore.lock and its signed note (docs/contracts.md §7):
    // drift or a bad signature refuses the start, naming the drifted entries (the catch below
    // closes what startRuntime opened).
    const contracts = await checkContractsAtStart(edgeConfig.contracts, logger);
    // Cognition's capabilities against the same lock, now: stdio builds them only on a first request.
    // The lock the edge's check already read and parsed.
    const { BUILT_IN_CAPABILITIES, createCapabilityRegistry, pinCapabilities } = await import("@chaos-core/cognition");
    pinCapabilities(createCapabilityRegistry(BUILT_IN_CAPABILITIES), contracts.lock, edgeConfig.contracts.lockFile);
    const announce = (runtime: Runtime) =>
      logger.info({ mode, dataDir: config.dataDir, ...runtime.stores, admin: rt.admin?.url }, "chaos-core starting");

    let transport: { close(): Promise<void> } | undefined;
    let exitCode = 0;
    let stopping = false;
    let resolveStopped!: () => void;
    const stopped = new Promise<void>((resolve) => (resolveStopped = resolve));
    // stdio's console listener and its keys file watcher, once started.
    const consoleClosers: Array<() => Promise<void> | void> = [];
    const closeConsole = async () => {
      for (const close of consoleClosers.splice(0)) await Promise.resolve(close()).catch((err: unknown) => logger.warn({ err }, "console close failed"));
    };
    const stop = async (reason: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ reason }, "chaos-core stopping");
      await transport?.close().catch((err: unknown) => logger.warn({ err }, "transport close failed"));
      await closeConsole();
      await rt.close();
      resolveStopped();
    };
    process.once("SIGTERM", () => void stop("SIGTERM"));
    process.once("SIGINT", () => void stop("SIGINT"));

    if (mode === "serve") {
      // Listens only once everything it serves is open: the endpoint line means "ready".
      const { startHttpTransport } = await import("@chaos-core/edge");
      const runtime = await rt.ready;
      announce(runtime);
      // The console on the MCP listener; the operator's one-time links sign in there too.
      const consoleOptions = edgeConfig.http.console && { ...edgeConfig.http.console, ...(rt.signInLinks ? { signInLinks: rt.signInLinks } : {}) };
      const http = await startHttpTransport({ ...runtime.deps, approvalWaitSeconds: edgeConfig.approvalWaitSeconds, contracts }, { ...edgeConfig.http, directory: runtime.tenants.directory, ...(consoleOptions ? { console: consoleOptions } : {}) });
      transport = http;
      if (http.consoleUrl) {
        await rt.publishConsole(http.consoleUrl);
        logger.info({ console: http.consoleUrl }, "approval console served");
      }
      // The one line on stdout a person (or a script) looks for.
      process.stdout.write(`Chaos Core MCP endpoint: ${http.url}\n`);
    } else {
      // A host waits for the answer to initialize: it comes now, while the stores open.
      logger.info({ dataDir: config.dataDir }, "serving MCP on stdio; the stores open with the first request");
      // The console gets a loopback listener of its own (stdio has no HTTP one); answers link to
      // it once it listens.
      let consoleOrigin: string | undefined;
      const edgeDeps = { ...rt.deps, approvalWaitSeconds: edgeConfig.approvalWaitSeconds, contracts };
      const stdioDeps = edgeConfig.console ? { ...edgeDeps, console: { listenerUrl: () => consoleOrigin } } : edgeDeps;
      // The first request other than `server/discover` opens the stores and starts the console.
      const onDemand = () => {
        if (stopping) return;
        rt.open();
        if (!edgeConfig.console) return;
        const { listenerPort } = edgeConfig.console;
        // After a turn of the event loop: the request already waiting on stdin is answered first.
        setImmediate(() => {
          if (stopping) return;
          startStdioConsole(rt, edgeConfig.http.apiKeysFile, listenerPort, logger, consoleClosers).then(
            // Stopped meanwhile: what started after stop closed the rest is closed now.
            (origin) => (stopping ? void closeConsole() : void (consoleOrigin = origin)),
            (err: unknown) =>
              logger.error({ err: err instanceof Error ? err.message : String(err), port: listenerPort }, "the approval console did not start; answers will not link to it"),
          );
        });
      };
      // The local tenant's toolsets come from the registry, as HTTP's tenants' do: it opens with the stores.
      const directory = rt.ready.then((runtime) => runtime.tenants.directory);
      // A start-up that fails is told below; the transport serves the default toolsets meanwhile.
      directory.catch(() => {});
      const stdio = await runStdioTransport(stdioDeps, { onClose: () => void stop("stdin closed"), onDemand, directory });
      transport = stdio;
      rt.ready.then(announce, async (err: unknown) => {
        // Stopped before anything needed the stores (a version probe): nothing failed.
        if (!rt.opened) return;
        // Calls waiting for the stores answer `unavailable` with this cause; once the client has
        // read them the process ends, so a host shows the server as failed, not as hanging.
        exitCode = 1;
        process.stderr.write(`chaos-core: ${startupFailure(err)}\n`);
        logger.error({ cause: startupFailure(err) }, "start-up failed after the transport started");
        await Promise.race([stdio.idle(), new Promise((resolve) => setTimeout(resolve, FAILED_START_DRAIN_MS).unref())]);
        await stop("start-up failed");
      });
    }
    await stopped;
    return exitCode;
  } catch (err) {
    await starting?.close();
    process.stderr.write(`chaos-core: ${startupFailure(err)}\n`);
    logger.debug({ err }, "start-up failed");
    return 1;
  }
}

/**
 * Starts `chaos-core stdio`'s approval console on 127.0.0.1 (`CHAOS_CORE_CONSOLE_PORT`, else a
 * free port), over the runtime's services (its calls wait for the stores like the tools' do),
 * and names it in `admin.json`. Resolves with the listener's origin, for links.
 */
async function startStdioConsole(
  rt: StartingRuntime,
  apiKeysFile: string | undefined,
  port: number,
  logger: Logger,
  closers: Array<() => Promise<void> | void>,
): Promise<string> {
  const { startConsoleListener, watchApiKeysFile } = await import("@chaos-core/edge");
  // stdio's MCP needs no key, but an approver holding one may sign in to its console with it.
  const keys = apiKeysFile ? await watchApiKeysFile(apiKeysFile, { logger }) : undefined;
  if (keys) closers.push(() => keys.close());
  const listener = await startConsoleListener(rt.deps, {
    port,
    ...(keys ? { keys } : {}),
    ...(rt.signInLinks ? { signInLinks: rt.signInLinks } : {}),
  });
  closers.unshift(() => listener.close());
  await rt.publishConsole(listener.url);
  logger.info({ console: listener.url }, "approval console served");
  return listener.origin;
}

/** What a person reads: the cause itself, not the `unavailable` wrapper the calls answer with. */
function startupFailure(err: unknown): string {
  const cause = err instanceof ChaosError && err.code === "unavailable" && err.cause instanceof Error ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}
