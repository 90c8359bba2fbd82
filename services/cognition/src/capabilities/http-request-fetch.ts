import type { LookupAddress, LookupOptions } from "node:dns";
import { request as httpGet, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { request as httpsGet } from "node:https";
import type { LookupFunction } from "node:net";
import { pipeline, type Readable } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import type { ResolvedAddress } from "./http-request-target.js";

/** The answer to one GET, before any redirect is followed. */
export interface HopResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** Decoded body bytes, at most `maxBytes`; empty for a redirect that will be followed. */
  readonly body: Buffer;
  readonly truncated: boolean;
}

export interface HopRequest {
  readonly url: URL;
  /** The vetted addresses of `url.hostname`; the connection goes only to these. */
  readonly addresses: readonly ResolvedAddress[];
  readonly headers: Readonly<Record<string, string>>;
  readonly maxBytes: number;
  readonly signal: AbortSignal;
  /** Whether to read the body (not for a redirect that will be followed). */
  readonly readBody: (status: number, headers: IncomingHttpHeaders) => boolean;
}

/**
 * A `lookup` for the socket that answers only with the already-vetted addresses, so the
 * connection cannot be steered elsewhere by a second DNS answer, while the URL keeps the host
 * name for the Host header, TLS SNI and certificate checks.
 */
function pinnedLookup(hostname: string, addresses: readonly ResolvedAddress[]): LookupFunction {
  return (name: string, options: LookupOptions, callback) => {
    const family = options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : options.family;
    const matching = addresses.filter((a) => !family || a.family === family);
    const first = matching[0];
    if (name !== hostname || first === undefined) {
      const err: NodeJS.ErrnoException = new Error(`no vetted address for "${name}"`);
      err.code = "ENOTFOUND";
      callback(err, "", 0);
      return;
    }
    if (options.all) {
      callback(null, matching.map((a): LookupAddress => ({ address: a.address, family: a.family })));
    } else {
      callback(null, first.address, first.family);
    }
  };
}

/** A decoder for the body's content-encoding; undefined leaves the bytes as they are. */
function decoderFor(encoding: string | undefined): NodeJS.ReadWriteStream | undefined {
  switch (encoding?.trim().toLowerCase()) {
    case "gzip":
    case "x-gzip":
      return createGunzip();
    case "deflate":
      return createInflate();
    case "br":
      return createBrotliDecompress();
    default:
      return undefined;
  }
}

/**
 * Reads at most `maxBytes` of decoded body, then stops the transfer: the rest is never
 * downloaded, and a compressed body cannot expand past the limit.
 */
async function readLimited(res: IncomingMessage, maxBytes: number): Promise<{ body: Buffer; truncated: boolean }> {
  const decoder = decoderFor(res.headers["content-encoding"]);
  const source: Readable = decoder ? (pipeline(res, decoder, () => undefined) as unknown as Readable) : res;
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  for await (const chunk of source) {
    const buf = chunk as Buffer;
    const room = maxBytes - size;
    if (buf.length > room) {
      chunks.push(buf.subarray(0, room));
      size += room;
      truncated = true;
      break;
    }
    chunks.push(buf);
    size += buf.length;
  }
  // Leaving the loop early destroys `source`; make sure the socket goes too.
  res.destroy();
  return { body: Buffer.concat(chunks, size), truncated };
}

/**
 * One GET to a vetted address over a fresh connection (no pooling, so nothing outlives the
 * call or is shared between hosts). Rejects with the underlying Node error; the caller maps it.
 */
export function fetchHop(hop: HopRequest): Promise<HopResponse> {
  const get = hop.url.protocol === "https:" ? httpsGet : httpGet;
  return new Promise<HopResponse>((resolve, reject) => {
    const req = get(hop.url, {
      method: "GET",
      headers: hop.headers,
      agent: false,
      lookup: pinnedLookup(hop.url.hostname, hop.addresses),
      signal: hop.signal,
    });
    req.once("error", reject);
    req.once("response", (res) => {
      const status = res.statusCode ?? 0;
      if (!hop.readBody(status, res.headers)) {
        res.destroy();
        resolve({ status, headers: res.headers, body: Buffer.alloc(0), truncated: false });
        return;
      }
      // The request's signal tears the socket down; make the body read fail with its reason.
      const onAbort = () => res.destroy(hop.signal.reason instanceof Error ? hop.signal.reason : new Error("aborted"));
      hop.signal.addEventListener("abort", onAbort, { once: true });
      readLimited(res, hop.maxBytes)
        .then(({ body, truncated }) => resolve({ status, headers: res.headers, body, truncated }), reject)
        .finally(() => hop.signal.removeEventListener("abort", onAbort));
    });
    req.end();
  });
}
