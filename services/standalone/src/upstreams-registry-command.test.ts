import { afterAll, describe, expect, it } from "vitest";
import { removeDir, tempDir } from "../../../test/support/processes.js";
import { runTenantsCommand } from "./tenants-command.js";
import { runUpstreamsCommand } from "./upstreams-command.js";

/**
 * `chaos-core upstreams … --tenant` on a data directory no server runs on: the registry is read
 * from its embedded database, the file's subcommands are untouched, and a change — which the
 * tenant's ledger must record — is refused until a server (or a cluster's ledger) is reachable.
 */
describe("chaos-core upstreams --tenant, on the embedded registry", () => {
  const dir = tempDir("chaos-core-upstreams-registry-");
  afterAll(() => removeDir(dir));
  const env = { CHAOS_CORE_DATA_DIR: dir };

  const run = async (args: string[]) => {
    let stdout = "";
    let stderr = "";
    const io = { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) }, env, version: "test" };
    const code = await runUpstreamsCommand(args, io);
    return { code, stdout, stderr };
  };

  it("lists a tenant's upstreams, and refuses a change no ledger can record", async () => {
    const created = await runTenantsCommand(["create", "acme"], { stdout: { write: () => undefined }, stderr: { write: () => undefined }, env });
    expect(created).toBe(0);
    expect(await run(["list", "--tenant", "acme"])).toMatchObject({ code: 0, stdout: 'tenant "acme" has no upstreams (chaos-core upstreams add --tenant acme …)\n' });
    // A public address passes the address check; then the change needs the tenant's ledger.
    const add = await run(["add", "wiki", "--tenant", "acme", "--url", "https://93.184.215.14/mcp"]);
    expect(add.code).toBe(1);
    expect(add.stderr).toMatch(/add needs the tenant's ledger, where the change is recorded: run it against a running server/);
    const remove = await run(["remove", "wiki", "--tenant", "acme"]);
    expect(remove.code).toBe(1);
    expect(remove.stderr).toMatch(/remove needs the tenant's ledger/);
    const approve = await run(["approve", "wiki", "--tenant", "acme"]);
    expect(approve.code).toBe(1);
    expect(approve.stderr).toMatch(/approve needs the tenant's ledger, where the approval is recorded/);
    // A diff changes nothing, so it needs no ledger: here the tenant has no such upstream.
    const diff = await run(["diff", "wiki", "--tenant", "acme"]);
    expect(diff).toMatchObject({ code: 1, stderr: expect.stringMatching(/tenant "acme" has no upstream "wiki"/) });
    // The file's upstreams are where they were: none declared here.
    expect(await run(["list"])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^no upstream is declared in /) });
  }, 60_000);

  it("answers a wrong command line with its usage, before opening anything", async () => {
    expect(await run(["add", "wiki", "--url", "https://mcp.example.com/mcp"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^chaos-core upstreams: --tenant is required/) });
    expect(await run(["add", "wiki", "--tenant", "acme"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^chaos-core upstreams: --url is required/) });
    expect(await run(["lock", "--tenant", "acme"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^chaos-core upstreams: lock --tenant: not a command for a tenant's upstreams/) });
    expect(await run(["disable", "--tenant", "acme"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^chaos-core upstreams: disable takes the upstream's name/) });
    expect(await run(["add", "wiki", "--tenant", "acme", "--url", "https://mcp.example.com/mcp", "--header", "Authorization"])).toMatchObject({ code: 2 });
    expect(await run(["diff", "--tenant", "acme"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^chaos-core upstreams: diff takes the upstream's name/) });
    expect(await run(["approve", "wiki", "echo", "add", "--tenant", "acme"])).toMatchObject({ code: 2, stderr: expect.stringMatching(/^chaos-core upstreams: approve takes the upstream's name and, optionally, one tool/) });
    // Refused naming the field, before anything is opened.
    const linkLocal = await run(["add", "wiki", "--tenant", "acme", "--url", "http://[fe80::1]/mcp"]);
    expect(linkLocal).toMatchObject({ code: 1, stderr: expect.stringMatching(/declaration\.url: fe80::1 is link-local/) });
  });
});
