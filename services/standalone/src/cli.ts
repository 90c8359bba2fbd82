import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { ConfigError, createLogger, type Logger } from "@chaos-core/kit";
import { runChpConformance } from "./chp-conformance.js";
import { runLedgerCommand } from "./ledger-command.js";
import { runApprovalsCommand } from "./approvals-command.js";
import { loadStandaloneConfig } from "./config.js";
import type { Runtime } from "./runtime.js";

const VERSION = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string })
  .version;

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

async function serve(mode: "serve" | "stdio"): Promise<number> {
  let logger: Logger = createLogger("chaos-core");
  let runtime: Runtime | undefined;
  try {
    // Loaded here, not at the top: the other commands (chp-conformance, ledger, approvals) start
    // without every service in memory.
    const { loadEdgeConfig, runStdioTransport, startHttpTransport } = await import("@chaos-core/edge");
    const { createRuntime } = await import("./runtime.js");
    const config = loadStandaloneConfig(process.env);
    const edgeConfig = loadEdgeConfig(process.env);
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
