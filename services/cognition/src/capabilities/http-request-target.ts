import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { ChaosError, raceSignal } from "@chaos-core/kit";
import { blockedAddressClass, type AllowAddress } from "./http-request-address.js";

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

/** Schemes `http.request` speaks. */
const SCHEMES = new Set(["http:", "https:"]);

/**
 * A host the WHATWG parser would read as a number (`2130706433`, `0x7f`, `017700000001`):
 * the parser already turns valid ones into dotted IPv4, so this only catches what slips past.
 */
function looksNumeric(hostname: string): boolean {
  const last = hostname.replace(/\.$/, "").split(".").pop() ?? "";
  return /^(0x[0-9a-f]*|[0-9]+)$/i.test(last);
}

/**
 * Refuses a URL whose scheme, credentials or host `http.request` never reaches, whatever the
 * policy says: only http(s), no userinfo, and a host name rather than an IP address (an IP
 * literal would skip the name-based allowlist and the DNS checks). `where` names the hop.
 */
export function checkTargetUrl(url: URL, where: string): void {
  if (!SCHEMES.has(url.protocol)) {
    throw new ChaosError("permission_denied", `${where}: only http and https URLs are fetched, not "${url.protocol}".`);
  }
  if (url.username !== "" || url.password !== "") {
    throw new ChaosError(
      "permission_denied",
      `${where}: URLs with credentials (user:password@) are refused; credentials never travel in tool arguments.`,
    );
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  if (host === "") throw new ChaosError("permission_denied", `${where}: the URL has no host.`);
  if (isIP(host) !== 0 || looksNumeric(host)) {
    throw new ChaosError(
      "permission_denied",
      `${where}: "${url.hostname}" is an IP address literal; http.request only reaches host names that ` +
        `the operator allowlists (httpAllowedDomains), so use the host's name.`,
    );
  }
}

/**
 * Resolves `hostname` and returns its addresses only if EVERY one may be reached: public
 * unicast, or explicitly allowed by the operator. One bad answer refuses the host, so a name
 * that resolves to a public and a private address cannot be used to reach the private one.
 * The caller connects only to the returned addresses (pinning), so a second DNS answer
 * cannot rebind the connection.
 */
export async function resolveVetted(
  hostname: string,
  where: string,
  deps: { lookup: HostLookup; allowAddress: AllowAddress; signal: AbortSignal },
): Promise<ResolvedAddress[]> {
  let answers: ReadonlyArray<{ address: string; family: number }>;
  try {
    answers = await raceSignal(deps.lookup(hostname), deps.signal);
  } catch (err) {
    if (deps.signal.aborted) throw err;
    const code = (err as NodeJS.ErrnoException | undefined)?.code ?? "lookup failed";
    throw new ChaosError("unavailable", `${where}: could not resolve "${hostname}" (${code}).`, { cause: err });
  }
  if (answers.length === 0) {
    throw new ChaosError("unavailable", `${where}: "${hostname}" resolved to no address.`);
  }
  const vetted: ResolvedAddress[] = [];
  for (const { address } of answers) {
    const family = isIP(address);
    const blocked =
      family === 0 ? "not an IP address" : deps.allowAddress(address) ? undefined : blockedAddressClass(address);
    if (blocked !== undefined) {
      throw new ChaosError(
        "permission_denied",
        `${where}: "${hostname}" resolves to ${address} (${blocked}); http.request does not reach private, ` +
          `loopback, link-local or other internal addresses.`,
      );
    }
    vetted.push({ address, family: family === 6 ? 6 : 4 });
  }
  return vetted;
}
