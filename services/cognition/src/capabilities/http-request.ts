import type { IncomingHttpHeaders } from "node:http";
import { allowCidrs, ChaosError, type AllowAddress } from "@chaos-core/kit";
import { Decision, Risk } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { z } from "zod";
import { defineCapability, type Capability, type CapabilityContext, type CapabilityRisk } from "./capability.js";
import { fetchHop } from "./http-request-fetch.js";
import { checkTargetUrl, resolveVetted, systemLookup, type HostLookup } from "./http-request-target.js";

const NAME = "http.request";
// Medium: it reaches hosts outside the cluster and returns untrusted content to the model, and
// a URL can carry data out to an allowlisted host; GET-only and the allowlist keep it below high.
const RISK = "medium" satisfies CapabilityRisk;
const RISK_PROTO: Record<CapabilityRisk, Risk> = {
  low: Risk.LOW,
  medium: Risk.MEDIUM,
  high: Risk.HIGH,
  critical: Risk.CRITICAL,
};

/** Body bytes returned when the caller does not say. */
export const HTTP_REQUEST_DEFAULT_MAX_BYTES = 1024 * 1024;
/** The most body bytes a caller may ask for. */
export const HTTP_REQUEST_MAX_BYTES_CAP = 4 * 1024 * 1024;
/** Overall deadline of one call (DNS, every hop, the body) unless the factory is told otherwise. */
export const HTTP_REQUEST_DEFAULT_TIMEOUT_MS = 10_000;
/** The longest deadline the factory accepts. */
export const HTTP_REQUEST_TIMEOUT_CAP_MS = 60_000;
/** Redirects followed before the call fails. */
export const HTTP_REQUEST_MAX_REDIRECTS = 5;

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/** RFC 9110 token: what a header name may be. */
const HEADER_NAME_RE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const MAX_HEADERS = 32;

/**
 * Request headers the caller may not set: the ones that would defeat the address pinning or
 * the size limit (Host, framing, encoding, proxying), and credentials, which never travel in
 * tool arguments because arguments are recorded in the audit ledger.
 */
const FORBIDDEN_HEADERS = new Set([
  "host",
  "connection",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
  "transfer-encoding",
  "content-length",
  "expect",
  "accept-encoding",
  "authorization",
  "proxy-authorization",
  "cookie",
]);

/** Caller headers kept when a redirect leaves the original origin; others may carry secrets. */
const CROSS_ORIGIN_HEADERS = new Set(["accept", "accept-language", "user-agent"]);

/** Response headers returned: descriptive ones only (no Set-Cookie or anything session-like). */
const RETURNED_HEADERS = [
  "content-type",
  "content-length",
  "content-encoding",
  "content-language",
  "last-modified",
  "etag",
  "cache-control",
  "expires",
  "date",
  "age",
  "retry-after",
  "location",
] as const;
const MAX_HEADER_VALUE = 1024;

function headerNameProblem(name: string): string | undefined {
  if (!HEADER_NAME_RE.test(name)) return `"${name}" is not a valid header name`;
  const lower = name.toLowerCase();
  if (FORBIDDEN_HEADERS.has(lower) || lower.startsWith("proxy-")) {
    return `header "${name}" may not be set (it is controlled by http.request, or carries credentials that never travel in tool arguments)`;
  }
  return undefined;
}

const urlSchema = z
  .string()
  .min(1)
  .max(8192)
  .superRefine((value, ctx) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.addIssue({ code: "custom", message: "not an absolute URL; pass e.g. https://api.example.com/path" });
      return;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      ctx.addIssue({ code: "custom", message: `only http and https URLs are fetched, not "${url.protocol}"` });
    }
    if (url.username !== "" || url.password !== "") {
      ctx.addIssue({ code: "custom", message: "URLs with credentials (user:password@) are refused" });
    }
  });

/** Input of `http.request`: one GET. */
export const httpRequestInputSchema = z.strictObject({
  url: urlSchema.describe("Absolute http(s) URL; its host must be in the operator's httpAllowedDomains."),
  method: z
    .literal("GET", {
      error: (issue) =>
        `http.request is GET only (read-only); method ${JSON.stringify(issue.input)} is refused. ` +
        `Omit method or pass "GET".`,
    })
    .optional()
    .describe('Always "GET"; accepted only so other methods get a clear refusal.'),
  headers: z
    .record(z.string(), z.string().max(8192).regex(/^[^\r\n\0]*$/, "header values may not contain CR, LF or NUL"))
    .superRefine((headers, ctx) => {
      const names = Object.keys(headers);
      if (names.length > MAX_HEADERS) ctx.addIssue({ code: "custom", message: `at most ${MAX_HEADERS} headers` });
      for (const name of names) {
        const problem = headerNameProblem(name);
        if (problem) ctx.addIssue({ code: "custom", path: [name], message: problem });
      }
    })
    .optional()
    .describe("Extra request headers (no Host, credentials, cookies or framing headers)."),
  max_bytes: z
    .number()
    .int()
    .min(1)
    .max(HTTP_REQUEST_MAX_BYTES_CAP)
    .optional()
    .describe(`Most body bytes to return (default ${HTTP_REQUEST_DEFAULT_MAX_BYTES}); the rest is cut off and flagged.`),
});

/** Output of `http.request`: the final response after redirects. */
export const httpRequestOutputSchema = z.strictObject({
  status: z.number().int().min(100).max(999),
  url: z.string().describe("The final URL, after redirects."),
  redirects: z.array(z.string()).describe("Every URL redirected to, in order."),
  headers: z.record(z.string(), z.string()).describe("Descriptive response headers only (no cookies)."),
  body: z.string().describe("The body as text, at most max_bytes of it."),
  truncated: z.boolean().describe("True when the body was longer than max_bytes and was cut off."),
  bytes: z.number().int().min(0).describe("Body bytes returned (after content decoding)."),
});

type Input = z.output<typeof httpRequestInputSchema>;
type Output = z.output<typeof httpRequestOutputSchema>;

/** What can be adjusted; every default is the safe one. */
export interface HttpRequestOptions {
  /** DNS resolution (default: the system resolver through `dns.lookup`). */
  readonly lookup?: HostLookup;
  /**
   * Addresses the operator explicitly allows although the default rules refuse them (internal
   * services): a predicate, or CIDR ranges / single addresses. Default: none. An operator-facing
   * setting for this (allowed internal CIDRs) is future configuration and not built yet.
   */
  readonly allowAddress?: AllowAddress | readonly string[];
  /** Overall deadline of one call in ms (default 10 000, at most 60 000). */
  readonly timeoutMs?: number;
  /** User-Agent sent unless the caller sets one. */
  readonly userAgent?: string;
}

/** The host `facts()` reports and policy decides on: the URL's host, lower-case, as parsed. */
function hostOf(url: string): string {
  return new URL(url).hostname.toLowerCase();
}

function safeHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of RETURNED_HEADERS) {
    const value = headers[name];
    if (value === undefined) continue;
    const text = Array.isArray(value) ? value.join(", ") : String(value);
    out[name] = text.length > MAX_HEADER_VALUE ? `${text.slice(0, MAX_HEADER_VALUE)}…` : text;
  }
  return out;
}

function decodeText(body: Buffer, contentType: string | undefined): string {
  const charset = /charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? "")?.[1];
  try {
    return new TextDecoder(charset ?? "utf-8").decode(body);
  } catch {
    return new TextDecoder("utf-8").decode(body);
  }
}

/** Maps whatever a hop threw to a ChaosError that names the hop, the host and the cause. */
function hopError(err: unknown, where: string, signals: { deadline: AbortSignal; caller: AbortSignal }, timeoutMs: number): ChaosError {
  if (err instanceof ChaosError) return err;
  if (signals.deadline.aborted) {
    return new ChaosError("deadline_exceeded", `${where}: no complete answer within ${timeoutMs} ms.`, { cause: err });
  }
  if (signals.caller.aborted) {
    const reason: unknown = signals.caller.reason;
    return reason instanceof DOMException && reason.name === "TimeoutError"
      ? new ChaosError("deadline_exceeded", `${where}: the step ran past its deadline.`, { cause: err })
      : new ChaosError("cancelled", `${where}: the call was cancelled.`, { cause: err });
  }
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const detail = code ?? (err instanceof Error ? err.message : "connection failed");
  return new ChaosError("unavailable", `${where}: the request failed (${detail}).`, { cause: err });
}

/** Asks policy about a host a redirect leads to; anything but ALLOW refuses the hop. */
async function checkRedirectPolicy(host: string, where: string, ctx: CapabilityContext, signal: AbortSignal): Promise<void> {
  const res = await ctx.policy.evaluate(
    { capability: NAME, risk: RISK_PROTO[RISK], facts: { httpHost: host } },
    { ctx: ctx.call, signal },
  );
  if (res.decision === Decision.ALLOW) return;
  const why =
    res.decision === Decision.REQUIRE_APPROVAL
      ? `policy requires an approval for "${host}", and an approval covers only the URL it was given for; ` +
        `call http.request with that URL directly`
      : `policy refuses "${host}"`;
  throw new ChaosError("policy_denied", `${where}: ${why}. ${res.reason}`);
}

function requestHeaders(input: Input, sameOrigin: boolean, userAgent: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    if (sameOrigin || CROSS_ORIGIN_HEADERS.has(name.toLowerCase())) headers[name.toLowerCase()] = value;
  }
  headers["user-agent"] ??= userAgent;
  headers["accept"] ??= "*/*";
  headers["accept-encoding"] = "identity";
  return headers;
}

/**
 * Builds `http.request` with the given options. Use it directly only to allow operator-chosen
 * internal addresses or, in tests, to map names to local servers; {@link httpRequestCapability}
 * is the one with the safe defaults.
 */
export function createHttpRequestCapability(
  options: HttpRequestOptions = {},
): Capability<typeof httpRequestInputSchema, typeof httpRequestOutputSchema> {
  const lookup = options.lookup ?? systemLookup;
  const allowAddress: AllowAddress =
    typeof options.allowAddress === "function" ? options.allowAddress : allowCidrs(options.allowAddress ?? []);
  const timeoutMs = options.timeoutMs ?? HTTP_REQUEST_DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > HTTP_REQUEST_TIMEOUT_CAP_MS) {
    throw new Error(`http.request timeoutMs must be an integer from 1 to ${HTTP_REQUEST_TIMEOUT_CAP_MS}, got ${timeoutMs}`);
  }
  const userAgent = options.userAgent ?? "chaos-core-http-request/0.1";

  async function handler(input: Input, ctx: CapabilityContext): Promise<Output> {
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = AbortSignal.any([ctx.signal, deadline]);
    const maxBytes = input.max_bytes ?? HTTP_REQUEST_DEFAULT_MAX_BYTES;
    const first = new URL(input.url);
    // The executor asked policy about this host before the handler ran.
    const decidedHost = first.hostname.toLowerCase();
    const redirects: string[] = [];
    let url = first;

    for (let hop = 0; ; hop++) {
      const where = hop === 0 ? `GET ${url.href}` : `redirect ${hop} to ${url.href}`;
      try {
        checkTargetUrl(url, where);
        const host = url.hostname.toLowerCase();
        // Policy decides on (capability, risk, host) only, so the host it already allowed needs no second look.
        if (host !== decidedHost) await checkRedirectPolicy(host, where, ctx, signal);
        const addresses = await resolveVetted(url.hostname, where, { lookup, allowAddress, signal });
        const willFollow = (status: number, headers: IncomingHttpHeaders) =>
          REDIRECT_STATUSES.has(status) && typeof headers.location === "string" && headers.location !== "";
        const res = await fetchHop({
          url,
          addresses,
          headers: requestHeaders(input, url.origin === first.origin, userAgent),
          maxBytes,
          signal,
          readBody: (status, headers) => !willFollow(status, headers),
        });

        if (willFollow(res.status, res.headers)) {
          if (hop === HTTP_REQUEST_MAX_REDIRECTS) {
            throw new ChaosError(
              "resource_exhausted",
              `${where}: answered ${res.status} with another redirect; http.request follows at most ` +
                `${HTTP_REQUEST_MAX_REDIRECTS} redirects (a loop, or a chain too long).`,
            );
          }
          let next: URL;
          try {
            next = new URL(res.headers.location as string, url);
          } catch (err) {
            throw new ChaosError("unavailable", `${where}: answered ${res.status} with an invalid Location header.`, { cause: err });
          }
          redirects.push(next.href);
          url = next;
          continue;
        }

        return {
          status: res.status,
          url: url.href,
          redirects,
          headers: safeHeaders(res.headers),
          body: decodeText(res.body, res.headers["content-type"]),
          truncated: res.truncated,
          bytes: res.body.length,
        };
      } catch (err) {
        throw hopError(err, where, { deadline, caller: ctx.signal }, timeoutMs);
      }
    }
  }

  return defineCapability({
    name: NAME,
    description:
      "Fetch a web page or API resource with an HTTP GET and return its status, final URL, " +
      "descriptive headers and body text (cut at max_bytes). Read-only. The host must be in the " +
      "operator's httpAllowedDomains; IP addresses, private and internal networks are refused, " +
      `and at most ${HTTP_REQUEST_MAX_REDIRECTS} redirects are followed, each checked again.`,
    risk: RISK,
    inputSchema: httpRequestInputSchema,
    outputSchema: httpRequestOutputSchema,
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    facts: (input) => ({ httpHost: hostOf(input.url) }),
    // The first http(s) URL the objective names, without trailing sentence punctuation.
    fromObjective: (objective) => {
      const url = /\bhttps?:\/\/[^\s<>"'`]+/iu.exec(objective)?.[0]?.replace(/[.,;:!?)\]]+$/u, "");
      return url === undefined ? undefined : { url };
    },
    handler,
  });
}

/** `http.request` with the safe defaults: system DNS and no internal address allowed. */
export const httpRequestCapability = createHttpRequestCapability();
