#!/usr/bin/env node
// Launcher for the `chaos-core` command. The bootstrap (.env, then telemetry) is imported first so
// the ESM loader hook is registered before pg, ioredis or http load; the CLI comes after it.
await import("@chaos-core/kit/telemetry");
const { main } = await import("../dist/cli.js");
process.exitCode = await main(process.argv.slice(2));
