#!/usr/bin/env node
// `npm start`: serves Chaos Core on the embedded stores, saying what it does while it does it.
// In order: the port `chaos-core serve` will listen on is checked first, before anything slow (a
// fresh clone's build takes about a minute); then the TypeScript build (`tsc -b`, a few seconds
// when nothing changed), with a line every 15 s while it runs; then `chaos-core serve` with the
// arguments given after `--` (`npm start -- --port 4000`). The port and host come from those
// arguments, else PORT and HOST, else the working directory's .env, as the server reads them.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseEnv } from "node:util";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const say = (line) => process.stderr.write(`npm start: ${line}\n`);

/** The value of `--name V` or `--name=V` among the arguments, if given. */
function flag(name) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === `--${name}`) return args[i + 1];
    if (args[i].startsWith(`--${name}=`)) return args[i].slice(name.length + 3);
  }
  return undefined;
}

const dotenv = existsSync(".env") ? parseEnv(readFileSync(".env", "utf8")) : {};
const host = flag("host") ?? process.env.HOST ?? dotenv.HOST ?? "127.0.0.1";
const portText = flag("port") ?? process.env.PORT ?? dotenv.PORT ?? "3000";
const port = Number(portText);

/** Why the server could not listen on host:port, or undefined when it can (or the server will say why not). */
function portProblem() {
  if (!Number.isInteger(port) || port <= 0 || port > 65535) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", (err) =>
      resolve(err.code === "EADDRINUSE" ? `port ${port} on ${host} is in use by another process` : err.code === "EACCES" ? `this user may not listen on port ${port}` : undefined),
    );
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

/** Runs a command with this process's stdio; resolves with its exit code (a signal counts as 1). */
function run(command, commandArgs) {
  return new Promise((resolve) => {
    const child = spawn(command, commandArgs, { cwd: root, stdio: "inherit" });
    const forward = (signal) => child.kill(signal);
    process.on("SIGINT", forward).on("SIGTERM", forward);
    child.once("exit", (code, signal) => {
      process.off("SIGINT", forward).off("SIGTERM", forward);
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}

const taken = await portProblem();
if (taken) {
  say(`${taken}: choose another with \`npm start -- --port N\` (or PORT=N npm start); nothing was built or started`);
  process.exit(1);
}

const fresh = !existsSync(join(root, "services/standalone/dist/cli.js"));
say(`building the TypeScript sources (tsc -b)${fresh ? ": a first build takes about a minute" : ""}`);
const started = Date.now();
const ticker = setInterval(() => say(`still building (${Math.round((Date.now() - started) / 1000)} s)`), 15_000);
const built = await run(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-b"]);
clearInterval(ticker);
if (built !== 0) {
  say("the build failed (above); nothing was started");
  process.exit(built);
}
say(`built in ${Math.round((Date.now() - started) / 1000)} s; starting chaos-core serve`);
process.exit(await run(process.execPath, [join(root, "services/standalone/bin/chaos-core.js"), "serve", ...args]));
