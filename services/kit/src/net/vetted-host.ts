import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { ChaosError } from "../errors.js";
import { raceSignal } from "../rpc/abort.js";
import { allowCidrs, blockedAddressClass, type AllowAddress } from "./address.js";

/** One resolved address of a host. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/**
 * Resolves a host name to every address it has (like `dns.lookup(host, {all: true})`).
 * Injectable so tests can map names such as `api.test` to a local server.
 */
export type HostLookup = (hostname: string) => Promise<ReadonlyArray<{ address: string; family: number }>>;

/** The system resolver, as every other Node program on the machine would use it. */
export const systemLookup: HostLookup = (hostname) => dnsLookup(hostname, { all: true });

/**
 * The operator's ranges an outbound request for a tenant may reach although the default rules
 * refuse them (`CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`: CIDR ranges or single addresses, comma
 * separated): `http.request` and tenants' upstreams read the same setting.
 */
export const ALLOWED_ADDRESSES_VARIABLE = "CHAOS_CORE_HTTP_ALLOWED_ADDRESSES";

/**
 * The entries of {@link ALLOWED_ADDRESSES_VARIABLE}'s value, each checked (a typo is found at
 * start-up rather than ignored).
 * @throws Error naming the variable and the entry
 */
export function parseAllowedAddresses(value: string | undefined): string[] {
  const entries = (value ?? "").split(",").map((e) => e.trim()).filter(Boolean);
  try {
    allowCidrs(entries);
  } catch (err) {
    throw new Error(`${ALLOWED_ADDRESSES_VARIABLE}: ${(err as Error).message}`, { cause: err });
  }
  return entries;
}

/** Who is refused, in messages: `http.request`, or `a tenant's upstream`. */
export interface VettingDeps {
  readonly lookup: HostLookup;
  readonly allowAddress: AllowAddress;
  readonly signal?: AbortSignal;
  /** Named in a refusal ("http.request does not reach …"). */
  readonly who?: string;
}

const refused = (where: string, what: string, who: string) =>
  new ChaosError(
    "permission_denied",
    `${where}: ${what}; ${who} does not reach private, loopback, link-local or other internal addresses ` +
      `(an operator allows a range with ${ALLOWED_ADDRESSES_VARIABLE}).`,
  );

/**
 * Resolves `hostname` and returns its addresses only if EVERY one may be reached: public
 * unicast, or explicitly allowed by the operator. One bad answer refuses the host, so a name
 * that resolves to a public and a private address cannot be used to reach the private one.
 * The caller connects only to the returned addresses (pinning), so a second DNS answer
 * cannot rebind the connection. An IP literal is vetted as it is, without a lookup.
 */
export async function resolveVetted(hostname: string, where: string, deps: VettingDeps): Promise<ResolvedAddress[]> {
  const who = deps.who ?? "http.request";
  const host = hostname.replace(/^\[(.*)\]$/, "$1");
  const signal = deps.signal ?? new AbortController().signal;
  let answers: ReadonlyArray<{ address: string; family: number }>;
  if (isIP(host) !== 0) answers = [{ address: host, family: isIP(host) }];
  else {
    try {
      answers = await raceSignal(deps.lookup(host), signal);
    } catch (err) {
      if (signal.aborted) throw err;
      const code = (err as NodeJS.ErrnoException | undefined)?.code ?? "lookup failed";
      throw new ChaosError("unavailable", `${where}: could not resolve "${host}" (${code}).`, { cause: err });
    }
  }
  if (answers.length === 0) throw new ChaosError("unavailable", `${where}: "${host}" resolved to no address.`);
  const vetted: ResolvedAddress[] = [];
  for (const { address } of answers) {
    const family = isIP(address);
    const blocked = family === 0 ? "not an IP address" : deps.allowAddress(address) ? undefined : blockedAddressClass(address);
    if (blocked !== undefined) throw refused(where, address === host ? `${address} is ${blocked}` : `"${host}" resolves to ${address} (${blocked})`, who);
    vetted.push({ address, family: family === 6 ? 6 : 4 });
  }
  return vetted;
}
