import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { removeDir, runToExit, startServe, stdioClient, tempDir } from "../support/processes.js";

const VERSION = (JSON.parse(readFileSync(new URL("../../services/standalone/package.json", import.meta.url), "utf8")) as { version: string }).version;

/** A port nothing listens on right now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("chaos-core serve on a data directory", () => {
  const dir = tempDir();
  afterAll(() => removeDir(dir));

  it("creates a safe default policy on first run and prints the endpoint on 127.0.0.1", async () => {
    const serve = await startServe({ CHAOS_CORE_DATA_DIR: dir });
    try {
      expect(serve.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      const policy = JSON.parse(readFileSync(join(dir, "policy.json"), "utf8")) as Record<string, unknown>;
      expect(policy.requireConfirmationFor).toEqual(["http.request"]);
      expect(policy.deniedCapabilities).toEqual([]);

      // A second process on the same directory fails at once and touches nothing.
      const before = snapshot(dir);
      const second = await runToExit(["serve"], { CHAOS_CORE_DATA_DIR: dir, PORT: "0" }, 30_000);
      expect(second.code).not.toBe(0);
      expect(second.stderr).toMatch(/is in use: chaos-core serve \(pid \d+\) serves it, at http:\/\/127\.0\.0\.1:\d+\/mcp/);
      expect(second.stdout).toBe("");
      expect(snapshot(dir)).toEqual(before);
    } finally {
      await serve.stop();
    }
  });

  it("serve --port and --host listen where the flags say, over PORT and HOST", async () => {
    const port = await freePort();
    // Either variable alone would stop start-up: the flags win. (The data directory the first test made.)
    const serve = await startServe({ CHAOS_CORE_DATA_DIR: dir, PORT: "not-a-port", HOST: "0.0.0.0" }, 60_000, [
      "--port",
      String(port),
      "--host",
      "127.0.0.1",
    ]);
    try {
      expect(serve.url).toBe(`http://127.0.0.1:${port}/mcp`);
    } finally {
      await serve.stop();
    }
  });

  it("refuses to start on a malformed policy file and names the field", async () => {
    const bad = tempDir();
    try {
      writeFileSync(join(bad, "policy.json"), JSON.stringify({ deniedCapabilities: ["ok.one", 7] }));
      const run = await runToExit(["serve"], { CHAOS_CORE_DATA_DIR: bad, PORT: "0" }, 60_000);
      expect(run.code).not.toBe(0);
      expect(run.stderr).toMatch(/deniedCapabilities\[1\]/);
    } finally {
      removeDir(bad);
    }
  });

  it("explains a bad setting by naming the variable", async () => {
    const run = await runToExit(["serve"], { CHAOS_CORE_DATA_DIR: dir, PORT: "not-a-port" }, 30_000);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/PORT/);
  });
});

describe("the chaos-core command line", () => {
  const dir = tempDir();
  afterAll(() => removeDir(dir));

  it("chaos-core -v prints the version as --version does", async () => {
    for (const flag of ["-v", "--version"]) {
      const run = await runToExit([flag], {}, 30_000);
      expect(run, flag).toMatchObject({ code: 0, stdout: `${VERSION}\n`, stderr: "" });
    }
  });

  it("answers an unknown option or a bad flag value with one line and the usage line, exit 2, never a stack trace", async () => {
    const cases: Array<[string[], RegExp]> = [
      [["--bogus"], /unknown option --bogus/],
      [["serve", "--bogus"], /unknown option '--bogus'/i],
      [["stdio", "--port", "4000"], /unknown option '--port'/i],
      [["serve", "--port", "not-a-port"], /--port: must be a port number/],
      [["serve", "--port"], /--port/],
      [["serve", "--port", ""], /--port needs a value/],
      [["chp-conformance", "--bogus"], /unknown option '--bogus'/i],
    ];
    for (const [args, problem] of cases) {
      const run = await runToExit(args, { CHAOS_CORE_DATA_DIR: dir }, 30_000);
      const what = args.join(" ");
      expect(run.code, what).toBe(2);
      expect(run.stdout, what).toBe("");
      const lines = run.stderr.trimEnd().split("\n");
      expect(lines, what).toHaveLength(2);
      expect(lines[0], what).toMatch(problem);
      expect(lines[1], what).toMatch(/^Usage: chaos-core /);
      expect(run.stderr, what).not.toMatch(/ERR_PARSE_ARGS|\n\s+at /);
    }
  });
});

describe("the per-user data directory", () => {
  const home = tempDir("chaos-core-home-");
  const hostCwd = tempDir("chaos-core-host-cwd-");
  afterAll(() => {
    removeDir(home);
    removeDir(hostCwd);
  });

  it("a stdio server started without CHAOS_CORE_DATA_DIR keeps its data there, not in the host's working directory, says so, and chaos-core approvals finds it", async () => {
    const env = { HOME: home, XDG_DATA_HOME: join(home, "xdg"), LOG_LEVEL: "info" };
    const dataDir = join(home, "xdg", "chaos-core");
    const { client, stderr } = await stdioClient(env, hostCwd);
    try {
      expect((await client.callTool({ name: "chp_version", arguments: {} })).isError).toBeFalsy();
      expect(existsSync(join(dataDir, "ledger-keyring.json"))).toBe(true);
      // The key that seals multi-round-trip requestState, owner-only, like the ledger's.
      expect(statSync(join(dataDir, "mrtr-keyring.json")).mode & 0o777).toBe(0o600);
      expect(readdirSync(hostCwd)).toEqual([]);
      expect(stderr()).toContain(`"dataDir":"${dataDir}"`);

      // The operator's command, from another directory, with only the same user's environment.
      const approvals = await runToExit(["approvals", "list"], { HOME: home, XDG_DATA_HOME: join(home, "xdg") }, 30_000);
      expect(approvals).toMatchObject({ code: 0, stdout: "No pending approvals in tenant default.\n" });
    } finally {
      await client.close();
    }
  });

  it("a data directory that cannot be created stops start-up with one line naming it and CHAOS_CORE_DATA_DIR, exit 1", async () => {
    const notADir = join(home, "a-file");
    writeFileSync(notADir, "");
    const run = await runToExit(["stdio"], { HOME: home, XDG_DATA_HOME: notADir }, 30_000, hostCwd);
    expect(run.code).toBe(1);
    const lines = run.stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^chaos-core: cannot use the data directory .*a-file\/chaos-core \(ENOTDIR.*\): set CHAOS_CORE_DATA_DIR/);
    expect(readdirSync(hostCwd)).toEqual([]);
  });
});

/**
 * What a second process could have touched: the set of files (the embedded database may
 * rewrite its own files on its own schedule, so only names count there) and the policy
 * files' modification times.
 */
function snapshot(dir: string): { files: string[]; policy: number[] } {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else files.push(p);
    }
  };
  walk(dir);
  const policy = files.filter((f) => /policy[^/]*\.json$/.test(f)).map((f) => statSync(f).mtimeMs);
  return { files: files.sort(), policy };
}
