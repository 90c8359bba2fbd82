import { readFile } from "node:fs/promises";
import { createLogger, type Env } from "@chaos-core/kit";
import { DEFAULT_BRIDGE_IDLE_MS, DEFAULT_BRIDGE_MAX_SESSIONS, DEFAULT_BRIDGE_PORT, startBridge } from "./bridge.js";
import { parseCommandLine, UsageError, withFlags } from "./command-line.js";

// `chaos-core bridge [options] -- CMD [ARGS…]`: a stdio MCP server over Streamable HTTP (bridge.ts).

export const BRIDGE_USAGE = `Usage: chaos-core bridge [--host HOST] [--port PORT] [--token-file FILE]
                         [--max-sessions N] [--idle-seconds S] -- CMD [ARGS...]

Serves the stdio MCP server CMD ARGS over Streamable HTTP at http://HOST:PORT/mcp, one process
of it per MCP session (started at initialize, stopped when the session ends), so Chaos Core's
cognition reaches it like any HTTP upstream (docs/federation-platform.md §2).

  --host HOST          where to listen (HOST; default 127.0.0.1)
  --port PORT          (PORT; default ${DEFAULT_BRIDGE_PORT})
  --token-file FILE    a file holding the bearer token every request must carry
                       (CHAOS_CORE_BRIDGE_TOKEN_FILE); required beyond loopback
  --max-sessions N     sessions (processes) at once (CHAOS_CORE_BRIDGE_MAX_SESSIONS; default ${DEFAULT_BRIDGE_MAX_SESSIONS})
  --idle-seconds S     a session idle this long is ended (CHAOS_CORE_BRIDGE_IDLE_SECONDS; default ${DEFAULT_BRIDGE_IDLE_MS / 1000})

GET /healthz answers while it listens. SIGTERM ends every session and stops their processes.
`;

const FLAGS = {
  host: "HOST",
  port: "PORT",
  "token-file": "CHAOS_CORE_BRIDGE_TOKEN_FILE",
  "max-sessions": "CHAOS_CORE_BRIDGE_MAX_SESSIONS",
  "idle-seconds": "CHAOS_CORE_BRIDGE_IDLE_SECONDS",
} as const;

function integer(env: Env, name: string, fallback: number, min: number, max: number, named: string): number {
  const text = env[name];
  if (text === undefined || text === "") return fallback;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) throw new UsageError(`${named}: must be an integer from ${min} to ${max}, not "${text}"`);
  return n;
}

export interface BridgeIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: Env;
}

/** Runs the bridge until SIGTERM or SIGINT; resolves with the exit code. */
export async function runBridgeCommand(args: string[], io: BridgeIo): Promise<number> {
  const split = args.indexOf("--");
  const own = split === -1 ? args : args.slice(0, split);
  const command = split === -1 ? [] : args.slice(split + 1);
  const options = Object.fromEntries(Object.keys(FLAGS).map((name) => [name, { type: "string" as const }]));
  const { values } = parseCommandLine(own, { ...options, help: { type: "boolean" as const, short: "h" } });
  if (values.help) {
    io.stdout.write(BRIDGE_USAGE);
    return 0;
  }
  if (command.length === 0 || command[0] === "") throw new UsageError("bridge needs the stdio server's command after --: chaos-core bridge -- node server.js");
  const { env, fromFlags } = withFlags(io.env, values, FLAGS);
  // A problem names the flag and its variable when a flag set it, else the variable.
  const flag = (variable: string) => (fromFlags.has(variable) ? `${fromFlags.get(variable)} (${variable})` : variable);
  const port = integer(env, "PORT", DEFAULT_BRIDGE_PORT, 0, 65535, flag("PORT"));
  const maxSessions = integer(env, "CHAOS_CORE_BRIDGE_MAX_SESSIONS", DEFAULT_BRIDGE_MAX_SESSIONS, 1, 10_000, flag("CHAOS_CORE_BRIDGE_MAX_SESSIONS"));
  const idleSeconds = integer(env, "CHAOS_CORE_BRIDGE_IDLE_SECONDS", DEFAULT_BRIDGE_IDLE_MS / 1000, 1, 86_400, flag("CHAOS_CORE_BRIDGE_IDLE_SECONDS"));
  const tokenFile = env.CHAOS_CORE_BRIDGE_TOKEN_FILE;
  let token: string | undefined;
  if (tokenFile) {
    token = (await readFile(tokenFile, "utf8").catch((err: NodeJS.ErrnoException) => {
      throw new UsageError(`${flag("CHAOS_CORE_BRIDGE_TOKEN_FILE")}: cannot read ${tokenFile} (${err.code ?? err.message})`);
    })).replace(/\r?\n$/, "");
    if (token.length < 16) throw new UsageError(`${flag("CHAOS_CORE_BRIDGE_TOKEN_FILE")}: the token in ${tokenFile} is shorter than 16 characters`);
  }
  const logger = createLogger("chaos-core-bridge", (env.LOG_LEVEL as "info" | undefined) ?? "info");
  let bridge;
  try {
    bridge = await startBridge({
      command: command[0]!,
      args: command.slice(1),
      env: Object.fromEntries(Object.entries(io.env).filter((e): e is [string, string] => e[1] !== undefined)),
      host: env.HOST ?? "127.0.0.1",
      port,
      ...(token ? { token } : {}),
      maxSessions,
      idleMs: idleSeconds * 1000,
      logger,
    });
  } catch (err) {
    io.stderr.write(`chaos-core bridge: ${(err as Error).message}\n`);
    return 1;
  }
  logger.info({ url: bridge.url, command: command[0], args: command.slice(1), max_sessions: maxSessions, token: token ? "required" : "none" }, "bridging the stdio MCP server over Streamable HTTP");
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal, sessions: bridge.sessions() }, "stopping: ending every session");
      void bridge.close().then(resolve, resolve);
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
  logger.info("stopped");
  return 0;
}
