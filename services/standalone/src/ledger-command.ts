import { createWriteStream } from "node:fs";
import { open, readFile } from "node:fs/promises";
import { once } from "node:events";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { parseArgs } from "node:util";
import { assertTenantId, createPostgresDb, type Db } from "@chaos-core/kit";
import { createLedgerReader, verifyExport, verifyStoredLedger, type VerifyReport } from "@chaos-core/ledger";

/** Where the command writes; the process streams by default, buffers in tests. */
export interface LedgerCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  stdin?: Readable;
}

/** Exit code: the ledger verified (or the export was written). */
export const EXIT_OK = 0;
/** Exit code: the ledger did not verify (the message names the first bad entry), or could not be read. */
export const EXIT_BAD = 1;
/** Exit code: the command line was wrong. */
export const EXIT_USAGE = 2;

/** The help text of `chaos-core ledger`. */
export const LEDGER_USAGE = `Usage: chaos-core ledger <command>

Commands:
  verify  (--file <export.jsonl | -> | --database-url <url> --tenant <tenant>) --public-key <vkey | file> [--json]
          Verifies a tenant's audit ledger with only the public key: every entry's content
          hash and chain signature, and the Merkle root at every signed checkpoint. Exits 0
          when verified, 1 naming the first bad entry, 2 on a usage error.
  export  --database-url <url> --tenant <tenant> [--out <file>]
          Writes the tenant's ledger as JSONL (header, entries, signed checkpoints) to stdout
          or <file>; \`ledger verify --file\` checks it offline.

--public-key takes the verifier key (<name>+<key hash>+<base64 key>) or a file holding it or
an Ed25519 public key in PEM.
`;

class UsageError extends Error {}

function usage(io: LedgerCommandIo, message: string): number {
  io.stderr.write(`chaos-core ledger: ${message}\n\n${LEDGER_USAGE}`);
  return EXIT_USAGE;
}

function parse<T extends Record<string, { type: "string" | "boolean" }>>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

function checkTenant(tenant: string | undefined): string {
  if (tenant === undefined) throw new UsageError("--database-url needs --tenant");
  try {
    assertTenantId(tenant);
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  return tenant;
}

const VKEY_RE = /^[^+\s]+\+[0-9a-f]{8}\+\S+$/;

/** A verifier key given inline, or the contents of the file named. */
async function loadPublicKey(value: string): Promise<string> {
  if (VKEY_RE.test(value)) return value;
  try {
    return (await readFile(value, "utf8")).trim();
  } catch (err) {
    throw new UsageError(`--public-key is neither a verifier key nor a readable file (${(err as Error).message})`);
  }
}

async function withDb<T>(url: string, fn: (db: Db) => Promise<T>): Promise<T> {
  const db = createPostgresDb({ connectionString: url, max: 2, applicationName: "chaos-core-ledger-cli" });
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

function lines(stream: Readable): AsyncIterable<string> {
  return createInterface({ input: stream, crlfDelay: Infinity });
}

function summary(report: VerifyReport): string {
  const who = `${report.tenant ?? "?"}${report.origin ? ` (${report.origin})` : ""}`;
  if (report.ok) {
    return `ledger verified: ${who}: ${report.entries} entries, ${report.checkpoints} signed checkpoints, root ${report.root}\n`;
  }
  const f = report.failure!;
  const where = f.seq > 0 ? `first bad entry: seq ${f.seq}` : "a checkpoint record cannot be read";
  const range = f.range ? ` (somewhere in ${f.range.from}..${f.range.to}; checkpoints verified up to ${report.verifiedSize})` : "";
  return `ledger NOT verified: ${who}: ${where} [${f.check}]${range}\n  ${f.message}\n`;
}

async function verify(args: string[], io: LedgerCommandIo): Promise<number> {
  const v = parse(args, {
    file: { type: "string" },
    "database-url": { type: "string" },
    tenant: { type: "string" },
    "public-key": { type: "string" },
    json: { type: "boolean" },
  });
  if ((v.file === undefined) === (v["database-url"] === undefined)) throw new UsageError("give exactly one of --file and --database-url");
  if (v["public-key"] === undefined) throw new UsageError("--public-key is required: verify trusts nothing but the public key");
  if (v.file !== undefined && v.tenant !== undefined) checkTenant(v.tenant);
  const tenant = v["database-url"] !== undefined ? checkTenant(v.tenant) : v.tenant;
  const key = await loadPublicKey(v["public-key"]);

  let report: VerifyReport;
  try {
    if (v.file !== undefined) {
      // Open first so a missing file is an error here, not a silently empty stream.
      const input = v.file === "-" ? (io.stdin ?? process.stdin) : (await open(v.file)).createReadStream({ encoding: "utf8" });
      report = await verifyExport(lines(input), key, tenant !== undefined ? { tenant } : {});
    } else {
      report = await withDb(v["database-url"]!, (db) => verifyStoredLedger(createLedgerReader(db), tenant!, key));
    }
  } catch (err) {
    // An unreadable export, a malformed key or an unreachable database: nothing was verified.
    io.stderr.write(`chaos-core ledger verify: cannot verify: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT_BAD;
  }
  io.stdout.write(v.json ? `${JSON.stringify(report)}\n` : summary(report));
  return report.ok ? EXIT_OK : EXIT_BAD;
}

async function exportCommand(args: string[], io: LedgerCommandIo): Promise<number> {
  const v = parse(args, { "database-url": { type: "string" }, tenant: { type: "string" }, out: { type: "string" } });
  if (v["database-url"] === undefined) throw new UsageError("export needs --database-url");
  const tenant = checkTenant(v.tenant);
  const file = v.out !== undefined ? createWriteStream(v.out, "utf8") : undefined;
  try {
    let entries = 0;
    await withDb(v["database-url"], async (db) => {
      for await (const line of createLedgerReader(db).exportLedger(tenant)) {
        if (line.startsWith('{"type":"entry"')) entries++;
        if (file) {
          // Respect back-pressure: an export can be far larger than memory.
          if (!file.write(line)) await once(file, "drain");
        } else io.stdout.write(line);
      }
    });
    if (file) {
      file.end();
      await once(file, "finish");
      io.stderr.write(`exported ${entries} entries of ${tenant} to ${v.out}\n`);
    }
    return EXIT_OK;
  } catch (err) {
    file?.destroy();
    io.stderr.write(`chaos-core ledger export: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT_BAD;
  }
}

/** Runs `chaos-core ledger …` (argv after `ledger`) and resolves with the exit code. */
export async function runLedgerCommand(argv: string[], io: LedgerCommandIo = process): Promise<number> {
  const [sub, ...rest] = argv;
  try {
    switch (sub) {
      case "verify":
        return await verify(rest, io);
      case "export":
        return await exportCommand(rest, io);
      case undefined:
      case "help":
      case "--help":
      case "-h":
        io.stdout.write(LEDGER_USAGE);
        return sub === undefined ? EXIT_USAGE : EXIT_OK;
      default:
        return usage(io, `unknown ledger command "${sub}"`);
    }
  } catch (err) {
    if (err instanceof UsageError) return usage(io, err.message);
    throw err;
  }
}
