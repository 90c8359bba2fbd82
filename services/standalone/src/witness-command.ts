import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { createLogger, type Env } from "@chaos-core/kit";
import { cosignerVerifierKey, createWitness, parseVerifierKey, type TrustedLog, type Witness } from "@chaos-core/ledger";
import { parseCommandLine, UsageError } from "./command-line.js";
import { userStateDir } from "./config.js";

// `chaos-core witness`: a C2SP tlog-witness HTTP endpoint for ledgers' checkpoints (docs/ledger.md, "Witnesses").

export const WITNESS_USAGE = `Usage: chaos-core witness --name NAME --key-file FILE --log PREFIX=KEY[,PREFIX=KEY...]
                          [--state FILE] [--host HOST] [--port PORT]

A transparency-log witness (C2SP tlog-witness): POST /add-checkpoint with an old size, a
consistency proof and a signed checkpoint; it cosigns (C2SP tlog-cosignature v1, Ed25519) only a
checkpoint consistent with the last one it cosigned for that origin, and keeps a fork's two
checkpoints as evidence in its state file.

  --name NAME          the witness's key name (a schema-less URL, e.g. witness.example.com/w1)
  --key-file FILE      its Ed25519 private key (PKCS#8 PEM); generated there, mode 0600, if absent
  --log PREFIX=KEY     the logs it witnesses: every origin starting with PREFIX, signed by KEY
                       (a verifier key of one of them, as inspect_audit_ledger shows it, or a PEM
                       public key file); Chaos Core's ledger keeps one origin per tenant
                       (chaos-core/ledger/<tenant>), so one entry serves every tenant
  --state FILE         where it remembers (default witness-state.json in the per-user state dir)
  --host HOST          where to listen (default 127.0.0.1)
  --port PORT          (default 8090)

It prints its verifier key (<name>+<key ID>+<key>) for the ledgers that submit to it.
`;

export const DEFAULT_WITNESS_PORT = 8090;
/** The largest request body taken: an old size, 63 proof lines and a checkpoint with its signatures. */
const MAX_BODY_BYTES = 64 * 1024;

/** The witness's private key from `file`, generated (and written, 0600) when the file does not exist yet. */
export async function loadOrCreateWitnessKey(file: string): Promise<{ privateKey: KeyObject; publicKey: KeyObject; generated: boolean }> {
  try {
    const privateKey = createPrivateKey(await readFile(file, "utf8"));
    if (privateKey.asymmetricKeyType !== "ed25519") throw new UsageError(`--key-file ${file}: not an Ed25519 private key`);
    return { privateKey, publicKey: createPublicKey(privateKey), generated: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      if (err instanceof UsageError) throw err;
      throw new UsageError(`--key-file ${file}: ${(err as Error).message}`);
    }
  }
  const pair = generateKeyPairSync("ed25519");
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(file, pair.privateKey.export({ format: "pem", type: "pkcs8" }), { mode: 0o600, flag: "wx" });
  return { ...pair, generated: true };
}

/** `PREFIX=KEY[,PREFIX=KEY...]`, each KEY a verifier key or a PEM public key file. */
export async function parseTrustedLogs(text: string): Promise<TrustedLog[]> {
  const logs: TrustedLog[] = [];
  for (const [i, item] of text.split(",").entries()) {
    const at = item.indexOf("=");
    const prefix = item.slice(0, at).trim();
    const key = item.slice(at + 1).trim();
    if (at <= 0 || prefix === "" || key === "") throw new UsageError(`--log entry ${i + 1} is PREFIX=KEY, not "${item}"`);
    let publicKey: KeyObject;
    try {
      publicKey = /^[^+\s]+\+[0-9a-f]{8}\+\S+$/.test(key) ? parseVerifierKey(key).publicKey : createPublicKey(await readFile(key, "utf8"));
    } catch (err) {
      throw new UsageError(`--log entry ${i + 1} (${prefix}): the key is neither a verifier key nor a readable PEM public key (${(err as Error).message})`);
    }
    logs.push({ originPrefix: prefix, publicKey });
  }
  return logs;
}

/** Serves `witness` on HTTP: POST /add-checkpoint, GET /healthz. */
export function startWitnessServer(witness: Witness, host: string, port: number): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/healthz") return void res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    if (req.url !== "/add-checkpoint") return void res.writeHead(404, { "content-type": "text/plain" }).end("not found: POST /add-checkpoint\n");
    if (req.method !== "POST") return void res.writeHead(405, { allow: "POST", "content-type": "text/plain" }).end("add-checkpoint takes POST\n");
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on("data", (c: Buffer) => {
      bytes += c.length;
      if (bytes > MAX_BODY_BYTES) {
        res.writeHead(413, { "content-type": "text/plain" }).end(`a request body is at most ${MAX_BODY_BYTES} bytes\n`);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      if (res.headersSent) return;
      witness.addCheckpoint(Buffer.concat(chunks).toString("utf8")).then(
        (a) => res.writeHead(a.status, { "content-type": a.contentType }).end(a.body),
        (err: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(`the witness could not record it: ${(err as Error).message}\n`),
      );
    });
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve({ url: `http://${host.includes(":") ? `[${host}]` : host}:${(server.address() as AddressInfo).port}`, server }));
  });
}

export interface WitnessIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: Env;
}

/** Runs the witness until SIGTERM or SIGINT; resolves with the exit code. */
export async function runWitnessCommand(args: string[], io: WitnessIo): Promise<number> {
  const { values } = parseCommandLine(args, {
    name: { type: "string" },
    "key-file": { type: "string" },
    log: { type: "string" },
    state: { type: "string" },
    host: { type: "string" },
    port: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    io.stdout.write(WITNESS_USAGE);
    return 0;
  }
  if (!values.name || /[\s+]/.test(values.name)) throw new UsageError("--name is required: the witness's key name, without spaces or '+' (e.g. witness.example.com/w1)");
  if (!values["key-file"]) throw new UsageError("--key-file is required: where the witness's private key is (generated there if absent)");
  if (!values.log) throw new UsageError("--log is required: PREFIX=KEY for the logs it witnesses");
  const port = values.port === undefined ? DEFAULT_WITNESS_PORT : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be 0 to 65535, not "${values.port}"`);
  const logs = await parseTrustedLogs(values.log);
  const key = await loadOrCreateWitnessKey(values["key-file"]);
  const stateFile = values.state ?? join(userStateDir(io.env, "--state"), "witness-state.json");
  const logger = createLogger("chaos-core-witness", (io.env.LOG_LEVEL as "info" | undefined) ?? "info");
  const witness = await createWitness({ signer: { name: values.name, ...key }, logs, stateFile });
  let listening;
  try {
    listening = await startWitnessServer(witness, values.host ?? "127.0.0.1", port);
  } catch (err) {
    io.stderr.write(`chaos-core witness: cannot listen: ${(err as Error).message}\n`);
    return 1;
  }
  const vkey = cosignerVerifierKey(values.name, key.publicKey);
  if (key.generated) logger.info({ keyFile: values["key-file"] }, "generated the witness's key");
  logger.info({ url: `${listening.url}/add-checkpoint`, verifierKey: vkey, stateFile, logs: logs.map((l) => l.originPrefix) }, "witnessing");
  io.stdout.write(`${vkey}\n`);
  await new Promise<void>((resolve) => {
    const stop = () => listening.server.close(() => resolve());
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  return 0;
}
