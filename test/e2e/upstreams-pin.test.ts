import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectUpstream } from "@chaos-core/cognition";
import { parseUpstreamsFile } from "@chaos-core/kit";
import { removeDir, ROOT, runToExit, tempDir } from "../support/processes.js";

/**
 * Issue 32, increment 3: the operator's upstreams, pinned before anything of them is served, with
 * real MCP servers nobody here wrote (from npm, run offline) and a small SDK server that changes a
 * tool after it was pinned.
 */

const server = (pkg: string) => join(ROOT, "node_modules/@modelcontextprotocol", pkg, "dist/index.js");
const CHANGING = join(ROOT, "test/support/upstreams/changing-server.mjs");

const echoTool = (description: string, required = ["message"]) => ({
  tools: [
    {
      name: "echo",
      description,
      inputSchema: { type: "object", properties: { message: { type: "string" }, to: { type: "string" } }, required },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
  ],
});

describe("chaos-core upstreams: declared, pinned, diffed", () => {
  const dir = tempDir("chaos-core-upstreams-");
  const share = join(dir, "share");
  const changing = join(dir, "changing-tools.json");
  const env = { CHAOS_CORE_DATA_DIR: dir };
  const cli = (args: string[]) => runToExit(["upstreams", ...args], env, 90_000);

  beforeAll(() => {
    mkdirSync(share);
    writeFileSync(changing, JSON.stringify(echoTool("Echoes its message back")));
    writeFileSync(
      join(dir, "upstreams.json"),
      JSON.stringify({
        upstreams: [
          { name: "everything", command: process.execPath, args: [server("server-everything"), "stdio"] },
          { name: "files", command: process.execPath, args: [server("server-filesystem"), share] },
          { name: "graph", command: process.execPath, args: [server("server-memory")], env: { MEMORY_FILE_PATH: "graph.jsonl" } },
          { name: "changing", command: process.execPath, args: [CHANGING, changing] },
        ],
      }),
    );
  });
  afterAll(() => removeDir(dir));

  it("pins every tool of every declared upstream, and serves names and risk from the pin", async () => {
    const before = await cli(["list"]);
    expect(before.stdout).toContain("files\tstdio\tnot pinned (chaos-core upstreams lock)");

    const locked = await cli(["lock"]);
    expect(locked.code, locked.stderr).toBe(0);
    expect(locked.stdout).toMatch(/wrote .*upstreams\.lock \(everything: \d+ tools, files: 14 tools, graph: 9 tools, changing: 1 tools\)/);
    const lock = JSON.parse(readFileSync(join(dir, "upstreams.lock"), "utf8")) as { upstreams: Record<string, { tools: Record<string, unknown> }> };
    expect(Object.keys(lock.upstreams.files!.tools)).toEqual(expect.arrayContaining(["read_text_file", "write_file"]));

    const shown = JSON.parse((await cli(["show", "files", "--json"])).stdout) as { tools: Array<{ tool: string; capability: string; mcp_name: string; risk: string }> };
    // The server's own annotations: reads are read-only, writes destructive.
    expect(shown.tools).toEqual(
      expect.arrayContaining([
        { tool: "read_text_file", capability: "files.read_text_file", mcp_name: "files__read_text_file", risk: "low" },
        { tool: "write_file", capability: "files.write_file", mcp_name: "files__write_file", risk: "high" },
      ]),
    );
    const everything = JSON.parse((await cli(["show", "everything", "--json"])).stdout) as { tools: Array<{ tool: string; capability: string }> };
    expect(everything.tools).toEqual(expect.arrayContaining([expect.objectContaining({ tool: "get-env", capability: "everything.get_env" })]));
    expect((await cli(["lock", "--check"])).code).toBe(0);
  });

  it("names a changed tool's verdict: a reworded description is cosmetic, a new required field breaking", async () => {
    writeFileSync(changing, JSON.stringify(echoTool("Echoes the message it is given")));
    const reworded = await cli(["diff", "changing"]);
    expect(reworded.code, reworded.stderr).toBe(0);
    expect(reworded.stdout).toMatch(/^changing: COSMETIC\n/);

    writeFileSync(changing, JSON.stringify(echoTool("Echoes the message it is given", ["message", "to"])));
    const check = await cli(["lock", "--check"]);
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(/changing: BREAKING\n/);
    expect(check.stdout).toMatch(/BREAKING tools\/echo surface .*to/);
    // Every other upstream still matches its pin.
    expect(check.stdout).not.toMatch(/^(everything|files|graph):/m);
  });

  it("starts a stdio upstream with none of Chaos Core's environment, only what its declaration lists", async () => {
    const [everything] = parseUpstreamsFile(
      JSON.stringify({ upstreams: [{ name: "everything", command: process.execPath, args: [server("server-everything"), "stdio"], env: { GREETING: "hello", TOKEN: { env: "CHAOS_CORE_UPSTREAM_SECRET_TOKEN" } } }] }),
      "test",
    );
    const secret = `tok-${Date.now()}`;
    const connection = await connectUpstream(everything!, {
      secrets: { env: { CHAOS_CORE_UPSTREAM_SECRET_TOKEN: secret } },
      workDir: join(dir, "upstreams"),
      version: "test",
    });
    try {
      const result = await connection.callTool("get-env", {});
      const text = result.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
      const printed = JSON.parse(text) as Record<string, string>;
      expect(printed.GREETING).toBe("hello");
      expect(printed.TOKEN).toBe(secret);
      expect(printed.HOME).toBe(join(dir, "upstreams", "everything"));
      // This test process's own environment (database and Redis URLs among it) stays here.
      for (const name of Object.keys(process.env)) {
        if (["PATH", "SHELL", "TERM", "USER", "LOGNAME", "HOME"].includes(name)) continue;
        expect(printed, name).not.toHaveProperty(name);
      }
    } finally {
      await connection.close();
    }
  });

  it("refuses a declaration that would send a secret outside the upstreams' namespace, naming the field", async () => {
    const bad = join(dir, "bad-upstreams.json");
    writeFileSync(bad, JSON.stringify({ upstreams: [{ name: "gh", url: "https://mcp.example.com/mcp", headers: { Authorization: { env: "DATABASE_URL" } } }] }));
    const refused = await cli(["list", "--upstreams", bad]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("upstreams[0].headers.Authorization.env: must name a variable whose name starts with CHAOS_CORE_UPSTREAM_SECRET_");
  });
});
