import { createWriteStream } from "node:fs";
import { open, readFile } from "node:fs/promises";
import { once } from "node:events";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { assertTenantId, createPostgresDb, type Db, type Env } from "@chaos-core/kit";
import {
  createLedgerReader,
  loadKeyring,
  STANDALONE_KEYRING_FILE,
  isKeySet,
  parseExport,
  parseVerificationKeySet,
  verifyExport,
  verifyParsedExport,
  verifyStoredLedger,
  type VerificationKey,
  type VerifyReport,
} from "@chaos-core/ledger";
import { adminRequest } from "./admin-client.js";
import { parseCommandLine, storesFromCommandLine, unknownCommand, UsageError, type OptionSpecs } from "./command-line.js";
import type { OperatorStores } from "./config.js";
import { accessDataDir } from "./data-dir-access.js";
import { openEmbeddedDb } from "./data-dir-layout.js";
import {
  checkpointHead,
  defaultVerifyStateFile,
  fingerprintAt,
  keyFingerprints,
  loadVerifyState,
  readTrustedCheckpoint,
  rememberCheckpoint,
  type VerifyState,
} from "./verify-state.js";

/** Where the command writes; the process streams by default, buffers in tests. */
export interface LedgerCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  stdin?: Readable;
  /** The environment the stores are found from when no flag names them (the process's own by default). */
  env: Env;
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
  verify  [--file <export.jsonl | -> | --database-url <url> | --data-dir <dir>] [--tenant <tenant>]
          [--public-key <vkey | file>] [--state <file>] [--trusted-checkpoint <file>]
          [--integration-bound <seconds>] [--json]
          Verifies a tenant's audit ledger with only the public key: every entry's content
          hash and chain signature, and the Merkle root at every signed checkpoint. Prints
          the tree's root_hash in base64, as the signed checkpoint and inspect_audit_ledger
          do. Exits 0 when verified, 1 naming the first bad entry, 2 on a usage error.
          It remembers the newest checkpoint it verified per log (--state, by default
          ledger-verify-state.json in the per-user state directory) and from then on holds
          the log to it, as to one an auditor kept (--trusted-checkpoint: a signed note, or
          JSON holding it as "note"): a rewrite or truncation below it fails even when the
          database's own checkpoints were deleted with it. Entries waiting longer than the
          integration bound (default 300 s) for a signed checkpoint fail too.
  export  [--database-url <url> | --data-dir <dir>] [--tenant <tenant>] [--out <file>]
          Writes the tenant's ledger as JSONL (header, entries, signed checkpoints) to stdout
          or <file>; \`ledger verify --file\` checks it offline.

Where the ledger is: --file, --database-url, --data-dir, else where a server started in this
environment keeps it (DATABASE_URL, else CHAOS_CORE_DATA_DIR, else the per-user data
directory). A data directory is read whether its server runs (through the server's loopback
admin endpoint) or not (the command then holds the directory while it reads).

--tenant is required with Postgres; in a data directory it defaults to "default".
--public-key takes the verifier key (<name>+<key hash>+<base64 key>) or a file holding it or
an Ed25519 public key in PEM, or — after a key rotation — a key set: JSON
{"keys": [{"key": "<old>", "untilSize": 1200}, {"key": "<new>", "fromSize": 1201}]}, each key
trusted only for the checkpoint sizes it signed. In a data directory whose server generated its key, it defaults
to that key (<data dir>/${STANDALONE_KEYRING_FILE}); that checks the ledger against the key on
the same machine, so for an independent check pass the verifier key you recorded elsewhere.
`;

function usage(io: LedgerCommandIo, message: string): number {
  io.stderr.write(`chaos-core ledger: ${message}\n\n${LEDGER_USAGE}`);
  return EXIT_USAGE;
}

function parse<T extends OptionSpecs>(args: string[], options: T) {
  return parseCommandLine(args, options).values;
}

/** The tenant: required on Postgres (many tenants), "default" (stdio's) in a data directory. */
function checkTenant(tenant: string | undefined, stores: OperatorStores | undefined): string {
  if (tenant === undefined) {
    if (stores?.kind === "data-dir") return "default";
    throw new UsageError("--database-url needs --tenant");
  }
  try {
    assertTenantId(tenant);
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  return tenant;
}

const VKEY_RE = /^[^+\s]+\+[0-9a-f]{8}\+\S+$/;

/** A verifier key given inline, or the contents of the file named: a key, or a key set across rotations (JSON). */
async function loadPublicKey(value: string): Promise<VerificationKey> {
  if (VKEY_RE.test(value)) return value;
  let text: string;
  try {
    text = (await readFile(value, "utf8")).trim();
  } catch (err) {
    throw new UsageError(`--public-key is neither a verifier key nor a readable file (${(err as Error).message})`);
  }
  if (!text.startsWith("{")) return text;
  try {
    return parseVerificationKeySet(text);
  } catch (err) {
    throw new UsageError(`--public-key ${value}: ${(err as Error).message}`);
  }
}

/** Without --public-key: the public half of the key a standalone server generated into its data directory. */
async function dataDirPublicKey(dataDir: string): Promise<VerificationKey> {
  const file = join(dataDir, STANDALONE_KEYRING_FILE);
  try {
    return (await loadKeyring(file)).active.publicKey;
  } catch (err) {
    throw new UsageError(`--public-key is required: ${file} cannot be read (${err instanceof Error ? err.message : String(err)})`);
  }
}

/**
 * Runs `fn` over the export lines of a data directory's ledger: through the running server's
 * admin endpoint, or from the embedded database while this command holds the directory.
 */
async function withDataDirExport<T>(dataDir: string, tenant: string, fn: (lines: AsyncIterable<string>) => Promise<T>): Promise<T> {
  const access = await accessDataDir(dataDir);
  if (access.running) {
    const res = await adminRequest(access.admin, "GET", `/v1/ledger/export?tenant=${encodeURIComponent(tenant)}`);
    const body = Readable.fromWeb(res.body as WebReadableStream<Uint8Array>, { encoding: "utf8" });
    return fn(withNewlines(lines(body)));
  }
  try {
    const db = await openEmbeddedDb(dataDir);
    try {
      return await fn(createLedgerReader(db).exportLedger(tenant));
    } finally {
      await db.close();
    }
  } finally {
    await access.release();
  }
}

/** Lines as the store's export yields them, each with its newline (readline strips it). */
async function* withNewlines(input: AsyncIterable<string>): AsyncIterable<string> {
  for await (const line of input) yield `${line}\n`;
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

function summary(report: VerifyReport, outside: Outside, stateFile: string, remembered: number | undefined): string {
  const who = `${report.tenant ?? "?"}${report.origin ? ` (${report.origin})` : ""}`;
  if (report.ok) {
    const lines = [`ledger verified: ${who}: ${report.entries} entries, ${report.checkpoints} signed checkpoints, root_hash ${report.root} (base64)`];
    if (report.pending) {
      const age = report.pendingSince ? ` (since ${report.pendingSince})` : "";
      lines.push(`  the newest ${report.pending} entries${age} are not yet integrated into a signed checkpoint: their chain verifies; a running ledger integrates them`);
    }
    if (outside.notes.length === 0) {
      lines.push(
        "  no checkpoint kept outside the database was remembered or given for this log: a history rewritten or truncated together with its checkpoints cannot be told apart from this one",
      );
    } else {
      const from = [
        outside.rememberedSize !== undefined ? `the one of size ${outside.rememberedSize} remembered from a verify at ${outside.rememberedAt}` : "",
        outside.trustedSize !== undefined ? `the one of size ${outside.trustedSize} given with --trusted-checkpoint` : "",
      ].filter(Boolean);
      lines.push(`  consistent with the checkpoints kept outside the database: ${from.join(" and ")}`);
    }
    if (remembered !== undefined) lines.push(`  remembered checkpoint ${remembered} in ${stateFile}: the log is held to it from now on`);
    return `${lines.join("\n")}\n`;
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
    "data-dir": { type: "string" },
    tenant: { type: "string" },
    "public-key": { type: "string" },
    state: { type: "string" },
    "trusted-checkpoint": { type: "string" },
    "integration-bound": { type: "string" },
    json: { type: "boolean" },
  });
  if (v.file !== undefined && (v["database-url"] !== undefined || v["data-dir"] !== undefined)) {
    throw new UsageError("give one of --file, --database-url and --data-dir");
  }
  const stores = v.file === undefined ? storesFromCommandLine(v, io.env) : undefined;
  if (v.file !== undefined && v.tenant !== undefined) checkTenant(v.tenant, undefined);
  const tenant = stores ? checkTenant(v.tenant, stores) : v.tenant;
  let key: VerificationKey;
  if (v["public-key"] !== undefined) key = await loadPublicKey(v["public-key"]);
  else if (stores?.kind === "data-dir") key = await dataDirPublicKey(stores.dataDir);
  else throw new UsageError("--public-key is required: verify trusts nothing but the public key");

  const boundSeconds = v["integration-bound"] === undefined ? DEFAULT_INTEGRATION_BOUND_SECONDS : Number(v["integration-bound"]);
  if (!Number.isInteger(boundSeconds) || boundSeconds < 1) throw new UsageError("--integration-bound must be a whole number of seconds, 1 or more");

  let report: VerifyReport;
  let state: VerifyState;
  let outside: Outside;
  // A log may end in entries no ledger has integrated yet (sequenced in the last interval, or
  // just before a crash; an export of the database carries them too): their chain is checked
  // and they are reported as pending, not as a failure (docs/ledger.md §2) — within the bound.
  try {
    state = await loadVerifyState(v.state ?? defaultVerifyStateFile(io.env));
    const trusted = v["trusted-checkpoint"] !== undefined ? await readTrustedCheckpoint(v["trusted-checkpoint"]) : undefined;
    const options = { pending: "allow" as const, integrationBoundMs: boundSeconds * 1000 };
    if (v.file !== undefined) {
      // Open first so a missing file is an error here, not a silently empty stream.
      const input = v.file === "-" ? (io.stdin ?? process.stdin) : (await open(v.file)).createReadStream({ encoding: "utf8" });
      // The header first: it names the log whose remembered checkpoint applies.
      const parsed = await parseExport(lines(input));
      outside = outsideFor(state, trusted, key, tenant ?? parsed.header?.tenant, parsed.header?.origin ?? originOfKey(key));
      report = await verifyParsedExport(parsed, key, { ...options, outside: outside.notes, ...(tenant !== undefined ? { tenant } : {}) });
    } else {
      outside = outsideFor(state, trusted, key, tenant, originOfKey(key));
      const withOutside = { ...options, outside: outside.notes };
      if (stores!.kind === "postgres") {
        report = await withDb(stores!.url, (db) => verifyStoredLedger(createLedgerReader(db), tenant!, key, withOutside));
      } else {
        report = await withDataDirExport(stores!.dataDir, tenant!, (exported) => verifyExport(exported, key, { ...withOutside, tenant: tenant! }));
      }
    }
  } catch (err) {
    // An unreadable export or state, a malformed key or an unreachable database: nothing was verified.
    io.stderr.write(`chaos-core ledger verify: cannot verify: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT_BAD;
  }
  // Verified: the newest checkpoint is remembered for the next run (never an older one).
  let remembered: number | undefined;
  const rememberedKey = report.newest ? fingerprintAt(key, report.newest.size) : undefined;
  if (report.ok && report.newest && rememberedKey && report.origin && report.tenant && report.newest.size >= (outside.rememberedSize ?? 0)) {
    try {
      await rememberCheckpoint(state, { origin: report.origin, key: rememberedKey, tenant: report.tenant, checkpoint: report.newest.note, verifiedAt: new Date().toISOString() });
      remembered = report.newest.size;
    } catch (err) {
      io.stderr.write(`chaos-core ledger verify: the checkpoint verified could not be remembered in ${state.file}: ${(err as Error).message}\n`);
    }
  }
  io.stdout.write(v.json ? `${JSON.stringify({ ...report, stateFile: state.file, ...(remembered !== undefined ? { remembered } : {}) })}\n` : summary(report, outside, state.file, remembered));
  return report.ok ? EXIT_OK : EXIT_BAD;
}

/** How long an entry may wait for a signed checkpoint before verify calls it a finding (a running ledger signs within seconds). */
export const DEFAULT_INTEGRATION_BOUND_SECONDS = 300;

/** The checkpoints a log is held to from outside its database, and where they came from. */
interface Outside {
  readonly notes: string[];
  /** The remembered checkpoint's size and when it was verified, if one is held. */
  readonly rememberedSize?: number;
  readonly rememberedAt?: string;
  readonly trustedSize?: number;
}

/** The origin a verifier key names (`<origin>+<hash>+<key>`; a set's first that is one); none for a PEM. */
function originOfKey(key: VerificationKey): string | undefined {
  const named = (isKeySet(key) ? key.keys.map((k) => k.key) : [key]).find((k): k is string => typeof k === "string" && VKEY_RE.test(k));
  return named?.split("+")[0];
}

/** The remembered checkpoint of this log (verified with this key; by its origin when known, else its tenant) and the auditor's. */
function outsideFor(state: VerifyState, trusted: string | undefined, key: VerificationKey, tenant: string | undefined, origin: string | undefined): Outside {
  const fingerprints = keyFingerprints(key);
  const held = Object.values(state.logs).find((r) => fingerprints.includes(r.key) && (origin !== undefined ? r.origin === origin : tenant !== undefined && r.tenant === tenant));
  return {
    notes: [...(held ? [held.checkpoint] : []), ...(trusted ? [trusted] : [])],
    ...(held ? { rememberedSize: checkpointHead(held.checkpoint).size, rememberedAt: held.verifiedAt } : {}),
    ...(trusted ? { trustedSize: checkpointHead(trusted).size } : {}),
  };
}

async function exportCommand(args: string[], io: LedgerCommandIo): Promise<number> {
  const v = parse(args, {
    "database-url": { type: "string" },
    "data-dir": { type: "string" },
    tenant: { type: "string" },
    out: { type: "string" },
  });
  const stores = storesFromCommandLine(v, io.env);
  const tenant = checkTenant(v.tenant, stores);
  const file = v.out !== undefined ? createWriteStream(v.out, "utf8") : undefined;
  try {
    let entries = 0;
    const write = async (exported: AsyncIterable<string>) => {
      for await (const line of exported) {
        if (line.startsWith('{"type":"entry"')) entries++;
        if (file) {
          // Respect back-pressure: an export can be far larger than memory.
          if (!file.write(line)) await once(file, "drain");
        } else io.stdout.write(line);
      }
    };
    if (stores.kind === "postgres") await withDb(stores.url, (db) => write(createLedgerReader(db).exportLedger(tenant)));
    else await withDataDirExport(stores.dataDir, tenant, write);
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
        return usage(io, unknownCommand("ledger command", sub, ["verify", "export", "help"]).message);
    }
  } catch (err) {
    if (err instanceof UsageError) return usage(io, err.message);
    // A bad setting in the environment (DATABASE_URL, no home directory): said in one line.
    io.stderr.write(`chaos-core ledger: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT_BAD;
  }
}
