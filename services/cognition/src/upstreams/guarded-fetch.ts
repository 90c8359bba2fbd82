import type { LookupAddress, LookupOptions } from "node:dns";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { Readable } from "node:stream";
import { allowCidrs, ChaosError, resolveVetted, systemLookup, type HostLookup, type ResolvedAddress } from "@chaos-core/kit";

/** What the MCP SDK's Streamable HTTP transport calls to send a request (its `FetchLike`). */
export type UpstreamFetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

/** How a tenant's upstream is reached: the operator's allowed ranges, and the resolver (tests map names). */
export interface GuardedFetchOptions {
  /** `CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`: ranges reached although internal (the setting `http.request` reads). */
  readonly allowedAddresses?: readonly string[];
  readonly lookup?: HostLookup;
  /** Named in refusals: `upstream "wiki" of tenant "acme"`. */
  readonly who: string;
}

/** Redirects followed (where the caller does not follow them itself) before the request fails. */
const MAX_REDIRECTS = 5;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Statuses a Response may not carry a body with. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
/** Headers kept when a redirect leaves the origin: the declaration's (secret) headers never follow it. */
const CROSS_ORIGIN_HEADERS = new Set(["accept", "content-type", "user-agent", "mcp-protocol-version", "last-event-id"]);

/**
 * A `lookup` for the socket that answers only with the vetted addresses, so the connection cannot
 * be steered elsewhere by a second DNS answer, while the URL keeps the host name for the Host
 * header, TLS SNI and certificate checks.
 */
function pinnedLookup(addresses: readonly ResolvedAddress[]): LookupFunction {
  return (_name: string, options: LookupOptions, callback) => {
    const family = options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : options.family;
    const matching = addresses.filter((a) => !family || a.family === family);
    const first = matching[0];
    if (first === undefined) {
      const err: NodeJS.ErrnoException = new Error("no vetted address");
      err.code = "ENOTFOUND";
      callback(err, "", 0);
      return;
    }
    if (options.all) callback(null, matching.map((a): LookupAddress => ({ address: a.address, family: a.family })));
    else callback(null, first.address, first.family);
  };
}

function bodyOf(body: RequestInit["body"]): string | Uint8Array | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === "string" || body instanceof Uint8Array) return body;
  if (body instanceof URLSearchParams) return body.toString();
  throw new ChaosError("invalid_argument", "an upstream request body must be text or bytes");
}

/** One request to vetted addresses over a fresh connection; the answer streams as it arrives. */
function send(url: URL, addresses: readonly ResolvedAddress[], method: string, headers: Headers, body: string | Uint8Array | undefined, signal: AbortSignal | undefined): Promise<IncomingMessage> {
  const request = url.protocol === "https:" ? httpsRequest : httpRequest;
  const outgoing: Record<string, string> = {};
  headers.forEach((value, name) => (outgoing[name] = value));
  // The body is read as it comes; a compressed one would need decoding fetch does and this does not.
  outgoing["accept-encoding"] = "identity";
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: outgoing, agent: false, lookup: pinnedLookup(addresses), ...(signal ? { signal } : {}) });
    req.once("error", reject);
    req.once("response", resolve);
    req.end(body);
  });
}

function responseOf(res: IncomingMessage): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const status = res.statusCode ?? 502;
  if (NULL_BODY.has(status)) {
    res.resume();
    return new Response(null, { status, statusText: res.statusMessage ?? "", headers });
  }
  return new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status, statusText: res.statusMessage ?? "", headers });
}

/**
 * The fetch a tenant's upstream is reached with (docs/federation.md §3): the same address checks
 * as `http.request` — every address the host resolves to must be public unicast or in the
 * operator's allowed ranges, the connection goes only to those addresses — at every request
 * (so at connect time) and at every redirect, whether it follows them itself or the MCP SDK does
 * (`redirect: "manual"`: each hop is a request of its own). A redirect that leaves the origin
 * carries none of the declaration's headers. A refusal is `permission_denied` naming the hop.
 */
export function guardedUpstreamFetch(options: GuardedFetchOptions): UpstreamFetch {
  const allowAddress = allowCidrs(options.allowedAddresses ?? []);
  const lookup = options.lookup ?? systemLookup;
  return async (input, init = {}) => {
    let url = new URL(input);
    const first = url;
    let method = (init.method ?? "GET").toUpperCase();
    let headers = new Headers(init.headers);
    let body = bodyOf(init.body);
    const signal = init.signal ?? undefined;
    for (let hop = 0; ; hop++) {
      const where = `${options.who}: ${hop === 0 ? url.href : `redirect ${hop} to ${url.href}`}`;
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new ChaosError("permission_denied", `${where}: only http and https are reached`);
      if (url.username !== "" || url.password !== "") throw new ChaosError("permission_denied", `${where}: a URL with credentials is refused`);
      const addresses = await resolveVetted(url.hostname, where, { lookup, allowAddress, who: options.who, ...(signal ? { signal } : {}) });
      const res = await send(url, addresses, method, headers, body, signal);
      const location = res.headers.location;
      if (init.redirect === "manual" || !REDIRECTS.has(res.statusCode ?? 0) || !location) return responseOf(res);
      res.resume();
      if (init.redirect === "error") throw new ChaosError("unavailable", `${where}: answered ${res.statusCode} with a redirect`);
      if (hop === MAX_REDIRECTS) throw new ChaosError("unavailable", `${where}: more than ${MAX_REDIRECTS} redirects`);
      const next = new URL(location, url);
      // As fetch does: a 303, or a 301/302 after a POST, is followed with a GET and no body.
      if (res.statusCode === 303 || ((res.statusCode === 301 || res.statusCode === 302) && method === "POST")) {
        method = "GET";
        body = undefined;
        headers.delete("content-type");
      }
      if (next.origin !== first.origin) {
        const kept = new Headers();
        headers.forEach((value, name) => CROSS_ORIGIN_HEADERS.has(name) && kept.set(name, value));
        headers = kept;
      }
      url = next;
    }
  };
}
