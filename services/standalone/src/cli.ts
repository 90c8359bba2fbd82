import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { ChaosError, createLogger, type Logger } from "@chaos-core/kit";
import type { runChpConformance as RunChpConformance } from "./chp-conformance.js";
import type { runLedgerCommand as RunLedgerCommand } from "./ledger-command.js";
import { runApprovalsCommand } from "./approvals-command.js";
import { loadStandaloneConfig } from "./config.js";
import type { Runtime } from "./runtime.js";
import type { StartingRuntime } from "./startup.js";

const VERSION = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string })
  .version;

// Loaded when their command runs, so `chaos-core stdio` reaches its transport without the ledger.
const runChpConformance: typeof RunChpConformance = async (...args) =>
  (await import("./chp-conformance.js")).runChpConformance(...args);
const runLedgerCommand: typeof RunLedgerCommand = async (...args) => (await import("./ledger-command.js")).runLedgerCommand(...args);

const USAGE = `Usage: chaos-core <command>

Commands:
  serve     Serve MCP over Streamable HTTP at http://HOST:PORT/mcp (default 127.0.0.1:3000)
  stdio     Serve MCP over stdio (stdout carries only JSON-RPC; logs go to stderr)
  chp-conformance
            Speak the CHP conformance line protocol on stdin/stdout (one JSON request
            {"op", "args"} per line; ops canonical_json, content_hash, chain_hash,
            evaluate_gate, approve_human); exits 0 at end of input
  ledger    verify | export a tenant's audit ledger (chaos-core ledger help)
  approvals list | approve | reject | approve-spend: answer pending approvals as the operator,
            through the running server's loopback admin endpoint (chaos-core approvals help)
  help      Show this text

Every service runs in this one process, on embedded stores under CHAOS_CORE_DATA_DIR
(default ./data), or on Postgres and Redis when DATABASE_URL / REDIS_URL are set.
See .env.example for every setting.
`;

/** Runs the command line and resolves with the exit code (servers resolve when they stop). */
export async function main(argv: string[]): Promise<number> {
  // `ledger` has options of its own, which the strict parse below would refuse.
  if (argv[0] === "ledger") return runLedgerCommand(argv.slice(1));
  if (argv[0] === "approvals") {
    return runApprovalsCommand(argv.slice(1), { stdout: process.stdout, stderr: process.stderr, env: process.env });
  }
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { version: { type: "boolean" }, help: { type: "boolean", short: "h" } },
  });
  if (values.version) {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const command = values.help ? "help" : (positionals[0] ?? "help");
  switch (command) {
    case "serve":
    case "stdio":
      return serve(command);
    case "chp-conformance":
      return runChpConformance(process.stdin, process.stdout);
    case "help":
      process.stdout.write(USAGE);
      return 0;
    default:
      process.stderr.write(`chaos-core: unknown command "${command}"\n\n${USAGE}`);
      return 2;
  }
}

/** How long a failed start-up lets the client read the answers to calls already made, at most. */
const FAILED_START_DRAIN_MS = 2_000;

async function serve(mode: "serve" | "stdio"): Promise<number> {
  let logger: Logger = createLogger("chaos-core");
  let starting: StartingRuntime | undefined;
  try {
    // Loaded here, not at the top: the other commands (chp-conformance, ledger, approvals) start
    // without every service in memory. The services themselves load in the background (startup.ts),
    // and the HTTP transport only for serve.
    const { loadEdgeConfig, runStdioTransport } = await import("@chaos-core/edge/stdio");
    const { startRuntime } = await import("./startup.js");
    const config = loadStandaloneConfig(process.env);
    const edgeConfig = loadEdgeConfig(process.env);
    logger = createLogger("chaos-core", config.logLevel);
    // The data directory is this process's before anything answers: a second process fails here.
    starting = await startRuntime(config, logger, {
      version: VERSION,
      sessionTtlSeconds: edgeConfig.sessionTtlSeconds,
      admin: true,
    });
    const rt = starting;
    const announce = (runtime: Runtime) =>
      logger.info({ mode, dataDir: config.dataDir, ...runtime.stores, admin: rt.admin?.url }, "chaos-core starting");

    let transport: { close(): Promise<void> } | undefined;
    let exitCode = 0;
    let stopping = false;
    let resolveStopped!: () => void;
    const stopped = new Promise<void>((resolve) => (resolveStopped = resolve));
    const stop = async (reason: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ reason }, "chaos-core stopping");
      await transport?.close().catch((err: unknown) => logger.warn({ err }, "transport close failed"));
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
      const http = await startHttpTransport(runtime.deps, edgeConfig.http);
      transport = http;
      // The one line on stdout a person (or a script) looks for.
      process.stdout.write(`Chaos Core MCP endpoint: ${http.url}\n`);
    } else {
      // A host waits for the answer to initialize: it comes now, while the stores open.
      logger.info({ dataDir: config.dataDir }, "serving MCP on stdio; opening the stores");
      const stdio = await runStdioTransport(rt.deps, { onClose: () => void stop("stdin closed") });
      transport = stdio;
      rt.ready.then(announce, async (err: unknown) => {
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

/** What a person reads: the cause itself, not the `unavailable` wrapper the calls answer with. */
function startupFailure(err: unknown): string {
  const cause = err instanceof ChaosError && err.code === "unavailable" && err.cause instanceof Error ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}
