import { afterAll, describe, expect, it } from "vitest";
import { removeDir, runToExit, tempDir } from "../../../test/support/processes.js";
import { runApprovalsCommand } from "./approvals-command.js";
import { runContractsCommand } from "./contracts-command.js";
import { runLedgerCommand } from "./ledger-command.js";
import { runMigrateCommand } from "./migrate-command.js";
import { runPolicyCommand } from "./policy-command.js";
import { runKeysCommand, runTenantsCommand } from "./tenants-command.js";

/** What a user reads of a refused command line: the exit code, stdout, and the first line of stderr. */
interface Answer {
  code: number | null;
  stdout: string;
  problem: string | undefined;
}

type Case = [args: string[], problem: string];

describe("chaos-core typos", () => {
  const dir = tempDir();
  afterAll(() => removeDir(dir));

  // The top level through the built command, as a user runs it.
  const cli = async (args: string[]): Promise<Answer> => {
    const run = await runToExit(args, { CHAOS_CORE_DATA_DIR: dir }, 30_000);
    return { code: run.code, stdout: run.stdout, problem: run.stderr.split("\n")[0] };
  };

  // A subcommand (argv after its name) through the function the command line calls with it.
  const SUBCOMMANDS = {
    ledger: runLedgerCommand,
    policy: runPolicyCommand,
    tenants: runTenantsCommand,
    keys: runKeysCommand,
    contracts: runContractsCommand,
    approvals: runApprovalsCommand,
    migrate: runMigrateCommand,
  } as const;
  const sub = async ([name, ...argv]: string[]): Promise<Answer> => {
    let stdout = "";
    let stderr = "";
    const io = { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) }, env: { CHAOS_CORE_DATA_DIR: dir } };
    const code = await SUBCOMMANDS[name as keyof typeof SUBCOMMANDS](argv, io);
    return { code, stdout, problem: stderr.split("\n")[0] };
  };

  const expectAnswers = async (run: (args: string[]) => Promise<Answer>, cases: Case[]) => {
    for (const [args, problem] of cases) expect(await run(args), args.join(" ")).toEqual({ code: 2, stdout: "", problem });
  };

  it("a misspelt command is answered with the command it likely means", async () => {
    await expectAnswers(cli, [
      [["serv"], 'chaos-core: unknown command "serv" (did you mean "serve"?)'],
      [["stdoi"], 'chaos-core: unknown command "stdoi" (did you mean "stdio"?)'],
      [["--verison"], 'chaos-core: unknown option --verison (did you mean "--version"?)'],
    ]);
    await expectAnswers(sub, [
      [["ledger", "verfy"], 'chaos-core ledger: unknown ledger command "verfy" (did you mean "verify"?)'],
      [["policy", "shw"], 'chaos-core policy: unknown policy command "shw" (did you mean "show"?)'],
      [["tenants", "lst"], 'chaos-core tenants: unknown tenants command "lst" (did you mean "list"?)'],
      [["keys", "revok", "k1"], 'chaos-core keys: unknown keys command "revok" (did you mean "revoke"?)'],
      [["contracts", "lokc"], 'chaos-core contracts: unknown command "lokc" (did you mean "lock"?)'],
      // The command is the problem, not a flag that belongs to the one it likely means.
      [["approvals", "approve-spen", "7", "--ttl-seconds", "60"], 'chaos-core approvals: unknown command "approve-spen" (did you mean "approve-spend"?)'],
    ]);
  });

  it("a misspelt flag is answered with the flag it likely means", async () => {
    await expectAnswers(cli, [
      [["serve", "--prot", "4000"], `chaos-core: unknown option '--prot' (did you mean "--port"?)`],
      [["serve", "--prot=4000"], `chaos-core: unknown option '--prot' (did you mean "--port"?)`],
      [["serve", "--hots", "0.0.0.0"], `chaos-core: unknown option '--hots' (did you mean "--host"?)`],
      [["stdio", "--data-dri", "/tmp/x"], `chaos-core: unknown option '--data-dri' (did you mean "--data-dir"?)`],
    ]);
    await expectAnswers(sub, [
      [["ledger", "verify", "--tennat", "acme"], `chaos-core ledger: unknown option '--tennat' (did you mean "--tenant"?)`],
      [["approvals", "list", "--jsno"], `chaos-core approvals: unknown option '--jsno' (did you mean "--json"?)`],
      [["migrate", "--database-rul", "postgres://db/x"], `chaos-core migrate: unknown option '--database-rul' (did you mean "--database-url"?)`],
    ]);
  });

  it("a name close to nothing it knows is refused without a guess", async () => {
    await expectAnswers(cli, [
      [["frobnicate"], 'chaos-core: unknown command "frobnicate"'],
      [["serve", "--bogus"], "chaos-core: unknown option '--bogus'"],
      // --port is serve's: stdio has no flag it is a typo of.
      [["stdio", "--port", "4000"], "chaos-core: unknown option '--port'"],
    ]);
    await expectAnswers(sub, [[["tenants", "frobnicate"], 'chaos-core tenants: unknown tenants command "frobnicate"']]);
  });
});
