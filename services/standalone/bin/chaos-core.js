#!/usr/bin/env node
// Launcher for the `chaos-core` command. Telemetry is imported first so its ESM loader hook
// is registered before pg, ioredis or http load; the CLI is imported only after that.
await import("@chaos-core/kit/telemetry");
const { main } = await import("../dist/cli.js");
process.exitCode = await main(process.argv.slice(2));
