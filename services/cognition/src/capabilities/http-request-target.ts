import { isIP } from "node:net";
import { ChaosError } from "@chaos-core/kit";

// The address rules and the vetted resolution live in kit: tenants' upstreams (the policy service's
// registry, cognition's connections to them) are held to the same ones.
export { resolveVetted, systemLookup, type HostLookup, type ResolvedAddress } from "@chaos-core/kit";

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
