import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { localhostHostValidation } from "@modelcontextprotocol/express";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { originValidation } from "./host-and-origin.js";
import { consoleSigningKey } from "../console/csrf.js";
import { CONSOLE_PATH } from "../deps/console-links.js";
import { createConsoleRouter } from "../console/router.js";
import type { ConsoleKeys, ConsoleServeOptions } from "../console/options.js";
import { createMemoryConsoleSessionStore } from "../console/sessions.js";

/** Where the console listener listens, and what it serves with. */
export interface ConsoleListenerOptions extends ConsoleServeOptions {
  /** 0 (the default) picks a free port; `CHAOS_CORE_CONSOLE_PORT` sets one. Always on 127.0.0.1. */
  readonly port?: number;
  /** API keys an approver may sign in with besides the operator's links (the server's keys file, if any). */
  readonly keys?: ConsoleKeys;
}

/** A running console listener. */
export interface RunningConsoleListener {
  /** `http://127.0.0.1:<port>`: what links are built from. */
  readonly origin: string;
  /** `http://127.0.0.1:<port>/approvals`: what a person opens. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/**
 * The approval console on a listener of its own, for `chaos-core stdio` (which has no HTTP
 * listener for it to join): on 127.0.0.1 only, behind the loopback Host check and `/mcp`'s
 * Origin check, serving nothing but the console router (`/` sends a browser there).
 */
export async function startConsoleListener(deps: Pick<EdgeDeps, "cognition" | "ledger" | "logger" | "operator">, options: ConsoleListenerOptions = {}): Promise<RunningConsoleListener> {
  const app = express();
  app.disable("x-powered-by");
  app.use(localhostHostValidation(), originValidation([]));
  app.get("/", (_req, res) => res.redirect(303, CONSOLE_PATH));
  app.use(
    CONSOLE_PATH,
    createConsoleRouter({
      deps,
      sessions: options.sessions ?? createMemoryConsoleSessionStore(),
      ...(options.keys ? { keys: options.keys } : {}),
      ...(options.signInLinks ? { signInLinks: options.signInLinks } : {}),
      ...(options.publicUrl ? { publicUrl: options.publicUrl } : {}),
      signingKey: options.signingKey ?? consoleSigningKey(),
    }),
  );
  app.use((_req, res) => {
    res.status(404).type("text/plain; charset=utf-8").send(`Not found: this listener serves the approval console at ${CONSOLE_PATH}\n`);
  });

  const server: Server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    url: `${origin}${CONSOLE_PATH}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
