import { readFileSync } from "node:fs";
import { ChaosError, createLogger, isDataDirInUse, type Env, type Logger } from "@chaos-core/kit";
import type { CredentialDirectory, EdgeDeps } from "@chaos-core/edge/stdio";
import { loopbackMcpUrl, newAgentToken, publishAgentEndpoint } from "./agent-endpoint.js";
import type { runChpConformance as RunChpConformance } from "./chp-conformance.js";
import type { runLedgerCommand as RunLedgerCommand } from "./ledger-command.js";
import { runApprovalsCommand } from "./approvals-command.js";
import { flagProblem, meantHint, parseCommandLine, unknownCommand, UsageError, withFlags, type FlagVariables } from "./command-line.js";
import { loadStandaloneConfig, loadUpstreamsConfig } from "./config.js";
import type { Runtime } from "./runtime.js";
import type { StartingRuntime } from "./startup.js";
import { attachToDataDir, heldAgainstServe, type Attachment } from "./stdio-attach.js";

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
            [--host HOST] [--port PORT] [--data-dir DIR] [--upstreams FILE]
  stdio     Serve MCP over stdio (stdout carries only JSON-RPC; logs go to stderr)
            [--data-dir DIR] [--upstreams FILE]
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
  upstreams list | show | lock | diff | approve: the MCP servers Chaos Core fronts, pinned in
            upstreams.lock before anything of them is served; add | remove | disable | enable
            --tenant T: a tenant's own, in the registry (chaos-core upstreams help)
  contracts lock | lock --check | diff OLD NEW: pin the tool surface in chaoscore.lock and
            classify every change (chaos-core contracts help)
  bridge    [--host H] [--port P] [--token-file F] -- CMD ARGS: serve a stdio MCP server over
            Streamable HTTP, one process per session (chaos-core bridge --help)
  witness   --name N --key-file F --log PREFIX=KEY: a C2SP tlog-witness that cosigns ledgers'
            consistent checkpoints (chaos-core witness --help)
  help      Show this text

Every service runs in this one process, on embedded stores in the data directory, or on
Postgres and Redis when DATABASE_URL / REDIS_URL are set. The data directory is --data-dir,
else CHAOS_CORE_DATA_DIR, else the per-user one: $XDG_DATA_HOME/chaos-core or
~/.local/share/chaos-core (macOS ~/Library/Application Support/chaos-core, Windows
%LOCALAPPDATA%\\chaos-core); every command uses the same. A flag wins over its variable
(--host HOST, --port PORT, --data-dir CHAOS_CORE_DATA_DIR). See .env.example for every setting.
`;

/** The commands and top-level options {@link main} knows, for naming the one a typo likely meant. */
const COMMANDS = ["serve", "stdio", "chp-conformance", "ledger", "policy", "tenants", "keys", "migrate", "approvals", "upstreams", "contracts", "bridge", "witness", "help"] as const;
const TOP_OPTIONS = ["--help", "--version"] as const;

/** The options of serve and stdio, and the variable each sets. */
const SERVE_FLAGS = { host: "HOST", port: "PORT", "data-dir": "CHAOS_CORE_DATA_DIR", upstreams: "CHAOS_CORE_UPSTREAMS_FILE" } as const satisfies FlagVariables;
const STDIO_FLAGS = { "data-dir": "CHAOS_CORE_DATA_DIR", upstreams: "CHAOS_CORE_UPSTREAMS_FILE" } as const satisfies FlagVariables;

const COMMAND_USAGE = {
  serve: "Usage: chaos-core serve [--host HOST] [--port PORT] [--data-dir DIR] [--upstreams FILE]",
  stdio: "Usage: chaos-core stdio [--data-dir DIR] [--upstreams FILE]",
  "chp-conformance": "Usage: chaos-core chp-conformance < requests.jsonl (chaos-core chp-conformance --help)",
  bridge: "Usage: chaos-core bridge [--host HOST] [--port PORT] [--token-file FILE] -- CMD [ARGS...] (chaos-core bridge --help)",
  witness: "Usage: chaos-core witness --name NAME --key-file FILE --log PREFIX=KEY [--state FILE] [--host HOST] [--port PORT] (chaos-core witness --help)",
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
      case "upstreams":
        return await (await import("./upstreams-command.js")).runUpstreamsCommand(rest, { stdout: process.stdout, stderr: process.stderr, env: process.env, version: VERSION });
      case "bridge":
        // Loaded here: the bridge serves one stdio server and needs none of the services.
        return await (await import("./bridge-command.js")).runBridgeCommand(rest, { stdout: process.stdout, stderr: process.stderr, env: process.env });
      case "witness":
        // Loaded here: a witness needs none of the services.
        return await (await import("./witness-command.js")).runWitnessCommand(rest, { stdout: process.stdout, stderr: process.stderr, env: process.env });
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
          ? usageError(`unknown option ${command}${meantHint(command, TOP_OPTIONS)}`, COMMAND_USAGE.top)
          : usageError(unknownCommand("command", command, COMMANDS).message, COMMAND_USAGE.top);
    }
  } catch (err) {
    if (err instanceof UsageError) return usageError(err.message, COMMAND_USAGE[command === "chp-conformance" || command === "bridge" || command === "witness" ? command : "top"]);
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
    if (mode === "serve") {
      // A port another process holds is named before anything slow starts (the data directory,
      // the embedded database's first creation).
      const taken = await portProblem(edgeConfig.http.host, edgeConfig.http.port);
      if (taken) {
        process.stderr.write(`chaos-core: ${taken}\n`);
        return 1;
      }
    }
    // The data directory is this process's before anything answers: a second serve fails here,
    // and a directory that cannot be used is the one line a person reads. A second stdio relays
    // through the process that holds it (docs/protocol.md §16).
    const start = () => startRuntime(config, logger, {
      version: VERSION,
      sessionTtlSeconds: edgeConfig.sessionTtlSeconds,
      mrtr: { ttlSeconds: edgeConfig.mrtrTtlSeconds, ...(edgeConfig.mrtrKeysFile ? { keysFile: edgeConfig.mrtrKeysFile } : {}) },
      admin: true,
      // stdio opens them on the first request that needs them: a 2026-07-28 client's version
      // probe (a sibling process sent `server/discover` alone, then stopped) never does.
      openOnDemand: mode === "stdio",
      contractLockFile: edgeConfig.contracts.lockFile,
      upstreams: loadUpstreamsConfig(env),
      ...(edgeConfig.rateLimitsFile ? { rateLimits: loadRateLimitsFile(edgeConfig.rateLimitsFile) } : {}),
    });
    if (mode === "stdio") {
      const opened = await startOrAttach(start, config.dataDir, config.stdioAttachSeconds, logger);
      if (opened.kind !== "owner") return await serveAttached(opened, logger);
      starting = opened.starting;
    } else {
      starting = await start().catch(async (err: unknown) => {
        throw isDataDirInUse(err) ? new Error(await heldAgainstServe(config.dataDir), { cause: err }) : err;
      });
    }
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
    // The listeners beside the transport (stdio's console, the endpoint offered to relays and its
    // agent.json, the keys file watcher), once started; closed before the runtime.
    const closers: Array<() => Promise<void> | void> = [];
    const closeListeners = async () => {
      for (const close of closers.splice(0)) await Promise.resolve(close()).catch((err: unknown) => logger.warn({ err }, "closing a listener failed"));
    };
    const stop = async (reason: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ reason }, "chaos-core stopping");
      await transport?.close().catch((err: unknown) => logger.warn({ err }, "transport close failed"));
      await closeListeners();
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
      // A chaos-core stdio started on this data directory relays its host through this listener
      // as the local agent, with a credential of its own (agent.json, 0600): never the operator's.
      const agentToken = newAgentToken();
      const http = await startHttpTransport(
        { ...runtime.deps, approvalWaitSeconds: edgeConfig.approvalWaitSeconds, contracts },
        { ...edgeConfig.http, directory: runtime.tenants.directory, localAgent: { token: agentToken }, ...(consoleOptions ? { console: consoleOptions } : {}) },
      );
      transport = http;
      const agentUrl = loopbackMcpUrl(edgeConfig.http.host, http.port);
      if (agentUrl) {
        const published = await publishAgentEndpoint(config.dataDir, { url: agentUrl, token: agentToken, mode: "serve" });
        closers.push(() => published.close());
      } else {
        logger.warn({ host: edgeConfig.http.host }, "not offering the MCP endpoint to chaos-core stdio processes: it does not listen on loopback");
      }
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
        // Once the stores are open, other stdio processes on this directory relay through this one.
        rt.ready.then(
          (runtime) => (stopping ? undefined : offerToRelays(stdioDeps, runtime.tenants.directory, config.dataDir, logger, closers)),
          () => {},
        ).catch((err: unknown) =>
          logger.error({ err: err instanceof Error ? err.message : String(err) }, "could not offer this process's MCP endpoint to other chaos-core stdio processes"),
        );
        if (!edgeConfig.console) return;
        const { listenerPort } = edgeConfig.console;
        // After a turn of the event loop: the request already waiting on stdin is answered first.
        setImmediate(() => {
          if (stopping) return;
          startStdioConsole(rt, edgeConfig.http.apiKeysFile, listenerPort, logger, closers).then(
            // Stopped meanwhile: what started after stop closed the rest is closed now.
            (origin) => (stopping ? void closeListeners() : void (consoleOrigin = origin)),
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
 * Why `chaos-core serve` cannot listen on `host:port`, naming the way out, or undefined when it can
 * (0: any free port). Asked before anything slow starts; the listener itself binds later.
 */
async function portProblem(host: string, port: number): Promise<string | undefined> {
  if (port === 0) return undefined;
  const { createServer } = await import("node:net");
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => {
      const why =
        err.code === "EADDRINUSE"
          ? `port ${port} on ${host} is in use by another process`
          : err.code === "EACCES"
            ? `this user may not listen on port ${port} on ${host}`
            : `cannot listen on ${host}:${port} (${err.message})`;
      resolve(`${why}: choose another with --port N (or PORT=N)${err.code === "EADDRNOTAVAIL" || err.code === "ENOTFOUND" ? ", or another --host (HOST)" : ""}`);
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

/** The runtime this stdio process opened, or how it serves a data directory another process holds. */
type StdioStart = { readonly kind: "owner"; readonly starting: StartingRuntime } | Exclude<Attachment, { kind: "free" }>;

/**
 * Takes the data directory, or, while another process holds it, waits for that process to offer
 * its MCP endpoint (relay) or to let go (take it then); neither within `waitSeconds` → refuse.
 */
async function startOrAttach(start: () => Promise<StartingRuntime>, dataDir: string, waitSeconds: number, logger: Logger): Promise<StdioStart> {
  for (;;) {
    try {
      return { kind: "owner", starting: await start() };
    } catch (err) {
      if (!isDataDirInUse(err)) throw err;
    }
    const attached = await attachToDataDir(dataDir, waitSeconds * 1000, () =>
      logger.info({ dataDir, waitSeconds }, "another chaos-core process holds the data directory: waiting for it to offer its MCP endpoint, or to let go"),
    );
    if (attached.kind !== "free") return attached;
  }
}

/** Serves the host through the process that holds the directory, or answers every request with why it cannot. */
async function serveAttached(attached: Exclude<StdioStart, { kind: "owner" }>, logger: Logger): Promise<number> {
  const { runStdioRefusal, runStdioRelay } = await import("@chaos-core/edge/relay");
  let ended!: () => void;
  const done = new Promise<void>((resolve) => (ended = resolve));
  const transport =
    attached.kind === "relay"
      ? await runStdioRelay({ url: attached.endpoint.url, token: attached.endpoint.token, upstream: attached.upstream, logger, onClose: () => ended() })
      : runStdioRefusal(attached.message, { logger, onClose: () => ended() });
  if (attached.kind === "refuse") process.stderr.write(`chaos-core: ${attached.message}\n`);
  process.once("SIGTERM", () => void transport.close());
  process.once("SIGINT", () => void transport.close());
  await done;
  return attached.kind === "refuse" ? 1 : 0;
}

/**
 * The listener a stdio process that holds the data directory offers to other stdio processes on
 * it (loopback, a free port, the local agent's credential only), published in agent.json.
 */
async function offerToRelays(
  deps: EdgeDeps,
  directory: CredentialDirectory,
  dataDir: string,
  logger: Logger,
  closers: Array<() => Promise<void> | void>,
): Promise<void> {
  const { startHttpTransport } = await import("@chaos-core/edge");
  const token = newAgentToken();
  // The registry holds the local tenant's toolsets and limits, as for this process's own stdio;
  // no credential of it is taken here (`only`).
  const http = await startHttpTransport(deps, { host: "127.0.0.1", port: 0, directory, localAgent: { token, only: true } });
  closers.unshift(() => http.close());
  const published = await publishAgentEndpoint(dataDir, { url: http.url, token, mode: "stdio" });
  closers.unshift(() => published.close());
  logger.info({ url: http.url }, "other chaos-core stdio processes on this data directory relay through this one");
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
