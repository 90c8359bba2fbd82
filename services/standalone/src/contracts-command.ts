import { readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { checkLock, diffContracts, formatDiff, LOCKFILE_NAME, parseLock, serializeLock } from "@chaos-core/contracts";
import { parseCommandLine, UsageError } from "./command-line.js";
import { computeContracts, REPO_ROOT } from "./contracts-surface.js";

/** Where the command writes; the process streams by default, buffers in tests. */
export interface ContractsCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
}

export const CONTRACTS_USAGE = `Usage: chaos-core contracts <command>

Commands:
  lock [--check] [--root DIR]
              Recomputes the contract of every tool, prompt, resource and capability from the
              code (entitlements and gates from the sources, with the TypeScript compiler) and
              writes ${LOCKFILE_NAME} at the repository root. With --check, writes nothing:
              compares the file with the code (never trusting the file's digests), prints each
              difference with its verdict, and exits 1 on any difference
  diff OLD NEW
              Prints the verdict of every change between two lockfiles (BREAKING, RISKY, SAFE,
              COSMETIC), the gravest first line; exits 0
  help        Show this text

Both refuse (exit 1) a read-only tool whose code writes files, opens sockets or spawns
processes. lock needs the repository's sources and its development install (docs/contracts.md).
Exits 0 when done or unchanged, 1 on a difference, a violation or an unreadable file, 2 on a usage error.
`;

function usage(io: ContractsCommandIo, problem: string): number {
  io.stderr.write(`chaos-core contracts: ${problem}\n${CONTRACTS_USAGE.split("\n")[0]}\n`);
  return 2;
}

/** Runs `chaos-core contracts …` and resolves with the exit code. */
export async function runContractsCommand(args: string[], io: ContractsCommandIo): Promise<number> {
  const [sub, ...rest] = args;
  try {
    switch (sub) {
      case undefined:
      case "help":
      case "--help":
      case "-h":
        io.stdout.write(CONTRACTS_USAGE);
        return 0;
      case "lock": {
        const { values } = parseCommandLine(rest, { check: { type: "boolean" }, root: { type: "string" } });
        return await lock(io, values.root ? resolve(values.root) : REPO_ROOT, values.check === true);
      }
      case "diff": {
        const { positionals } = parseCommandLine(rest, {}, { positionals: true });
        if (positionals.length !== 2) return usage(io, "diff takes two lockfiles: OLD NEW");
        const [before, after] = await Promise.all(positionals.map(async (p) => parseLock(await readFile(p!, "utf8"))));
        const diff = diffContracts(before!.contracts, after!.contracts);
        io.stdout.write(diff.changes.length === 0 ? "no changes\n" : `${diff.verdict}\n${formatDiff(diff)}\n`);
        return 0;
      }
      default:
        return usage(io, `unknown command "${sub}"`);
    }
  } catch (err) {
    if (err instanceof UsageError) return usage(io, err.message);
    io.stderr.write(`chaos-core contracts: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

async function lock(io: ContractsCommandIo, root: string, check: boolean): Promise<number> {
  const { contracts, violations } = await computeContracts(root);
  for (const v of violations) io.stderr.write(`violation: ${v}\n`);
  const path = join(root, LOCKFILE_NAME);
  if (!check) {
    if (violations.length > 0) {
      io.stderr.write(`${LOCKFILE_NAME} not written: fix the violations above (or the tool's readOnlyHint)\n`);
      return 1;
    }
    await writeFile(path, serializeLock(contracts));
    io.stdout.write(`wrote ${path}\n`);
    return 0;
  }
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch {
    io.stderr.write(`${path} is missing: run chaos-core contracts lock\n`);
    return 1;
  }
  const result = checkLock(text, contracts);
  for (const p of result.problems) io.stderr.write(`${p}\n`);
  if (result.diff.changes.length > 0) io.stdout.write(`${result.diff.verdict}\n${formatDiff(result.diff)}\n`);
  if (!result.ok || violations.length > 0) {
    io.stderr.write(`${LOCKFILE_NAME} does not match the code: review the changes above, then run chaos-core contracts lock\n`);
    return 1;
  }
  io.stdout.write(`${LOCKFILE_NAME} matches the code\n`);
  return 0;
}
