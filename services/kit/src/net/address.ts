import { isIP } from "node:net";

/**
 * Which resolved IP addresses an outbound request for a tenant may reach: `http.request`'s GETs
 * and a tenant's own upstreams (docs/federation.md §3). Everything here is pure (no DNS, no
 * sockets) so the rules are unit-tested on their own.
 */

/** A parsed IP address: the family and its value as an unsigned integer (32 or 128 bits). */
interface ParsedAddress {
  readonly family: 4 | 6;
  readonly value: bigint;
}

interface Range {
  readonly family: 4 | 6;
  readonly base: bigint;
  readonly prefix: number;
}

function bits(family: 4 | 6): number {
  return family === 4 ? 32 : 128;
}

function parseV4(text: string): bigint | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return undefined;
    value = (value << 8n) | BigInt(part);
  }
  return value;
}

function parseV6(text: string): bigint | undefined {
  let address = text;
  // A trailing dotted quad (e.g. ::ffff:127.0.0.1) stands for the last two groups.
  const lastColon = address.lastIndexOf(":");
  const last = address.slice(lastColon + 1);
  if (last.includes(".")) {
    const v4 = parseV4(last);
    if (v4 === undefined) return undefined;
    address = `${address.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = address.split("::");
  if (halves.length > 2) return undefined;
  const groups = (s: string): string[] => (s === "" ? [] : s.split(":"));
  const head = groups(halves[0] ?? "");
  const back = halves.length === 2 ? groups(halves[1] ?? "") : [];
  const explicit = head.length + back.length;
  if (halves.length === 1 ? explicit !== 8 : explicit > 7) return undefined;
  const all = [...head, ...Array<string>(8 - explicit).fill("0"), ...back];
  let value = 0n;
  for (const g of all) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return undefined;
    value = (value << 16n) | BigInt(`0x${g}`);
  }
  return value;
}

/** Parses an IPv4 or IPv6 address (a `%zone` suffix is ignored); undefined when it is not one. */
export function parseAddress(text: string): ParsedAddress | undefined {
  const address = text.split("%")[0] ?? "";
  const family = isIP(address);
  if (family === 4) {
    const value = parseV4(address);
    return value === undefined ? undefined : { family: 4, value };
  }
  if (family === 6) {
    const value = parseV6(address);
    return value === undefined ? undefined : { family: 6, value };
  }
  return undefined;
}

function formatV4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join(".");
}

function range(cidr: string): Range {
  const [addr = "", prefixText, ...rest] = cidr.split("/");
  const parsed = parseAddress(addr);
  // "10.0.0.0/8/garbage" is no range: nothing after the prefix length is ignored.
  if (!parsed || rest.length > 0) throw new Error(`"${cidr}" is not an IP address or CIDR range`);
  const width = bits(parsed.family);
  const prefix = prefixText === undefined ? width : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > width || (prefixText !== undefined && !/^\d+$/.test(prefixText))) {
    throw new Error(`"${cidr}" has an invalid prefix length (0 to ${width})`);
  }
  return { family: parsed.family, base: parsed.value, prefix };
}

function contains(r: Range, a: ParsedAddress): boolean {
  if (r.family !== a.family) return false;
  const shift = BigInt(bits(r.family) - r.prefix);
  return a.value >> shift === r.base >> shift;
}

/**
 * Address classes that are never reached by default, from the IANA IPv4 and IPv6
 * special-purpose registries. Order matters only for the label: the first match names it.
 */
const BLOCKED: ReadonlyArray<readonly [string, string]> = [
  ["0.0.0.0/8", "unspecified (this network)"],
  ["10.0.0.0/8", "private"],
  ["100.64.0.0/10", "carrier-grade NAT (shared address space)"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local (cloud metadata lives here)"],
  ["172.16.0.0/12", "private"],
  ["192.0.0.0/24", "IETF protocol assignment"],
  ["192.0.2.0/24", "documentation"],
  ["192.88.99.0/24", "6to4 relay anycast"],
  ["192.168.0.0/16", "private"],
  ["198.18.0.0/15", "benchmarking"],
  ["198.51.100.0/24", "documentation"],
  ["203.0.113.0/24", "documentation"],
  ["224.0.0.0/4", "multicast"],
  ["240.0.0.0/4", "reserved (incl. broadcast)"],
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["::/96", "IPv4-compatible (deprecated)"],
  ["64:ff9b:1::/48", "local-use NAT64"],
  ["100::/64", "discard-only"],
  ["2001::/23", "IETF protocol assignment (Teredo, benchmarking, ORCHID)"],
  ["2001:db8::/32", "documentation"],
  ["fc00::/7", "unique-local"],
  ["fe80::/10", "link-local"],
  ["fec0::/10", "site-local (deprecated)"],
  ["ff00::/8", "multicast"],
];

const BLOCKED_RANGES = BLOCKED.map(([cidr, label]) => ({ range: range(cidr), label }));

/** IPv6 prefixes that carry an IPv4 address; the embedded address is what gets reached. */
const MAPPED = range("::ffff:0:0/96");
const NAT64 = range("64:ff9b::/96");
const SIX_TO_FOUR = range("2002::/16");
const GLOBAL_UNICAST_V6 = range("2000::/3");

/**
 * The IPv4 address an IPv6 address stands for (IPv4-mapped, NAT64 well-known prefix, 6to4),
 * so a private IPv4 address cannot be reached dressed as IPv6.
 */
function embeddedV4(a: ParsedAddress): ParsedAddress | undefined {
  if (a.family !== 6) return undefined;
  if (contains(MAPPED, a) || contains(NAT64, a)) return { family: 4, value: a.value & 0xffffffffn };
  if (contains(SIX_TO_FOUR, a)) return { family: 4, value: (a.value >> 80n) & 0xffffffffn };
  return undefined;
}

/**
 * Why an address may not be reached by default, or undefined when it is a public unicast
 * address. Unparseable input is refused too (fail closed).
 */
export function blockedAddressClass(address: string): string | undefined {
  const parsed = parseAddress(address);
  if (!parsed) return "not an IP address";
  const v4 = embeddedV4(parsed);
  if (v4) {
    const inner = blockedAddressClass(formatV4(v4.value));
    return inner === undefined ? undefined : `${inner}, embedded in IPv6`;
  }
  for (const { range: r, label } of BLOCKED_RANGES) {
    if (contains(r, parsed)) return label;
  }
  if (parsed.family === 6 && !contains(GLOBAL_UNICAST_V6, parsed)) return "reserved (not IPv6 global unicast)";
  return undefined;
}

/** Decides whether an operator explicitly allows an address that the default rules refuse. */
export type AllowAddress = (address: string) => boolean;

/**
 * Builds an {@link AllowAddress} from CIDR ranges or single addresses (`127.0.0.1`,
 * `10.20.0.0/16`, `fd00::/8`). An IPv4-mapped IPv6 address matches its IPv4 range.
 * Throws on a malformed entry, so a typo is found at start-up rather than ignored.
 */
export function allowCidrs(cidrs: readonly string[]): AllowAddress {
  const ranges = cidrs.map(range);
  return (address) => {
    const parsed = parseAddress(address);
    if (!parsed) return false;
    const candidates = [parsed];
    const v4 = embeddedV4(parsed);
    if (v4 && contains(MAPPED, parsed)) candidates.push(v4);
    return candidates.some((a) => ranges.some((r) => contains(r, a)));
  };
}
