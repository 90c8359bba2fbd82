import { createPrivateKey, createPublicKey, generateKeyPairSync } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  checkLock,
  countersign,
  diffContracts,
  formatDiff,
  HISTORY_FILE,
  LOCKFILE_NAME,
  parseHistory,
  parseLock,
  relock,
  SIGNATURE_FILE,
  signAttestation,
  verifyAttestation,
  verifyAttestationNote,
} from "@chaos-core/contracts";
import { edgeSurface } from "@chaos-core/edge";
import { appRoot, parseVerifierKey, verifierKey, type NoteSigner } from "@chaos-core/kit";
import { parseCommandLine, unknownCommand, UsageError } from "./command-line.js";
import { computeContracts } from "./contracts-surface.js";

/** Where the command writes; the process streams by default, buffers in tests. */
export interface ContractsCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
}

/** The resource a server shows its attestation in (docs/contracts.md §7). */
const ATTESTATION_URI = "chaoscore://contracts/attestation";

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
  keygen --out FILE [--name NAME]
              Writes a new Ed25519 signing key (PKCS#8 PEM, mode 0600) and prints its verifier
              key (NAME+hash+key), the public half a client or the edge is given
  sign --key FILE [--name NAME] [--countersign] [--root DIR]
              Signs the lock's server digest (recomputed from its entries) as a C2SP signed
              note into ${SIGNATURE_FILE}; --countersign adds a signature line to the note there
  verify --key VKEY[,VKEY...] [--root DIR]
              Verifies ${SIGNATURE_FILE} with the verifier keys alone, that the lock hashes to
              the signed digest, and that the definitions this build serves match the lock
  verify --key VKEY[,VKEY...] --url URL [--api-key KEY]
              Connects to a running server's MCP endpoint (an MCP client; KEY is sent as a
              bearer token), reads ${ATTESTATION_URI} and verifies the signed note it
              shows with the verifier keys alone, and that it signs the digest the server states
  help        Show this text

NAME defaults to chaos-core-release. lock and --check refuse (exit 1) a read-only tool whose code writes files, opens sockets or spawns
processes. lock needs the repository's sources and its development install (docs/contracts.md).
Exits 0 when done or unchanged, 1 on a difference, a violation or an unreadable file, 2 on a usage error.
`;

const DEFAULT_KEY_NAME = "chaos-core-release";

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
        return await lock(io, values.root ? resolve(values.root) : appRoot(), values.check === true);
      }
      case "diff": {
        const { positionals } = parseCommandLine(rest, {}, { positionals: true });
        if (positionals.length !== 2) return usage(io, "diff takes two lockfiles: OLD NEW");
        const [before, after] = await Promise.all(positionals.map(async (p) => parseLock(await readFile(p!, "utf8"))));
        const diff = diffContracts(before!.contracts, after!.contracts);
        io.stdout.write(diff.changes.length === 0 ? "no changes\n" : `${diff.verdict}\n${formatDiff(diff)}\n`);
        return 0;
      }
      case "keygen": {
        const { values } = parseCommandLine(rest, { out: { type: "string" }, name: { type: "string" } });
        if (!values.out) return usage(io, "keygen needs --out FILE");
        const { privateKey, publicKey } = generateKeyPairSync("ed25519");
        await writeFile(values.out, privateKey.export({ format: "pem", type: "pkcs8" }), { mode: 0o600, flag: "wx" });
        io.stdout.write(`${verifierKey(values.name ?? DEFAULT_KEY_NAME, publicKey)}\n`);
        return 0;
      }
      case "sign": {
        const { values } = parseCommandLine(rest, { key: { type: "string" }, name: { type: "string" }, countersign: { type: "boolean" }, root: { type: "string" } });
        if (!values.key) return usage(io, "sign needs --key FILE (a PKCS#8 PEM Ed25519 key: chaos-core contracts keygen)");
        const root = values.root ? resolve(values.root) : appRoot();
        const privateKey = createPrivateKey(await readFile(values.key, "utf8"));
        const signer: NoteSigner = { name: values.name ?? DEFAULT_KEY_NAME, privateKey, publicKey: createPublicKey(privateKey) };
        const lockText = await readFile(join(root, LOCKFILE_NAME), "utf8");
        const sigPath = join(root, SIGNATURE_FILE);
        const note = values.countersign ? countersign(await readFile(sigPath, "utf8"), signer) : signAttestation(lockText, signer);
        await writeFile(sigPath, note);
        io.stdout.write(`signed ${parseLock(lockText).integrityDigest} into ${sigPath} as ${verifierKey(signer.name, signer.publicKey)}\n`);
        return 0;
      }
      case "verify": {
        const { values } = parseCommandLine(rest, { key: { type: "string" }, root: { type: "string" }, url: { type: "string" }, "api-key": { type: "string" } });
        if (!values.key) return usage(io, "verify needs --key VKEY[,VKEY...] (verifier keys: NAME+hash+key)");
        if (values.url !== undefined) {
          if (values.root !== undefined) return usage(io, "verify takes --url or --root, not both");
          return await verifyServed(io, values.url, values.key, values["api-key"]);
        }
        if (values["api-key"] !== undefined) return usage(io, "--api-key goes with --url");
        const root = values.root ? resolve(values.root) : appRoot();
        const [lockText, note] = await Promise.all([readFile(join(root, LOCKFILE_NAME), "utf8"), readFile(join(root, SIGNATURE_FILE), "utf8")]);
        const attested = verifyAttestation({ lockText, note, verifiers: values.key.split(",").map((k) => parseVerifierKey(k.trim())), live: edgeSurface() });
        io.stdout.write(`verified ${attested.serverDigest}, signed by ${attested.keyNames.join(", ")}; the served definitions match the lock\n`);
        return 0;
      }
      default:
        return usage(io, unknownCommand("command", sub, ["lock", "diff", "keygen", "sign", "verify", "help"]).message);
    }
  } catch (err) {
    if (err instanceof UsageError) return usage(io, err.message);
    io.stderr.write(`chaos-core contracts: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

/** What `chaoscore://contracts/attestation` holds (resources/chaoscore.ts). */
interface ServedAttestation {
  server_digest?: unknown;
  attested?: unknown;
  key_names?: unknown;
  note?: unknown;
}

/**
 * `verify --url`: reads the attestation a running server shows, over MCP, and verifies its
 * note with the verifier keys alone. Needs nothing of this build: neither the lock nor the
 * sources, only the public keys.
 */
async function verifyServed(io: ContractsCommandIo, url: string, keys: string, apiKey: string | undefined): Promise<number> {
  let endpoint: URL;
  try {
    endpoint = new URL(url);
  } catch {
    return usage(io, `--url: ${JSON.stringify(url)} is not a URL (the MCP endpoint, e.g. http://127.0.0.1:3000/mcp)`);
  }
  const verifiers = keys.split(",").map((k) => parseVerifierKey(k.trim()));
  // Loaded here: the MCP client is for this command only.
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  const client = new Client({ name: "chaos-core-contracts-verify", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(endpoint, apiKey ? { requestInit: { headers: { authorization: `Bearer ${apiKey}` } } } : undefined));
  let served: ServedAttestation;
  try {
    const read = await client.readResource({ uri: ATTESTATION_URI });
    const content = read.contents[0];
    if (!content || !("text" in content)) throw new Error(`${ATTESTATION_URI} at ${url} has no text content`);
    served = JSON.parse(content.text) as ServedAttestation;
  } finally {
    await client.close();
  }
  if (typeof served.note !== "string") {
    throw new Error(`the server at ${url} shows no signed note for its contracts (attested: ${String(served.attested)}; it runs without CHAOS_CORE_CONTRACT_KEYS or ${SIGNATURE_FILE})`);
  }
  const verified = verifyAttestationNote(served.note, verifiers);
  if (verified.serverDigest !== served.server_digest) {
    throw new Error(`the server at ${url} states the digest ${String(served.server_digest)}, but its note signs ${verified.serverDigest}`);
  }
  io.stdout.write(`verified ${verified.serverDigest} served at ${url}, signed by ${verified.keyNames.join(", ")}\n`);
  return 0;
}

/** A file's text, undefined when there is none. */
async function optionalText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

async function lock(io: ContractsCommandIo, root: string, check: boolean): Promise<number> {
  const { contracts, violations } = await computeContracts(root);
  for (const v of violations) io.stderr.write(`violation: ${v}\n`);
  const path = join(root, LOCKFILE_NAME);
  const historyPath = join(root, HISTORY_FILE);
  if (!check) {
    if (violations.length > 0) {
      io.stderr.write(`${LOCKFILE_NAME} not written: fix the violations above (or the tool's readOnlyHint)\n`);
      return 1;
    }
    // The contracts the lock pinned until now join the history, so a client that pinned one of
    // their digests can still be told what changed (docs/contracts.md §9).
    const relocked = relock(contracts, await optionalText(path), await optionalText(historyPath));
    if (relocked.warning) io.stderr.write(`${relocked.warning}\n`);
    await writeFile(path, relocked.lockText);
    io.stdout.write(`wrote ${path}\n`);
    if (relocked.historyText !== undefined) {
      await writeFile(historyPath, relocked.historyText);
      io.stdout.write(`wrote ${historyPath} (${relocked.kept} superseded contract${relocked.kept === 1 ? "" : "s"} kept)\n`);
    }
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
  const problems = [...result.problems];
  // The history is not recomputed (it is what earlier locks pinned), but every entry must still hash to its digest.
  const historyText = await optionalText(historyPath);
  try {
    if (historyText !== undefined) parseHistory(historyText);
  } catch (err) {
    problems.push((err as Error).message);
  }
  for (const p of problems) io.stderr.write(`${p}\n`);
  if (result.diff.changes.length > 0) io.stdout.write(`${result.diff.verdict}\n${formatDiff(result.diff)}\n`);
  if (!result.ok || problems.length > 0 || violations.length > 0) {
    io.stderr.write(`${LOCKFILE_NAME} does not match the code: review the changes above, then run chaos-core contracts lock\n`);
    return 1;
  }
  io.stdout.write(`${LOCKFILE_NAME} matches the code\n`);
  return 0;
}
