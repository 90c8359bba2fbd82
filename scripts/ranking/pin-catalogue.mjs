#!/usr/bin/env node
// Pins test/fixtures/ranking/catalogue.json (docs/federation-platform.md §4): each real MCP server
// of the catalogue, at the version it names, started with `npx -y` (placeholder tokens where one
// wants one at start; none is used: listing tools needs no account) and asked tools/list over stdio
// by the SDK's client. Run by hand when the set should move: `node scripts/ranking/pin-catalogue.mjs`;
// review the diff, then measure again (objectives.json stays as committed).
import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const FILE = resolve(import.meta.dirname, "../../test/fixtures/ranking/catalogue.json");
const ARGS = { "@modelcontextprotocol/server-filesystem": [tmpdir()], "@modelcontextprotocol/server-everything": ["stdio"] };
const PLACEHOLDERS = { GITHUB_PERSONAL_ACCESS_TOKEN: "x", SLACK_BOT_TOKEN: "x", SLACK_TEAM_ID: "x", BRAVE_API_KEY: "x" };

const catalogue = JSON.parse(readFileSync(FILE, "utf8"));
for (const upstream of catalogue.upstreams) {
  const client = new Client({ name: "chaos-core-pin-catalogue", version: "1.0.0" });
  const transport = new StdioClientTransport({
    command: "npx",
    args: ["-y", `${upstream.package}@${upstream.version}`, ...(ARGS[upstream.package] ?? [])],
    env: { PATH: process.env.PATH, HOME: process.env.HOME ?? tmpdir(), ...PLACEHOLDERS },
    cwd: join(tmpdir()),
    stderr: "ignore",
  });
  await client.connect(transport, { timeout: 120_000 });
  const { tools } = await client.listTools();
  upstream.tools = tools.map((t) => ({ name: t.name, title: t.title ?? t.annotations?.title ?? "", description: t.description ?? "" }));
  console.error(`${upstream.name}: ${upstream.package}@${upstream.version}, ${tools.length} tools`);
  await client.close();
}
writeFileSync(FILE, `${JSON.stringify(catalogue, null, 1)}\n`);
