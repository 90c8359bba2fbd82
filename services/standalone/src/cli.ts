import { readFileSync } from "node:fs";
import { ConfigError, createLogger, type Env, type Logger } from "@chaos-core/kit";
import { CHP_CONFORMANCE_USAGE, runChpConformance } from "./chp-conformance.js";
import { runLedgerCommand } from "./ledger-command.js";
import { runApprovalsCommand } from "./approvals-command.js";
import { flagProblem, parseCommandLine, UsageError, withFlags, type FlagVariables } from "./command-line.js";
import { loadStandaloneConfig } from "./config.js";
import type { Runtime } from "./runtime.js";

const VERSION = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string })
  .version;

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
  approvals list | approve | reject | approve-spend: answer pending approvals as the operator,
            through the running server's loopback admin endpoint (chaos-core approvals help)
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
    const { loadEdgeConfig } = await import("@chaos-core/edge");
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
      case "approvals":
        return await runApprovalsCommand(rest, { stdout: process.stdout, stderr: process.stderr, env: process.env });
      case "chp-conformance": {
        const { values } = parseCommandLine(rest, flagOptions({}));
        if (values.version) return await main(["--version"]);
        if (values.help) {
          process.stdout.write(CHP_CONFORMANCE_USAGE);
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

async function serve(mode: "serve" | "stdio", env: Env): Promise<number> {
  let logger: Logger = createLogger("chaos-core");
  let runtime: Runtime | undefined;
  try {
    // Loaded here, not at the top: the other commands (chp-conformance, ledger, approvals) start
    // without every service in memory.
    const { loadEdgeConfig, runStdioTransport, startHttpTransport } = await import("@chaos-core/edge");
    const { createRuntime } = await import("./runtime.js");
    const config = loadStandaloneConfig(env);
    const edgeConfig = loadEdgeConfig(env);
    logger = createLogger("chaos-core", config.logLevel);
    runtime = await createRuntime(config, logger, {
      version: VERSION,
      sessionTtlSeconds: edgeConfig.sessionTtlSeconds,
      admin: true,
    });
    const rt = runtime;
    logger.info({ mode, dataDir: config.dataDir, ...rt.stores, admin: rt.admin?.url }, "chaos-core starting");

    let transport: { close(): Promise<void> } | undefined;
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
      const http = await startHttpTransport(rt.deps, edgeConfig.http);
      transport = http;
      // The one line on stdout a person (or a script) looks for.
      process.stdout.write(`Chaos Core MCP endpoint: ${http.url}\n`);
    } else {
      transport = await runStdioTransport(rt.deps, { onClose: () => void stop("stdin closed") });
    }
    await stopped;
    return 0;
  } catch (err) {
    await runtime?.close();
    const message = err instanceof ConfigError || err instanceof Error ? err.message : String(err);
    process.stderr.write(`chaos-core: ${message}\n`);
    logger.debug({ err }, "start-up failed");
    return 1;
  }
}
