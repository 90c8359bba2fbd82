import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { serializeLock, upstreamContracts } from "@chaos-core/contracts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { freePort, waitForPort } from "../support/ports.js";

/**
 * Issue 32, item 1(b): a tenant's own upstream in the tenant registry — `chaos-core upstreams add
 * --tenant acme` connects to server-everything in its Streamable HTTP mode (from npm, run here),
 * reads its tools and pins them in the registry, through a running standalone's admin endpoint;
 * the address checks hold it back from 127.0.0.1 unless the operator allows the range; every
 * change is in acme's ledger; tenant B neither sees nor removes it; the header's secret value
 * appears nowhere.
 */

describe("a tenant's own upstream, in the registry", () => {
  const dir = tempDir("chaos-core-tenant-upstreams-");
  const secret = `tenant-upstream-secret-${randomBytes(8).toString("hex")}`;
  let remote: ChildProcess | undefined;
  let url = "";
  let serve: ServeProcess;
  const outputs: string[] = [];
  // The operator allows the loopback address server-everything listens on; the CLI reads the same setting.
  const allowing = () => ({ CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "127.0.0.1", CHAOS_CORE_UPSTREAM_SECRET_ACME: secret });
  const run = async (args: string[], env: Record<string, string | undefined> = allowing()) => {
    const r = await runToExit(args, env, 90_000);
    outputs.push(r.stdout, r.stderr);
    return r;
  };
  const ok = async (args: string[], env?: Record<string, string | undefined>) => {
    const r = await run(args, env);
    expect(r.code, `chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
    return r.stdout;
  };

  beforeAll(async () => {
    const port = await freePort();
    const everything = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    remote = spawn(process.execPath, [everything, "streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdio: "ignore" });
    await waitForPort(port);
    url = `http://127.0.0.1:${port}/mcp`;
    await seedDataDir(dir);
    // The operator's own upstream, whose name no tenant may take.
    writeFileSync(join(dir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "files", command: process.execPath, args: ["--version"] }] }));
    serve = await startServe({ ...allowing(), LOG_LEVEL: "debug" });
    await ok(["tenants", "create", "acme"]);
    await ok(["tenants", "create", "bravo"]);
  }, 120_000);

  afterAll(async () => {
    await serve?.stop();
    remote?.kill();
    removeDir(dir);
  });

  it("refuses a loopback URL when the operator allows no range, naming the field, before connecting", async () => {
    const r = await run(["upstreams", "add", "everything", "--tenant", "acme", "--url", url], { CHAOS_CORE_DATA_DIR: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/declaration\.url: 127\.0\.0\.1 is loopback; a tenant's upstream does not reach private, loopback, link-local or other internal addresses \(an operator allows a range with CHAOS_CORE_HTTP_ALLOWED_ADDRESSES\)/);
    const metadata = await run(["upstreams", "add", "meta", "--tenant", "acme", "--url", "http://169.254.169.254/"]);
    expect(metadata.code).toBe(1);
    expect(metadata.stderr).toMatch(/declaration\.url: 169\.254\.169\.254 is link-local/);
  });

  it("refuses a stdio command, a literal header, a reserved name and the operator's name, each naming the field", async () => {
    const declared = (name: string, body: Record<string, unknown>) => {
      const file = join(dir, `${name}.json`);
      writeFileSync(file, JSON.stringify(body));
      return run(["upstreams", "add", "--tenant", "acme", "--declaration", file]);
    };
    expect((await declared("stdio", { name: "shell", command: "/bin/sh", args: ["-c", "id"] })).stderr).toMatch(/declaration\.command: the tenant registry takes Streamable HTTP upstreams only/);
    const literal = await run(["upstreams", "add", "everything", "--tenant", "acme", "--url", url, "--header", `Authorization=Bearer ${secret}`]);
    expect(literal.code).toBe(1);
    expect(literal.stderr).toMatch(/declaration\.headers\.Authorization: a literal value would be readable back/);
    expect(literal.stderr).not.toContain(secret);
    expect((await run(["upstreams", "add", "memory", "--tenant", "acme", "--url", url])).stderr).toMatch(/declaration\.name: is reserved/);
    expect((await run(["upstreams", "add", "files", "--tenant", "acme", "--url", url])).stderr).toMatch(/declaration\.name: "files" is an upstream of the operator's upstreams file/);
    expect((await run(["upstreams", "add", "Every-Thing", "--tenant", "acme", "--url", url])).stderr).toMatch(/declaration\.name: must be 1-32 characters/);
  });

  it("the registry refuses a metadata URL itself, whatever called it", async () => {
    const admin = JSON.parse(readFileSync(join(dir, "admin.json"), "utf8")) as { url: string; token: string };
    const res = await fetch(`${admin.url}/v1/rpc/chaoscore.admin.v1.TenantAdminService/AddUpstream?tenant=acme`, {
      method: "POST",
      headers: { authorization: `Bearer ${admin.token}`, "content-type": "application/json" },
      // A well-formed pin, so only the address can be what is refused.
      body: JSON.stringify({ tenant: "acme", declaration: { name: "meta", url: "http://169.254.169.254/latest/" }, pin: serializeLock(upstreamContracts("meta", [{ name: "x", inputSchema: { type: "object" } }]), "meta") }),
    });
    const answer = (await res.json()) as { error?: { message?: string } };
    expect(res.ok).toBe(false);
    expect(answer.error?.message).toMatch(/^declaration\.url: 169\.254\.169\.254 is link-local/);
  });

  it("adds acme's upstream: connects through the address checks, reads every tool and pins it; lists, shows, disables, enables, removes — each ledgered", async () => {
    const added = await ok(["upstreams", "add", "everything", "--tenant", "acme", "--url", url, "--header", "Authorization=env:CHAOS_CORE_UPSTREAM_SECRET_ACME", "--json"]);
    const result = JSON.parse(added) as { upstream: { name: string; status: string; pinned_tools: number }; ledger_seq: number };
    expect(result.upstream).toMatchObject({ name: "everything", status: "enabled" });
    expect(result.upstream.pinned_tools).toBeGreaterThanOrEqual(5);

    const shown = JSON.parse(await ok(["upstreams", "show", "everything", "--tenant", "acme", "--json"])) as { upstream: { declaration: Record<string, unknown> }; tools: Array<{ tool: string; capability: string; mcp_name: string; risk: string }> };
    expect(shown.upstream.declaration).toMatchObject({ url, headers: { Authorization: { env: "CHAOS_CORE_UPSTREAM_SECRET_ACME" } } });
    expect(shown.tools).toContainEqual(expect.objectContaining({ tool: "echo", capability: "everything.echo", mcp_name: "everything__echo" }));
    // get-env declares itself read-only: the pin keeps the hint; it is never trusted to lower a risk below what the spec's defaults give.
    expect(shown.tools.find((t) => t.tool === "get-env")).toBeDefined();
    expect(shown.tools.length).toBe(result.upstream.pinned_tools);

    // The same name again is refused as the file refuses a name declared twice.
    const again = await run(["upstreams", "add", "everything", "--tenant", "acme", "--url", url, "--header", "Authorization=env:CHAOS_CORE_UPSTREAM_SECRET_ACME"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/declaration\.name: tenant "acme" already has an upstream "everything"/);

    // Tenant B neither sees nor removes nor disables it.
    expect(await ok(["upstreams", "list", "--tenant", "bravo"])).toMatch(/tenant "bravo" has no upstreams/);
    for (const command of ["remove", "disable"]) {
      const r = await run(["upstreams", command, "everything", "--tenant", "bravo"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/tenant "bravo" has no upstream "everything"/);
    }
    expect(await ok(["upstreams", "show", "everything", "--tenant", "acme"])).toMatch(/enabled/);

    expect(await ok(["upstreams", "disable", "everything", "--tenant", "acme"])).toMatch(/upstream "everything" of tenant "acme" disabled/);
    expect(await ok(["upstreams", "list", "--tenant", "acme"])).toMatch(/^everything\thttp:\/\/127\.0\.0\.1:\d+\/mcp\tdisabled\tpinned, \d+ tools\n$/);
    await ok(["upstreams", "enable", "everything", "--tenant", "acme"]);
    // Exported with the tenant, its pin included; its header as the reference it is.
    const out = join(dir, "acme-export");
    await ok(["tenants", "export", "acme", "--out", out]);
    const exportedTenant = JSON.parse(readFileSync(join(out, "tenant.json"), "utf8")) as { upstreams: Array<{ name: string; status: string; pin: { serverName: string; integrityDigest: string } }> };
    expect(exportedTenant.upstreams).toEqual([expect.objectContaining({ name: "everything", status: "UPSTREAM_STATUS_ENABLED", pin: expect.objectContaining({ serverName: "everything" }) })]);
    await ok(["upstreams", "remove", "everything", "--tenant", "acme"]);
    expect(await ok(["upstreams", "list", "--tenant", "acme"])).toMatch(/tenant "acme" has no upstreams/);

    // acme's ledger holds every change, with the header as its reference and never its value.
    const exported = await ok(["ledger", "export", "--tenant", "acme"]);
    const events = exported
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { event?: Record<string, unknown> })
      .flatMap((l) => (l.event && String(l.event.type).startsWith("upstream.") ? [l.event] : []));
    expect(events.map((e) => e.type)).toEqual(["upstream.added", "upstream.disabled", "upstream.enabled", "upstream.removed"]);
    expect(events[0]).toMatchObject({ upstream: "everything", url, headers: { Authorization: "$CHAOS_CORE_UPSTREAM_SECRET_ACME" }, pinnedTools: result.upstream.pinned_tools });
    expect(events[0]!.integrityDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await ok(["ledger", "export", "--tenant", "bravo"])).not.toMatch(/upstream\./);
  }, 180_000);

  it("the secret's value is in no output, log line or file of the data directory", async () => {
    outputs.push(serve.stderr());
    for (const text of outputs) expect(text).not.toContain(secret);
    const grep = spawnSync("grep", ["-r", "-a", "-l", secret, dir], { encoding: "utf8" });
    expect(grep.stdout).toBe("");
  });
});
