/**
 * CEL's timestamp accessors given a time zone (`now.getHours("Europe/Berlin")`), without building
 * an `Intl` formatter on every call (docs/policy-conditions.md §9, issue 33 increment 5).
 *
 * @marcbachmann/cel-js 8 implements `Timestamp.getHours(string)` and its siblings as
 * `new Date(d.toLocaleString("en-US", {timeZone}))`: `toLocaleString` with options builds a new
 * `Intl.DateTimeFormat` each time (about 75 µs), and reading the string back in the process's own
 * zone is off when that zone has daylight saving time (an hour that does not exist there moves,
 * and `getDayOfYear` loses a day in summer, with or without a zone). The library offers no way to
 * replace a standard overload (`registerFunction` refuses a signature overlapping one), so this
 * module registers its own overloads under names the parser cannot produce (`getHours@zone`),
 * through the public `registerFunction`, and {@link useZonedAccessors} renames the calls in a
 * checked expression to them. The overloads read the wall clock from one cached formatter per zone
 * ({@link MAX_CACHED_ZONES}), remembering the last instant each zone formatted, so several
 * accessors on one decision's `now` format it once.
 *
 * Semantics stay CEL's: `getFullYear`, `getMonth` (0-based), `getDate` (1-based), `getDayOfMonth`
 * (0-based), `getDayOfWeek` (0 = Sunday), `getDayOfYear` (0-based), `getHours`, `getMinutes`,
 * `getSeconds`, `getMilliseconds`, each in the named zone (any name `Intl` accepts, as the library
 * does); an unknown zone is an evaluation error, `getMilliseconds` included (the library ignores
 * its zone), and the caller fails closed on it.
 */
import { EvaluationError, type ASTNode, type Environment } from "@marcbachmann/cel-js";

/** Distinct time-zone names whose formatter (or refusal) a process keeps; past it the oldest is dropped. */
export const MAX_CACHED_ZONES = 256;

const TIMESTAMP = "google.protobuf.Timestamp";
const DAY_MS = 86_400_000;

/** The accessors CEL defines on a timestamp, each reading a wall-clock Date's UTC fields. */
const ACCESSORS: Readonly<Record<string, (wall: Date) => number>> = {
  getFullYear: (w) => w.getUTCFullYear(),
  getMonth: (w) => w.getUTCMonth(),
  getDate: (w) => w.getUTCDate(),
  getDayOfMonth: (w) => w.getUTCDate() - 1,
  getDayOfWeek: (w) => w.getUTCDay(),
  getDayOfYear: (w) => {
    const start = new Date(0);
    start.setUTCFullYear(w.getUTCFullYear(), 0, 1);
    return Math.floor((w.getTime() - start.getTime()) / DAY_MS);
  },
  getHours: (w) => w.getUTCHours(),
  getMinutes: (w) => w.getUTCMinutes(),
  getSeconds: (w) => w.getUTCSeconds(),
  getMilliseconds: (w) => w.getUTCMilliseconds(),
};

/** The zone-less accessors whose library form is wrong in a process whose own zone has DST; the others read UTC fields already. */
const UTC_OVERRIDES = ["getDayOfYear"] as const;

const ZONED = "@zone";
const UTC = "@utc";

/** A zone's formatter and the last instant it formatted. */
interface Zone {
  readonly format: Intl.DateTimeFormat;
  ms: number;
  wall: Date;
}

/** Per zone name: its formatter, or why `Intl` refused the name. */
const zones = new Map<string, Zone | string>();

function zoneOf(timeZone: string): Zone {
  let zone = zones.get(timeZone);
  if (zone === undefined) {
    try {
      zone = {
        format: new Intl.DateTimeFormat("en-US", {
          timeZone,
          hourCycle: "h23",
          year: "numeric",
          month: "numeric",
          day: "numeric",
          hour: "numeric",
          minute: "numeric",
          second: "numeric",
        }),
        ms: Number.NaN,
        wall: new Date(Number.NaN),
      };
    } catch (err) {
      zone = err instanceof Error ? err.message : String(err);
    }
    if (zones.size >= MAX_CACHED_ZONES) zones.delete(zones.keys().next().value!);
    zones.set(timeZone, zone);
  }
  if (typeof zone === "string") throw new EvaluationError(zone);
  return zone;
}

/** `12/7/2026, 18:30:00`: what the formatter writes for en-US with a 24-hour clock. */
const FORMATTED = /^(\d+)\/(\d+)\/(\d+), (\d+):(\d+):(\d+)$/;

/**
 * Year, month (1-based), day, hour, minute, second of `ms` as `format` writes them: read from the
 * formatted text (several times cheaper than `formatToParts`), or from the parts should an ICU
 * release write the text otherwise. `via` forces one reading, for tests.
 */
export function wallFields(format: Intl.DateTimeFormat, ms: number, via?: "text" | "parts"): number[] {
  if (via !== "parts") {
    const m = FORMATTED.exec(format.format(ms));
    if (m) return [+m[3]!, +m[1]!, +m[2]!, +m[4]!, +m[5]!, +m[6]!];
    if (via === "text") throw new Error(`unexpected format: ${format.format(ms)}`);
  }
  const parts: Record<string, number> = {};
  for (const part of format.formatToParts(ms)) if (part.type !== "literal") parts[part.type] = Number(part.value);
  return [parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!, parts.second!];
}

/** `d`'s wall clock in `timeZone` as a Date whose UTC fields are the zone's local ones. */
function wallClock(d: Date, timeZone: string): Date {
  const zone = zoneOf(timeZone);
  const ms = d.getTime();
  if (ms === zone.ms) return zone.wall;
  const [year, month, day, hour, minute, second] = wallFields(zone.format, ms);
  const wall = new Date(0);
  wall.setUTCFullYear(year!, month! - 1, day!);
  wall.setUTCHours(hour!, minute!, second!, d.getUTCMilliseconds());
  zone.ms = ms;
  zone.wall = wall;
  return wall;
}

/** Registers the overloads {@link useZonedAccessors} renames calls to, on `env`. */
export function registerZonedAccessors(env: Environment): Environment {
  for (const [name, read] of Object.entries(ACCESSORS)) {
    env.registerFunction({
      name: `${name}${ZONED}`,
      receiverType: TIMESTAMP,
      returnType: "int",
      params: [{ name: "timeZone", type: "string" }],
      handler: (d: Date, timeZone: string) => BigInt(read(wallClock(d, timeZone))),
    });
  }
  for (const name of UTC_OVERRIDES) {
    const read = ACCESSORS[name]!;
    env.registerFunction({ name: `${name}${UTC}`, receiverType: TIMESTAMP, returnType: "int", params: [], handler: (d: Date) => BigInt(read(d)) });
  }
  return env;
}

/** The name a call to `name` with `arity` arguments on a timestamp is renamed to, if it is one of ours. */
function replacement(name: string, arity: number): string | undefined {
  if (arity === 1 && name in ACCESSORS) return `${name}${ZONED}`;
  if (arity === 0 && (UTC_OVERRIDES as readonly string[]).includes(name)) return `${name}${UTC}`;
  return undefined;
}

function visit(node: ASTNode, each: (node: ASTNode) => void): void {
  each(node);
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(walk);
    else if (typeof value === "object" && value !== null && typeof (value as { op?: unknown }).op === "string") visit(value as ASTNode, each);
  };
  if (node.op !== "value") walk(node.args);
}

/** Where `checked` (an expression the library has type-checked) calls an accessor of ours on a timestamp: `start:end` of each call. */
export function zonedAccessorCalls(checked: ASTNode): Set<string> {
  const calls = new Set<string>();
  visit(checked, (node) => {
    if (node.op !== "rcall") return;
    const [name, receiver, args] = node.args;
    // The checker records each node's type on it; a receiver of another or an unknown type keeps the library's overload.
    const receiverType = (receiver as { checkedType?: { name?: unknown } }).checkedType?.name;
    if (receiverType === TIMESTAMP && replacement(name, args.length)) calls.add(`${node.range.start}:${node.range.end}`);
  });
  return calls;
}

/**
 * Renames, in `fresh` (the same expression parsed again, not yet checked: the checker keeps what
 * it resolved on each node), the calls {@link zonedAccessorCalls} found to the overloads
 * {@link registerZonedAccessors} registered. Answers how many it renamed.
 */
export function useZonedAccessors(fresh: ASTNode, calls: ReadonlySet<string>): number {
  let renamed = 0;
  visit(fresh, (node) => {
    if (node.op !== "rcall" || !calls.has(`${node.range.start}:${node.range.end}`)) return;
    const args = node.args as unknown as [string, ASTNode, ASTNode[]];
    const name = replacement(args[0], args[2].length);
    if (name) {
      args[0] = name;
      renamed++;
    }
  });
  return renamed;
}

/** A message about one of our overloads, with the name the expression wrote. */
export function writtenNames(message: string): string {
  return message.replaceAll(ZONED, "").replaceAll(UTC, "");
}
