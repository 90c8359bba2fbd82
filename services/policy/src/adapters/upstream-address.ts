import { allowCidrs, ChaosError, resolveVetted, systemLookup, type HostLookup } from "@chaos-core/kit";

/** Checks the URL a tenant registers for an upstream; rejects naming `field`. */
export type UpstreamUrlCheck = (url: string, field?: string) => Promise<void>;

/**
 * The address check a tenant's upstream URL passes when it is registered (docs/federation.md §3):
 * `http.request`'s rules (kit's `resolveVetted`) — every address its host resolves to (or the
 * address it names) public unicast, or in the operator's allowed ranges
 * (`CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`) — so a tenant cannot make the control plane a probe of the
 * cluster's network. Connecting checks again, at every request and redirect (cognition's
 * `guardedUpstreamFetch`): a name may resolve elsewhere later.
 * @throws ChaosError `invalid_argument` naming the field, or `unavailable` when the host does not resolve
 */
export function createUpstreamUrlCheck(options: { allowedAddresses?: readonly string[]; lookup?: HostLookup } = {}): UpstreamUrlCheck {
  const allowAddress = allowCidrs(options.allowedAddresses ?? []);
  const lookup = options.lookup ?? systemLookup;
  return async (url, field = "declaration.url") => {
    let host: string;
    try {
      host = new URL(url).hostname;
    } catch {
      throw new ChaosError("invalid_argument", `${field}: must be an http or https URL`);
    }
    try {
      await resolveVetted(host, field, { lookup, allowAddress, who: "a tenant's upstream" });
    } catch (err) {
      if (err instanceof ChaosError && err.code === "permission_denied") throw new ChaosError("invalid_argument", err.message);
      throw err;
    }
  };
}
