import { readFile } from "node:fs/promises";
import { AttestationError } from "@chaos-core/contracts";
import type { Logger } from "@chaos-core/kit";
import { attestServedSurface } from "./attestation.js";
import type { EdgeAttestation } from "../deps/edge-deps.js";

/**
 * The edge's start-time contract check, as every composition root runs it (the edge alone,
 * `chaos-core serve` and `chaos-core stdio`): reads the lockfile (required: it ships with the
 * app), its signed note `<lockFile>.sig` and its history `<lockFile>.history` when present, and
 * runs {@link attestServedSurface}.
 * Throws {@link AttestationError} naming the drifted entries or the bad signature, or an
 * AttestationError naming the file that could not be read; the caller refuses to start.
 */
export async function checkContractsAtStart(
  contracts: { readonly lockFile: string; readonly verifierKeys: readonly string[] },
  logger: Logger,
): Promise<EdgeAttestation> {
  let lockText: string;
  try {
    lockText = await readFile(contracts.lockFile, "utf8");
  } catch (err) {
    throw new AttestationError(
      `CHAOS_CORE_CONTRACT_LOCK_FILE: cannot read the contracts lockfile ${contracts.lockFile} (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
    );
  }
  const note = await optionalFile(`${contracts.lockFile}.sig`, "the lock's signed note");
  const historyText = await optionalFile(`${contracts.lockFile}.history`, "the lock's history");
  let attestation: EdgeAttestation;
  try {
    attestation = attestServedSurface({
      lockText,
      verifierKeys: contracts.verifierKeys,
      ...(note !== undefined ? { note } : {}),
      ...(historyText !== undefined ? { historyText } : {}),
    });
  } catch (err) {
    if (err instanceof AttestationError) throw new AttestationError(`${contracts.lockFile}: ${err.message}`, err.drifted);
    // A lock that does not parse is a refusal too, naming the file.
    throw new AttestationError(`${contracts.lockFile}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (attestation.attested) logger.info({ serverDigest: attestation.serverDigest, keys: attestation.keyNames }, "served contracts attested");
  // The default of a checkout or a laptop: said once, not as a warning on every start.
  else
    logger.info(
      { serverDigest: attestation.serverDigest, lockFile: contracts.lockFile },
      "CHAOS_CORE_CONTRACT_KEYS is not set: the served definitions match the lock, but nothing is attested to clients",
    );
  return attestation;
}

/** A file beside the lock that may be absent; any other failure to read it refuses the start. */
async function optionalFile(path: string, what: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new AttestationError(`cannot read ${what} ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}
