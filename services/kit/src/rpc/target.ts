import { isIPv4, isIPv6 } from "node:net";
import type { ChannelOptions } from "@grpc/grpc-js";

/**
 * The address forms a service accepts for a peer (`POLICY_ADDR`, `COGNITION_ADDR`, …), as grpc-js
 * resolves them:
 *
 * - `host:port` — a name or address; grpc-js resolves names through DNS, the same as `dns:///`.
 *   What standalone wiring and `deploy/local/` use, and a plain Kubernetes ClusterIP Service.
 * - `dns:///host:port` — explicit DNS. Behind a headless Service the name resolves to every ready
 *   pod, and the channel balances calls over all of them (round robin).
 * - `ipv4:IP:PORT[,IP:PORT…]` and `ipv6:[IP]:PORT[,[IP]:PORT…]` — a fixed list of addresses,
 *   balanced the same way (for tests and static topologies).
 *
 * The port is always required: grpc-js would silently use 443 without one.
 */
export const GRPC_TARGET_FORMS = "host:port, dns:///host:port, ipv4:IP:PORT[,IP:PORT…] or ipv6:[IP]:PORT[,[IP]:PORT…]";

export type GrpcTargetKind = "host-port" | "dns" | "ipv4" | "ipv6";

export type ParsedGrpcTarget =
  | { readonly ok: true; readonly kind: GrpcTargetKind; readonly target: string }
  | { readonly ok: false; readonly error: string };

/** A DNS name: dot-separated labels of letters, digits, `-` and `_`, none empty, none longer than 63. */
const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/;

function checkPort(port: string | undefined, where: string): string | undefined {
  if (port === undefined || port === "") return `${where} has no port (":PORT" is required; grpc-js would use 443)`;
  if (!/^\d{1,5}$/.test(port)) return `${where} has port "${port}", which is not a number`;
  const n = Number(port);
  if (n < 1 || n > 65535) return `${where} has port ${port}, outside 1-65535`;
  return undefined;
}

/** Splits `host:port` or `[v6]:port`; the port is undefined when there is none. */
function splitHostPort(s: string): { host: string; port: string | undefined; bracketed: boolean } {
  if (s.startsWith("[")) {
    const end = s.indexOf("]");
    if (end < 0) return { host: s, port: undefined, bracketed: true };
    const rest = s.slice(end + 1);
    return { host: s.slice(1, end), port: rest.startsWith(":") ? rest.slice(1) : rest === "" ? undefined : rest, bracketed: true };
  }
  const colon = s.lastIndexOf(":");
  if (colon < 0) return { host: s, port: undefined, bracketed: false };
  return { host: s.slice(0, colon), port: s.slice(colon + 1), bracketed: false };
}

/** One `host:port` whose host is a DNS name, an IPv4 address or a bracketed IPv6 address. */
function checkHostPort(s: string, where: string): string | undefined {
  const { host, port, bracketed } = splitHostPort(s);
  if (bracketed) {
    if (!isIPv6(host)) return `${where} has "[${host}]", which is not an IPv6 address`;
  } else if (host.includes(":")) {
    return `${where} looks like a bare IPv6 address; write it in brackets, as [${host}]:PORT`;
  } else if (host === "") {
    return `${where} has no host`;
  } else if (!isIPv4(host) && !HOSTNAME.test(host)) {
    return `${where} has host "${host}", which is not a DNS name or an IP address`;
  }
  return checkPort(port, where);
}

/** The comma-separated address list of an `ipv4:` or `ipv6:` target. */
function checkAddressList(family: "ipv4" | "ipv6", list: string): string | undefined {
  if (list.startsWith("//")) return `write ${family}:ADDRESS:PORT without slashes`;
  const entries = list.split(",");
  if (entries.length === 1 && entries[0] === "") return `${family}: lists no address`;
  for (const [i, entry] of entries.entries()) {
    const where = `address ${i + 1} ("${entry}")`;
    if (entry === "") return `address ${i + 1} is empty (a stray comma?)`;
    const { host, port, bracketed } = splitHostPort(entry);
    if (family === "ipv4") {
      if (bracketed || !isIPv4(host)) return `${where} is not an IPv4 address with a port`;
    } else if (!bracketed || !isIPv6(host)) {
      return `${where} is not a bracketed IPv6 address with a port, such as [::1]:50053`;
    }
    const bad = checkPort(port, where);
    if (bad) return bad;
  }
  return undefined;
}

/**
 * Checks a peer address (see {@link GRPC_TARGET_FORMS}) and returns the grpc-js target for it,
 * or what is wrong with it. The target is the value unchanged: grpc-js parses every accepted form.
 */
export function parseGrpcTarget(value: string): ParsedGrpcTarget {
  const fail = (why: string): ParsedGrpcTarget => ({ ok: false, error: `${why}; must be ${GRPC_TARGET_FORMS}` });
  if (/\s/.test(value)) return fail("contains white space");
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):(.*)$/.exec(value);
  // "policy:50051" also matches the scheme pattern; a scheme is only one of the names below.
  const name = scheme?.[1]?.toLowerCase();
  if (name === "dns") {
    const rest = scheme![2]!;
    if (!rest.startsWith("///")) {
      return fail(
        rest.startsWith("//") && rest.indexOf("/", 2) > 2
          ? `"${value}" names a DNS server; write dns:///host:port (three slashes) to use the system resolver`
          : `"${value}": write dns:///host:port (three slashes)`,
      );
    }
    const bad = checkHostPort(rest.slice(3), `"${value}"`);
    return bad ? fail(bad) : { ok: true, kind: "dns", target: value };
  }
  if (name === "ipv4" || name === "ipv6") {
    const bad = checkAddressList(name, scheme![2]!);
    return bad ? fail(`"${value}": ${bad}`) : { ok: true, kind: name, target: value };
  }
  if (scheme && scheme[2]!.startsWith("//")) {
    return fail(`"${value}" has the scheme ${name}:, which is not supported (no http://, https:// or grpc://)`);
  }
  if (name === "unix" || name === "unix-abstract" || name === "vsock") {
    return fail(`"${value}" has the scheme ${name}:, which is not supported`);
  }
  const bad = checkHostPort(value, `"${value}"`);
  return bad ? fail(bad) : { ok: true, kind: "host-port", target: value };
}

/**
 * The balancing policy of every channel: round robin over every address the target resolves to.
 * grpc-js's default (pick_first) keeps one HTTP/2 connection to one address, so replicas behind a
 * headless Service (or an ipv4: list) after the first would get no calls.
 */
export const GRPC_SERVICE_CONFIG = { loadBalancingConfig: [{ round_robin: {} }] } as const;

/**
 * How often a channel may look its DNS name up again. grpc-js re-resolves when a connection is
 * lost (a pod went away, or the server's maximum connection age closed it, which is what makes
 * the lookup periodic: see {@link GRPC_SERVER_CONNECTION_AGE_MS}); this bounds how often that happens.
 */
export const DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS = 5_000;

/**
 * Reconnect backoff bounds. grpc-js's default maximum (two minutes) would leave a restarted
 * service unused for up to that long on a fixed address; inside a cluster ten seconds is cheap.
 */
export const RECONNECT_BACKOFF_MS = { initial: 1_000, max: 10_000 } as const;

/**
 * Client keepalive: a ping every 30 s, a connection without an answer in 10 s is dropped (and its
 * calls fail `unavailable` instead of waiting for their deadline on a node that vanished without
 * closing its sockets), also while idle, so the next call does not land on a dead connection.
 * The servers are grpc-js and do not limit pings.
 */
export const CLIENT_KEEPALIVE_MS = { time: 30_000, timeout: 10_000 } as const;

/**
 * The largest message a client takes. grpc-js's default (4 MiB) is below what a service may send
 * by design: a council session may hold 4 MiB of state, so its export line (and a full recall)
 * is a little more; the refusal would be RESOURCE_EXHAUSTED on a call that did nothing wrong.
 * Still bounded, so a runaway response cannot exhaust the caller.
 */
export const GRPC_MAX_RECEIVE_MESSAGE_BYTES = 16 * 1024 * 1024;

/** The channel options {@link createGrpcClient} uses unless the caller overrides them. */
export function defaultChannelOptions(): ChannelOptions {
  return {
    "grpc.service_config": JSON.stringify(GRPC_SERVICE_CONFIG),
    // The policy is ours: a TXT record in DNS must not change it (and no lookup is spent on it).
    "grpc.service_config_disable_resolution": 1,
    "grpc.dns_min_time_between_resolutions_ms": DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS,
    "grpc.initial_reconnect_backoff_ms": RECONNECT_BACKOFF_MS.initial,
    "grpc.max_reconnect_backoff_ms": RECONNECT_BACKOFF_MS.max,
    "grpc.keepalive_time_ms": CLIENT_KEEPALIVE_MS.time,
    "grpc.keepalive_timeout_ms": CLIENT_KEEPALIVE_MS.timeout,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.max_receive_message_length": GRPC_MAX_RECEIVE_MESSAGE_BYTES,
  };
}

/**
 * Server-side connection ageing: every connection a client opens is closed (HTTP/2 GOAWAY) after
 * about `maxConnectionAgeMs` (grpc-js adds ±10 % jitter), its calls allowed `graceMs` to finish.
 * The client reconnects at once and looks the name up again, so the replicas an autoscaler adds
 * behind a headless Service get calls within about two minutes (plus the DNS TTL), without any
 * call failing. The grace outlasts the longest call a caller makes (`chaoscore_achieve`'s stream,
 * five minutes).
 */
export const GRPC_SERVER_CONNECTION_AGE_MS = { maxAge: 120_000, grace: 360_000 } as const;
